# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The fused attention path equals the eager reference (issue 40).

With `attn_implementation="sdpa"` each self-attention layer is one kernel
call whose queries and keys put every function's columns side by side (V's
queries and keys, D's [relu(W1 X + b1), 1] and [W2^T, b2], FR's R1 and R2
rows), with R, Fix, FD, the relative bias and the masks as its bias; with
"eager" each function's logits are materialized and added (the readable
reference). For every variant of the table (`attentions.VARIANTS`) and the
layout options mesh's exports use, the two give the same float32 logits
(relative 1e-5): an encoder-decoder's padded batch, a causal LM's
left-padded batch with per-example positions, and decoding step by step
with the cache; a training step's loss and gradients; bf16 autocast within
bf16's precision; `torch.compile(fullgraph=True)` of a training step
through the columns, and a compiled `generate()`. One kernel call per layer
is checked by recording the kernel's calls.
"""

import pytest
import torch

import model_code
import tiny_models
from mtf_synthesizer import attentions

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
TOLERANCE = 1e-5
pytestmark = pytest.mark.usefixtures("one_thread")
# mesh's layout options (export settings), each with every variant.
OPTIONS = {
    "t5": {},
    "scaled_queries_multi_query": dict(scale_queries=True,
                                       num_memory_heads=1),
    "bias_per_layer_no_function_bias": dict(relative_attention_type="bias",
                                            synthesizer_use_bias=False),
    "no_relative_bias_shared_query": dict(relative_attention_type=None,
                                          dense_share_query_projection=True,
                                          dense_hidden_size=8),
}


def _contributions(components, cuda=False):
  """What the functions give the kernel: {"columns", "bias"} (V: columns).

  With CUDA's layout (a bias may need a gradient) batch-free columns (FR's)
  join the bias.
  """
  functions = model_code.load().FUNCTIONS
  out = set()
  for name in components:
    function = functions[name]
    if function.needs_keys:
      out.add("columns")
    elif cuda and function.input_independent:
      out.add("bias")
    else:
      out.add(function.contributes)
  return out


@pytest.mark.parametrize("name", sorted(
    n for n, f in model_code.load().FUNCTIONS.items() if not f.needs_keys))
def test_input_independent_is_what_the_logits_are(name):
  """A function's logits on a batch of 2 have batch dimension 1 exactly
  where it declares `input_independent` (every function of FUNCTIONS)."""
  modeling = model_code.load()
  config = tiny_models.config((name,))
  function = modeling.FUNCTIONS[name](config)
  torch.manual_seed(0)
  for tensor in list(function.parameters()) + list(function.buffers()):
    torch.nn.init.normal_(tensor)
  length = 5
  hidden = torch.randn(2, length, config.d_model)
  queries = torch.randn(2, config.num_heads, length, config.d_kv)
  with torch.no_grad():
    logits = function.logits(hidden, queries,
                             modeling.Positions(0, length, length))
  assert logits.shape[1:] == (config.num_heads, length, length)
  assert logits.shape[0] == (1 if function.input_independent else 2), name


def _bias_per_example(components):
  """A function's bias differs per example (FD's: not `input_independent`,
  which test_input_independent_is_what_the_logits_are checks against the
  logits)."""
  functions = model_code.load().FUNCTIONS
  return any(functions[name].contributes == "bias" and
             not functions[name].input_independent for name in components)


def _relative(actual, expected):
  return float((actual - expected).abs().max() / expected.abs().max())


def _both(model, run):
  """run(model) with the eager reference, then with the fused sdpa path."""
  out = {}
  for implementation in ("eager", "sdpa"):
    model.set_attn_implementation(implementation)
    with torch.no_grad():
      out[implementation] = run(model)
  return out["eager"], out["sdpa"]


@pytest.mark.parametrize("options", sorted(OPTIONS))
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_seq2seq_fused_equals_eager(variant, options):
  model = tiny_models.perturb(tiny_models.seq2seq(
      variant.components, num_layers=2, **OPTIONS[options]))
  model.eval()
  input_ids, mask, labels = tiny_models.padded_inputs()
  eager, fused = _both(model, lambda m: m(
      input_ids=input_ids, attention_mask=mask, labels=labels).logits)
  assert _relative(fused, eager) < TOLERANCE


def _left_padded_batch():
  prompts = [[0] + tiny_models.ids((n,), seed=n).tolist() for n in (9, 2, 5)]
  width = max(len(p) for p in prompts)
  ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
  mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p)
                       for p in prompts])
  return ids, mask


def _stepped(model, ids, mask):
  """Logits of a left-padded batch: its first half, then 2 and 1 at a time.

  (One query is a decoding step; two read the cache through the columns.)
  """
  positions = (mask.cumsum(-1) - 1).clamp(min=0)
  half = ids.shape[1] // 2
  out = model(input_ids=ids[:, :half], attention_mask=mask[:, :half],
              position_ids=positions[:, :half], use_cache=True)
  logits, cache = [out.logits], out.past_key_values
  i = half
  while i < ids.shape[1]:
    j = min(i + 1 + len(logits) % 2, ids.shape[1])
    out = model(input_ids=ids[:, i:j], attention_mask=mask[:, :j],
                position_ids=positions[:, i:j], past_key_values=cache,
                use_cache=True)
    logits.append(out.logits)
    cache = out.past_key_values
    i = j
  return torch.cat(logits, dim=1)


def _causal_lm_both(variant, options):
  """A tiny causal LM's left-padded batch, eager and fused.

  Returns:
    (the model, ids, mask, eager logits, fused logits, the tokens' places:
    the padding's own rows attend to nothing, every logit masked).
  """
  model = tiny_models.perturb(tiny_models.causal_lm(
      variant.components, num_layers=2, **OPTIONS[options]))
  model.eval()
  ids, mask = _left_padded_batch()
  positions = (mask.cumsum(-1) - 1).clamp(min=0)
  eager, fused = _both(model, lambda m: m(
      input_ids=ids, attention_mask=mask, position_ids=positions,
      use_cache=False).logits)
  return model, ids, mask, eager, fused, mask.bool()


@pytest.mark.parametrize("options", sorted(OPTIONS))
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_causal_lm_fused_equals_eager(variant, options):
  model, ids, mask, eager, fused, tokens = _causal_lm_both(variant, options)
  assert _relative(fused[tokens], eager[tokens]) < TOLERANCE
  eager_steps, fused_steps = _both(model, lambda m: _stepped(m, ids, mask))
  assert _relative(fused_steps[tokens], eager[tokens]) < TOLERANCE
  assert _relative(eager_steps[tokens], eager[tokens]) < TOLERANCE


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_seq2seq_decoding_fused_equals_eager(variant):
  model = tiny_models.perturb(tiny_models.seq2seq(variant.components,
                                              num_layers=2))
  model.eval()
  input_ids, mask, labels = tiny_models.padded_inputs()
  decoder_ids = model._shift_right(labels)

  def stepped(m):
    memory = m.get_encoder()(input_ids=input_ids, attention_mask=mask)
    cache, logits = None, []
    i = 0
    while i < decoder_ids.shape[1]:  # 1, 2, 1, 2, ... tokens at a time
      j = min(i + 1 + len(logits) % 2, decoder_ids.shape[1])
      out = m(encoder_outputs=memory, attention_mask=mask,
              decoder_input_ids=decoder_ids[:, i:j],
              past_key_values=cache, use_cache=True)
      cache = out.past_key_values
      logits.append(out.logits)
      i = j
    return torch.cat(logits, dim=1)

  eager = model(input_ids=input_ids, attention_mask=mask,
                decoder_input_ids=decoder_ids).logits.detach()
  eager_steps, fused_steps = _both(model, stepped)
  assert _relative(eager_steps, eager) < TOLERANCE
  assert _relative(fused_steps, eager) < TOLERANCE


def test_dense_decoding_under_autocast_keeps_its_hidden_in_bf16():
  """A decoding step under bf16 autocast: D's relu(W1 X + b1) meets W2
  in bf16, not copied to float32 and back (two copies a layer a step). For
  every variant of the table with D."""
  from torch.utils import _python_dispatch  # pylint: disable=g-import-not-at-top

  class Copies(_python_dispatch.TorchDispatchMode):

    def __init__(self):
      super().__init__()
      self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
      out = func(*args, **(kwargs or {}))
      if (func.overloadpacket is torch.ops.aten._to_copy and
          args[0].dtype == torch.bfloat16 and out.dtype == torch.float32):
        self.shapes.append(tuple(out.shape))
      return out

  variants = [v for v in VARIANTS if "dense" in v.components]
  assert variants
  for variant in variants:
    model = tiny_models.perturb(tiny_models.seq2seq(variant.components))
    model.eval()
    config = model.config
    input_ids, mask, labels = tiny_models.padded_inputs()
    decoder_ids = model._shift_right(labels)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
      memory = model.get_encoder()(input_ids=input_ids, attention_mask=mask)
      cache = model(encoder_outputs=memory, attention_mask=mask,
                    decoder_input_ids=decoder_ids[:, :3],
                    use_cache=True).past_key_values
      with Copies() as copies:
        model(encoder_outputs=memory, attention_mask=mask,
              decoder_input_ids=decoder_ids[:, 3:4], past_key_values=cache,
              use_cache=True)
    hidden = (input_ids.shape[0], config.num_heads, 1, config.d_kv)
    assert hidden not in copies.shapes, (variant.label, copies.shapes)


def _recorded_widths(monkeypatch):
  """The query widths of the kernel calls that follow (a list it fills)."""
  widths = []
  kernel = torch.nn.functional.scaled_dot_product_attention

  def recording(query, *args, **kwargs):
    widths.append(query.shape[-1])
    return kernel(query, *args, **kwargs)

  monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                      recording)
  return widths


def _kernel_widths(model, monkeypatch, **inputs):
  """The query widths of the kernel calls of one forward pass."""
  widths = _recorded_widths(monkeypatch)
  with torch.no_grad():
    model(**inputs)
  return widths


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_one_kernel_call_per_layer(variant, monkeypatch):
  """Each layer with columns is one sdpa call of the summed width."""
  model = tiny_models.causal_lm(variant.components, num_layers=2)
  model.set_attn_implementation("sdpa")
  config = model.config
  # D's b2 joins the causal mask (a bias per key): no column of ones.
  width = {"dot_product": config.d_kv, "dense": config.d_kv,
           "factorized_random": config.factorized_random_k}
  columns = sum(width.get(name, 0) for name in variant.components)
  ids = tiny_models.ids((2, 5), seed=3)
  widths = _kernel_widths(model, monkeypatch, input_ids=ids)
  # Queries, keys and values have one width on CPU: the wider one's.
  assert widths == ([max(columns, config.d_kv)] * 2 if columns else [])


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_fused_training_step_equals_eager(variant, monkeypatch):
  """Loss and gradients through the columns (no bias needing a gradient)."""
  model = tiny_models.perturb(tiny_models.seq2seq(
      variant.components, num_layers=2, relative_attention_type=None))
  model.train()  # z_loss too; dropout_rate is 0
  input_ids, mask, labels = tiny_models.padded_inputs()
  results = {}
  for implementation in ("eager", "sdpa"):
    model.set_attn_implementation(implementation)
    results[implementation] = tiny_models.loss_and_gradients(
        model, input_ids=input_ids, attention_mask=mask, labels=labels)
  assert abs(results["sdpa"][0] - results["eager"][0]) < TOLERANCE
  tiny_models.assert_close_gradients(results["sdpa"][1], results["eager"][1])
  if "random" in variant.components:
    return  # R's table needs a gradient: on CPU the columns stay out
  # The masks need no gradient: D's b2 is a column against ones.
  columns = {"dot_product": model.config.d_kv,
             "dense": model.config.d_kv + 1,
             "factorized_random": model.config.factorized_random_k}
  width = sum(columns.get(name, 0) for name in variant.components)
  model.zero_grad()
  widths = _recorded_widths(monkeypatch)
  model(input_ids=input_ids, attention_mask=mask, labels=labels).loss.backward()
  # Four self-attention layers (besides cross-attention, d_kv wide); FR's
  # four columns alone are padded to d_kv.
  if width > model.config.d_kv:
    assert [w for w in widths if w != model.config.d_kv] == [width] * 4


@pytest.mark.parametrize("variant", [
    v for v in VARIANTS if "bias" not in _contributions(v.components)],
                         ids=lambda v: v.label)
def test_causal_training_gives_the_cpu_kernel_a_bias_without_gradient(
    variant, monkeypatch):
  """sdpa's CPU kernels take no bias that needs a gradient: with one they
  fall back to the math kernel, which writes the logits. A causal LM's
  training step without relative bias has the causal mask alone, and no
  function's bias per key (D's b2) gives it a gradient."""
  model = tiny_models.perturb(tiny_models.causal_lm(
      variant.components, num_layers=2, relative_attention_type=None))
  model.train()
  model.set_attn_implementation("sdpa")
  masks = []
  kernel = torch.nn.functional.scaled_dot_product_attention

  def recording(query, key, value, attn_mask=None, **kwargs):
    masks.append(attn_mask)
    return kernel(query, key, value, attn_mask=attn_mask, **kwargs)

  monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                      recording)
  ids = tiny_models.ids((2, 7), seed=5)
  model(input_ids=ids, labels=ids).loss.backward()
  assert len(masks) == 2
  assert not any(m is not None and m.requires_grad for m in masks)


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_dense_bias_as_a_column_without_other_bias(variant, monkeypatch):
  """An encoder with no mask and no relative bias: b2 against ones."""
  model = tiny_models.perturb(tiny_models.seq2seq(
      variant.components, num_layers=2, relative_attention_type=None))
  model.eval()
  encoder = model.get_encoder()
  input_ids = tiny_models.ids((3, 9), seed=4).clamp(min=2)  # no padding
  eager, fused = _both(model, lambda m: m.get_encoder()(
      input_ids=input_ids).last_hidden_state)
  assert _relative(fused, eager) < TOLERANCE
  config = model.config
  # A function that contributes a bias (R, Fix, FD) takes b2 in.
  no_bias = "bias" not in _contributions(variant.components)
  width = {"dot_product": config.d_kv, "dense": config.d_kv + no_bias,
           "factorized_random": config.factorized_random_k}
  columns = sum(width.get(name, 0) for name in variant.components)
  widths = _kernel_widths(encoder, monkeypatch, input_ids=input_ids)
  assert widths == ([max(columns, config.d_kv)] * 2 if columns else [])


def _cuda_layout(monkeypatch):
  """The CUDA kernel's layout on CPU (sdpa's math kernel computes it).

  Returns:
    The (query, key, value) widths of the kernel calls that follow.
  """
  attention = model_code.load("attention")
  monkeypatch.setattr(attention, "_kernel_layout", lambda is_cuda, has_bias: (
      attention.KernelLayout(8, has_bias, True)))
  calls = []
  kernel = torch.nn.functional.scaled_dot_product_attention

  def recording(query, key, value, attn_mask=None, **kwargs):
    # CUDA's fused kernels read every tensor's last dimension with stride 1.
    strides = [x.stride(-1) for x in (query, key, value, attn_mask)
               if x is not None]
    assert strides == [1] * len(strides)
    # cuDNN's kernel fails on narrower values: the model takes it out.
    assert torch.backends.cuda.cudnn_sdp_enabled() == (
        value.shape[-1] == query.shape[-1])
    calls.append((query.shape[-1], key.shape[-1], value.shape[-1],
                  bool(query.abs().sum() == 0), attn_mask.shape[0]))
    return kernel(query, key, value, attn_mask=attn_mask, **kwargs)

  monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                      recording)
  return calls


@pytest.mark.parametrize("options", sorted(OPTIONS))
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_cuda_layout_fused_equals_eager(variant, options, monkeypatch):
  """CUDA's layout: values narrower than queries and keys, under a bias.

  A training step of a seq2seq's padded batch (its relative bias needs a
  gradient and stays in the kernel) and a causal LM's left-padded batch.
  """
  model = tiny_models.perturb(tiny_models.seq2seq(
      variant.components, num_layers=2, **OPTIONS[options]))
  model.train()
  input_ids, mask, labels = tiny_models.padded_inputs()
  model.set_attn_implementation("eager")
  eager = tiny_models.loss_and_gradients(
      model, input_ids=input_ids, attention_mask=mask, labels=labels)
  calls = _cuda_layout(monkeypatch)
  model.set_attn_implementation("sdpa")
  fused = tiny_models.loss_and_gradients(
      model, input_ids=input_ids, attention_mask=mask, labels=labels)
  assert abs(fused[0] - eager[0]) < TOLERANCE
  tiny_models.assert_close_gradients(fused[1], eager[1])
  # In the kernel: 2 cross-attention layers and the 4 self-attention ones,
  # but for R, Fix, FR, FD alone those whose bias is shared by the batch
  # (the decoder's: its softmax is computed once); each call has a bias
  # (masks), so values of their own width; queries and keys a multiple of
  # 8.
  d_kv = model.config.d_kv
  assert all(v == d_kv and q == k and q % 8 == 0
             for q, k, v, _, _ in calls)
  if "factorized_random" in variant.components:
    # FR's logits are batch-free: in the bias, not k columns more.
    assert all(zero or q == -(-d_kv // 8) * 8
               for q, _, _, zero, _ in calls), calls
  if "columns" in _contributions(variant.components, cuda=True):
    assert len(calls) == 6 and not any(zero for *_, zero, _ in calls[:2])
  else:  # on zero queries and keys: R's, Fix's encoder (a padded batch)
    zero_calls = [c for c in calls if c[3]]
    self_layers = 4 if _bias_per_example(variant.components) else 2
    assert len(zero_calls) == self_layers and len(calls) == self_layers + 2
    assert all(q == 8 and batch == 3 for q, _, _, _, batch in zero_calls)
  _, _, _, eager, fused, tokens = _causal_lm_both(variant, options)
  assert _relative(fused[tokens], eager[tokens]) < TOLERANCE


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_compiled_step_with_the_cuda_layout(variant, monkeypatch):
  """fullgraph compile through narrower values and the kernel's backends."""
  torch._dynamo.reset()
  model = tiny_models.perturb(tiny_models.seq2seq(variant.components))
  model.set_attn_implementation("sdpa")
  model.train()
  input_ids, mask, labels = tiny_models.padded_inputs()
  kernel = torch.nn.functional.scaled_dot_product_attention
  calls = _cuda_layout(monkeypatch)

  def step(input_ids, attention_mask, labels):
    return model(input_ids=input_ids, attention_mask=attention_mask,
                 labels=labels).loss

  model.zero_grad()
  step(input_ids, mask, labels).backward()
  expected = (len(calls), tiny_models.gradients(model))
  model.zero_grad()
  # The kernel itself under compile (the recorder reads global flags).
  monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                      kernel)
  compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
  compiled(input_ids, mask, labels).backward()
  tiny_models.assert_close_gradients(tiny_models.gradients(model),
                                     expected[1])
  # The uncompiled run's calls, recorded: cross-attention, and the two
  # self-attention layers where they have columns or a bias per example
  # (only the encoder's for R, Fix: a padded batch).
  columns = "columns" in _contributions(variant.components, cuda=True)
  assert expected[0] == 1 + (2 if columns or _bias_per_example(
      variant.components) else 1)


def _batch_free_bias(components):
  """Every function is a bias without a batch dimension (R, Fix)."""
  return (_contributions(components) == {"bias"} and
          not _bias_per_example(components))


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_weights_shared_by_the_batch_are_not_copied_per_example(
    implementation, monkeypatch):
  """R's, Fix's softmax(bias) V on an unpadded batch: the weights
  [1, heads, t, s] meet each example's values without a [batch, heads, t,
  s] copy being saved for the backward; the gradients are the broadcast
  matmul's. For every variant of the table whose bias is batch-free."""
  variants = [v for v in VARIANTS if _batch_free_bias(v.components)]
  assert variants
  attention = model_code.load("attention")
  batch, heads, length = 3, 2, tiny_models.N
  input_ids = tiny_models.ids((batch, length), 0)
  labels = tiny_models.ids((batch, 4), 1)
  for variant in variants:
    # t > d_kv: the batch's values are the smaller copy.
    model = tiny_models.perturb(tiny_models.seq2seq(
        variant.components, d_kv=4, num_heads=heads))
    model.set_attn_implementation(implementation)
    model.train()
    shapes = []

    def pack(tensor):
      shapes.append(tuple(tensor.shape))
      return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
      loss = model(input_ids=input_ids, labels=labels).loss
    assert shapes
    per_example = [s for s in shapes if s[-2:] == (length, length) and
                   s[:-2] in ((batch, heads), (batch * heads,))]
    assert not per_example, (variant.label, per_example)
    loss.backward()
    ours = tiny_models.gradients(model)
    model.zero_grad()

    def copied(module, value, bias, dropout=0.0):
      weights = torch.softmax(bias.float(), dim=-1).to(value.dtype)
      out = torch.matmul(weights.expand(value.shape[0], -1, -1, -1), value)
      return out.transpose(1, 2).contiguous(), weights

    monkeypatch.setattr(attention, "synthesized_attention_forward", copied)
    model(input_ids=input_ids, labels=labels).loss.backward()
    monkeypatch.undo()
    tiny_models.assert_close_gradients(ours, tiny_models.gradients(model))


def test_bias_per_example_in_autocast_dtype(monkeypatch):
  """FD's [batch, heads, t, s] bias reaches the kernel in autocast's dtype.

  Under bf16 autocast with CUDA's layout (FD's bias differs per example:
  the kernel on zero queries and keys), the bias is bf16 where it is
  written, not float32 cast by the kernel; the loss is eager's within
  bf16's precision. For every variant of the table with such a bias.
  """
  variants = [v for v in VARIANTS if _bias_per_example(v.components)]
  assert variants
  for variant in variants:
    model = tiny_models.perturb(tiny_models.seq2seq(variant.components,
                                                    num_layers=2))
    model.train()
    input_ids, mask, labels = tiny_models.padded_inputs()

    def loss(m):
      with torch.autocast("cpu", dtype=torch.bfloat16):
        return float(m(input_ids=input_ids, attention_mask=mask,
                       labels=labels).loss.detach())

    model.set_attn_implementation("eager")
    torch.manual_seed(0)
    eager = loss(model)
    calls = _cuda_layout(monkeypatch)
    recorded = torch.nn.functional.scaled_dot_product_attention
    dtypes = []

    def recording(query, key, value, attn_mask=None, **kwargs):
      dtypes.append((bool(query.abs().sum() == 0), attn_mask.dtype))
      return recorded(query, key, value, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        recording)
    model.set_attn_implementation("sdpa")
    torch.manual_seed(0)
    fused = loss(model)
    assert len(dtypes) == len(calls) > 2, variant.label
    assert [d for zero, d in dtypes if zero] == [torch.bfloat16] * 4, (
        variant.label, dtypes)
    assert abs(fused - eager) < 3e-2 * abs(eager), (variant.label, fused,
                                                    eager)
    monkeypatch.undo()


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_bf16_autocast_fused_equals_eager(variant):
  """Under CPU bf16 autocast: within bf16's precision (8 bits)."""
  model = tiny_models.perturb(tiny_models.seq2seq(variant.components,
                                              num_layers=2))
  model.eval()
  input_ids, mask, labels = tiny_models.padded_inputs()

  def run(m):
    with torch.autocast("cpu", dtype=torch.bfloat16):
      return m(input_ids=input_ids, attention_mask=mask,
               labels=labels).logits.float()

  eager, fused = _both(model, run)
  assert _relative(fused, eager) < 3e-2


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_compiled_fused_step_and_generate(variant):
  """Compiled (fullgraph): a training step through the columns, generate()."""
  torch._dynamo.reset()
  model = tiny_models.perturb(tiny_models.seq2seq(
      variant.components, relative_attention_type=None))
  model.set_attn_implementation("sdpa")
  model.train()
  input_ids, mask, labels = tiny_models.padded_inputs()

  def step(input_ids, attention_mask, labels):
    return model(input_ids=input_ids, attention_mask=attention_mask,
                 labels=labels).loss

  results = []
  for function in (step, torch.compile(step, backend="aot_eager",
                                       fullgraph=True)):
    model.zero_grad()
    loss = function(input_ids, mask, labels)
    loss.backward()
    results.append((float(loss), tiny_models.gradients(model)))
  assert abs(results[0][0] - results[1][0]) < TOLERANCE
  tiny_models.assert_close_gradients(results[1][1], results[0][1])
  model.eval()
  settings = dict(attention_mask=mask, max_new_tokens=4, do_sample=False,
                  eos_token_id=None)
  eager = model.generate(input_ids=input_ids, **settings)
  model.forward = torch.compile(model.forward, backend="aot_eager",
                                dynamic=True)
  assert torch.equal(model.generate(input_ids=input_ids, **settings), eager)
