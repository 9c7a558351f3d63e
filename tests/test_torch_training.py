# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch model trains as a transformers model does, on CPU (issue 34).

Every input honoured and training flows, at tiny sizes, for every variant
of the paper's table (`attentions.VARIANTS`, each row's components in both
stacks):

  * `from_config` initializes every weight as `_init_weights` declares
    (one initializer each; no weight left at zero but those declared zero;
    every weight drawn, finite, seed-dependent unless declared constant;
    every function module declares the initializers of its weights; that
    they are mesh's is test_torch_follows_mesh.py's test) and learns a toy
    task in 100 Adafactor steps;
  * a causal LM's left-padded batch generates what each prompt generates
    alone (`attention_mask`, with the cache);
  * `output_attentions` returns the weights each layer used and
    `output_hidden_states` each block's input and the stack's output; sdpa
    and eager agree on logits and gradients;
  * gradient checkpointing gives the loss and gradients without it;
  * what the model does not support raises;
  * transformers' `Seq2SeqTrainer` finetunes it (also with gradient
    accumulation), and `save_pretrained`/`from_pretrained` keep its logits;
  * `torch.compile(fullgraph=True)` of a training step, and a compiled
    `generate()`, equal eager;
  * two processes (gloo) under DDP or FSDP2's `fully_shard` give one
    process's losses and weights at the same global batch
    (`torch_ddp_side.py`), and so does docs/pytorch.md's `torchrun` command
    of tools/train_fsdp.py.

The model is loaded as transformers loads an export: its two files copied
into a package of their own (no TensorFlow, mesh or this package).
"""

import contextlib
import functools
import json
import logging
import os
import re
import socket
import subprocess
import sys
import warnings

from huggingface_hub.errors import StrictDataclassError
import pytest
from safetensors import torch as safetensors_torch
import torch
from transformers import AutoModelForSeq2SeqLM
from transformers import Seq2SeqTrainer
from transformers import Seq2SeqTrainingArguments

import conftest
import doc_blocks
import model_code
import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_tools import mesh_training

# pylint: disable=protected-access

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
VOCAB, N = tiny_models.VOCAB, tiny_models.N
TOLERANCE = tiny_models.TOLERANCE
pytestmark = pytest.mark.usefixtures("one_thread")

# The tiny models and inputs, by their short names here.
_config = tiny_models.config
_seq2seq = tiny_models.seq2seq
_causal_lm = tiny_models.causal_lm
_perturb = tiny_models.perturb
_ids = tiny_models.ids
_padded_inputs = tiny_models.padded_inputs
_gradients = tiny_models.gradients
_loss_and_gradients = tiny_models.loss_and_gradients
_assert_close_gradients = tiny_models.assert_close_gradients


def _repeat_task(batch, seed):
  """Inputs: 3 tokens; targets: them, four times (a copy, then a period)."""
  inputs = _ids((batch, 3), seed)
  return inputs, inputs.repeat(1, 4)


# ---------------------------------------------------------------------------
# from_config: mesh's initializers, and it learns.


@contextlib.contextmanager
def _empty_is_nan():
  """torch.empty fills floating tensors with NaN: an undrawn weight shows."""
  empty = torch.empty

  def nan_empty(*args, **kwargs):
    tensor = empty(*args, **kwargs)
    if tensor.is_floating_point() and tensor.device.type != "meta":
      tensor.fill_(float("nan"))
    return tensor

  torch.empty = nan_empty
  try:
    yield
  finally:
    torch.empty = empty


def _constants(declared):
  """The weights `_init_weights` declares constant: name -> the value."""
  return {name: specs[0][1][0] for name, specs in declared.items()
          if specs[0][0] == "constant"}


@pytest.mark.parametrize("causal_lm", [False, True])
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_from_config_draws_every_weight(variant, causal_lm):
  """Each weight has one initializer; finite; two seeds draw differently
  unless its initializer is a constant (mesh's zeros, the norms' ones), and
  then both have that constant.

  The initializers are those `_init_weights` calls (`tiny_models.
  declared_initializers`); that they are mesh's, distribution by
  distribution, is test_torch_follows_mesh.py's test.
  """
  build = _causal_lm if causal_lm else _seq2seq
  with _empty_is_nan():
    first, declared = tiny_models.declared_initializers(
        functools.partial(build, variant.components, seed=0))
    second = tiny_models.weights(build(variant.components, seed=1))
  first = tiny_models.weights(first)
  assert sorted(first) == sorted(second)
  assert sorted(declared) == sorted(first)
  constants = _constants(declared)
  for name, tensor in first.items():
    assert len(declared[name]) == 1, (name, declared[name])
    assert bool(torch.isfinite(tensor).all()), name
    if name in constants:
      assert bool((tensor == constants[name]).all()), name
      assert bool((second[name] == constants[name]).all()), name
    else:
      assert not bool((tensor == second[name]).all()), name


def test_norms_and_embeddings_are_drawn_by_transformers_initializer(
    monkeypatch):
  """`_init_weights` calls transformers' own (`PreTrainedModel.
  _init_weights`) for every module it covers as mesh draws it: the norms
  and the token embeddings (not T5's relative bias, a table of its own),
  and for no other module."""
  from transformers import PreTrainedModel  # pylint: disable=g-import-not-at-top
  through = []
  original = PreTrainedModel._init_weights

  def recording(self, module):
    through.append(module)
    return original(self, module)

  monkeypatch.setattr(PreTrainedModel, "_init_weights", recording)
  modeling = model_code.load()
  model = _seq2seq(("random", "dot_product"), max_position_embeddings=16)
  covered = [m for m in model.modules()
             if isinstance(m, (modeling.MtfSynthesizerRMSNorm,
                               torch.nn.Embedding)) and
             not isinstance(m, modeling.MtfSynthesizerRelativeBias)]
  assert covered and {id(m) for m in through} == {id(m) for m in covered}
  for module in covered:
    if isinstance(module, torch.nn.Embedding):  # N(0, 1): mesh's
      assert abs(float(module.weight.std()) - 1.0) < 0.1
    else:
      assert bool((module.weight == 1).all())


def test_every_function_declares_its_initializers():
  """A function module's own weights all have an initializer."""
  modeling = model_code.load()
  config = _config(("dot_product",))
  for name, function in modeling.FUNCTIONS.items():
    for settings in (dict(synthesizer_use_bias=True),
                     dict(synthesizer_use_bias=False,
                          dense_share_query_projection=True)):
      for field, value in settings.items():
        setattr(config, field, value)
      module = function(config)
      own = {n for n, _ in module.named_parameters(recurse=False)} | {
          n for n, _ in module.named_buffers(recurse=False)}
      assert own == set(module.initializers(config)), name
      assert function.contributes in (modeling.COLUMNS, modeling.BIAS)
      assert function.name == name


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_from_config_initializes_every_weight(variant):
  """The weights at zero are exactly those declared zero; every buffer
  (Fix's R) is drawn."""
  for build in (_seq2seq, _causal_lm):
    model, declared = tiny_models.declared_initializers(
        functools.partial(build, variant.components))
    zero = [name for name, p in model.named_parameters()
            if not bool(p.detach().abs().sum())]
    expected = [name for name, _ in model.named_parameters()
                if _constants(declared).get(name) == 0.0]
    assert zero == expected
    for name, buffer in model.named_buffers():
      if buffer.is_floating_point():  # Fix's R
        assert bool(buffer.abs().sum()), name


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_from_config_learns_a_toy_task(variant):
  """Copy 3 tokens, then repeat them: 100 steps of `mesh_optimizer`.

  A model that only learned the tokens' frequencies stays near ln(62) =
  4.1 nats; half the first loss needs the copy (cross-attention) or the
  period (self-attention).

  Args:
    variant: a row of the table.
  """
  model = _seq2seq(variant.components)
  model.train()
  # mesh's Adafactor at a constant rate (mesh's default: 0.01 for 10k steps)
  optimizer, schedule = mesh_training.mesh_optimizer(model, constant=3e-2)
  losses = []
  for step in range(100):
    inputs, targets = _repeat_task(16, seed=step)
    loss = model(input_ids=inputs, labels=targets).loss
    loss.backward()
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
    losses.append(float(loss.detach()))
  model.eval()
  inputs, targets = _repeat_task(64, seed=1000)
  with torch.no_grad():
    held_out = float(model(input_ids=inputs, labels=targets).loss)
  assert sum(losses[-5:]) / 5 < 0.5 * losses[0], losses
  assert held_out < 0.5 * losses[0], (held_out, losses[0])


# ---------------------------------------------------------------------------
# Every input honoured.


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_left_padded_batch_generates_each_prompt_alone(variant):
  model = _perturb(_causal_lm(variant.components, num_layers=2))
  model.eval()
  # As in mesh, a sequence starts with id 0 (also the padding id: the
  # attention mask tells them apart).
  prompts = [[0] + _ids((n,), seed=n).tolist() for n in (5, 1, 3)]
  width = max(len(p) for p in prompts)
  batch = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
  mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p)
                       for p in prompts])
  settings = dict(max_new_tokens=6, do_sample=False, use_cache=True,
                  pad_token_id=0, eos_token_id=None,
                  return_dict_in_generate=True, output_scores=True)
  together = model.generate(input_ids=batch, attention_mask=mask,
                            **settings)
  assert together.sequences.shape == (3, width + 6)
  for row, prompt in enumerate(prompts):
    ids = torch.tensor([prompt])
    alone = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                           **settings)
    assert (together.sequences[row, width:].tolist() ==
            alone.sequences[0, len(prompt):].tolist()), row
    for step, scores in enumerate(alone.scores):
      difference = float((together.scores[step][row] - scores[0]).abs().max())
      assert difference < 1e-4, (row, step, difference)


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_generate_without_a_mask_reads_the_leading_zero(variant):
  """No attention_mask: every id is a token, mesh's leading 0 included."""
  model = _perturb(_causal_lm(variant.components))
  model.eval()
  ids = torch.tensor([[0] + _ids((4,), seed=7).tolist()])
  out = model.generate(input_ids=ids, max_new_tokens=1, do_sample=False,
                       pad_token_id=0, eos_token_id=None,
                       return_dict_in_generate=True, output_scores=True)
  with torch.no_grad():
    expected = model(input_ids=ids).logits[0, -1]
  assert float((out.scores[0][0] - expected).abs().max()) < 1e-5


@pytest.mark.parametrize("causal_lm", [False, True])
def test_resize_token_embeddings(causal_lm):
  """More rows: the embedding and the softmax grow; old rows are kept."""
  model = (_causal_lm if causal_lm else _seq2seq)(("random", "dot_product"))
  before = model.get_input_embeddings().weight.detach().clone()
  model.resize_token_embeddings(VOCAB + 8)
  assert model.get_input_embeddings().weight.shape[0] == VOCAB + 8
  assert model.get_output_embeddings().weight.shape[0] == VOCAB + 8
  assert model.config.vocab_size == VOCAB + 8
  assert torch.equal(model.get_input_embeddings().weight[:VOCAB], before)
  if not causal_lm:  # both stacks read the one shared table
    assert (model.model.encoder.embed_tokens is
            model.model.decoder.embed_tokens is model.model.shared)
  ids = torch.tensor([[0, VOCAB + 3, 5]])
  logits = (model(input_ids=ids).logits if causal_lm else
            model(input_ids=ids, decoder_input_ids=ids).logits)
  assert logits.shape[-1] == VOCAB + 8


def _record_attention(model):
  """Hooks every attention layer: its inputs, output and weights."""
  modeling = model_code.load()
  calls = []

  def hook(module, args, kwargs, output):
    source = kwargs.get("key_value_states")
    calls.append((module, args[0], args[0] if source is None else source,
                  output))

  handles = [m.register_forward_hook(hook, with_kwargs=True)
             for m in model.modules()
             if isinstance(m, modeling.MtfSynthesizerAttention)]
  return calls, handles


def _assert_weights_were_used(calls):
  """o(weights @ v(memory)) is each layer's output: the weights it used."""
  assert calls
  for module, hidden, memory, (out, weights) in calls:
    b, t, _ = hidden.shape
    values = module.v(memory).view(b, memory.shape[1], -1, module.d_kv)
    mixed = torch.matmul(weights, values.transpose(1, 2))
    recomputed = module.o(mixed.transpose(1, 2).reshape(b, t, -1))
    assert float((recomputed - out).abs().max()) < TOLERANCE


def _assert_weights(weights, layers, shape):
  assert len(weights) == layers
  for w in weights:
    assert tuple(w.shape) == shape
    assert torch.allclose(w.sum(-1), torch.ones(()), atol=TOLERANCE)
    assert float(w.min()) >= 0.0


def _record_block_inputs(model):
  modeling = model_code.load()
  inputs = {}

  def hook(module, args):
    inputs.setdefault(module, args[0])

  handles = [m.register_forward_pre_hook(hook) for m in model.modules()
             if isinstance(m, modeling.MtfSynthesizerBlock)]
  return inputs, handles


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_seq2seq_attentions_and_hidden_states(variant):
  layers = 2
  model = _perturb(_seq2seq(variant.components, num_layers=layers))
  model.eval()
  input_ids, mask, labels = _padded_inputs()
  decoder_ids = model.prepare_decoder_input_ids_from_labels(labels)
  with torch.no_grad():
    plain = model(input_ids=input_ids, attention_mask=mask,
                  decoder_input_ids=decoder_ids).logits
    calls, handles = _record_attention(model)
    block_inputs, block_handles = _record_block_inputs(model)
    out = model(input_ids=input_ids, attention_mask=mask,
                decoder_input_ids=decoder_ids, output_attentions=True,
                output_hidden_states=True)
    for handle in handles + block_handles:
      handle.remove()
    _assert_weights_were_used(calls)
  b, s = input_ids.shape
  t = decoder_ids.shape[1]
  heads = model.config.num_heads
  _assert_weights(out.encoder_attentions, layers, (b, heads, s, s))
  _assert_weights(out.decoder_attentions, layers, (b, heads, t, t))
  _assert_weights(out.cross_attentions, layers, (b, heads, t, s))
  padding = (mask == 0)[:, None, None, :]
  for w in out.encoder_attentions + out.cross_attentions:
    assert not bool(w.masked_select(padding).any())  # padding: exactly 0
  future = torch.ones(t, t, dtype=torch.bool).triu(1)
  for w in out.decoder_attentions:
    assert not bool(w[..., future].any())  # causal: exactly 0
  # The eager weights' logits are the default implementation's.
  assert float((out.logits - plain).abs().max()) < TOLERANCE
  encoder = model.get_encoder()
  decoder = model.get_decoder()
  for stack, states, ids in ((encoder, out.encoder_hidden_states, input_ids),
                             (decoder, out.decoder_hidden_states,
                              decoder_ids)):
    assert len(states) == layers + 1
    assert torch.equal(states[0], stack.embed_tokens(ids))
    for block, state in zip(stack.block, states):
      assert torch.equal(state, block_inputs[block])
  assert torch.equal(out.encoder_hidden_states[-1],
                     out.encoder_last_hidden_state)
  with torch.no_grad():
    logits = model.lm_head(out.decoder_hidden_states[-1])
  assert float((logits - out.logits).abs().max()) < TOLERANCE


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_causal_lm_attentions_and_hidden_states(variant):
  layers = 2
  model = _perturb(_causal_lm(variant.components, num_layers=layers))
  model.eval()
  ids = _ids((2, 7), seed=3)
  ids[:, 0] = 0
  ids[1, :2] = 0  # left padding
  mask = torch.ones_like(ids)
  mask[1, :2] = 0
  ids[1, 2] = 0
  with torch.no_grad():
    plain = model(input_ids=ids, attention_mask=mask).logits
    calls, handles = _record_attention(model)
    out = model(input_ids=ids, attention_mask=mask, output_attentions=True,
                output_hidden_states=True)
    for handle in handles:
      handle.remove()
    _assert_weights_were_used(calls)
  t = ids.shape[1]
  _assert_weights(out.attentions, layers, (2, model.config.num_heads, t, t))
  future = torch.ones(t, t, dtype=torch.bool).triu(1)
  for w in out.attentions:
    # A padding query sees nothing (its row is uniform and unused).
    assert not bool(w[0][:, future].any())
    assert not bool(w[1, :, 2:][:, future[2:]].any())
    assert not bool(w[1, :, 2:, :2].any())  # the padding
  assert float((out.logits - plain).abs().max()) < TOLERANCE
  assert len(out.hidden_states) == layers + 1
  assert torch.equal(out.hidden_states[0],
                     model.get_input_embeddings()(ids))
  with torch.no_grad():
    logits = model.lm_head(out.hidden_states[-1])
  assert float((logits - out.logits).abs().max()) < TOLERANCE


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_sdpa_and_eager_agree(variant):
  model = _perturb(_seq2seq(variant.components, num_layers=2))
  model.train()  # z_loss too; dropout_rate is 0
  input_ids, mask, labels = _padded_inputs()
  results = {}
  for implementation in ("eager", "sdpa"):
    model.set_attn_implementation(implementation)
    assert model.config._attn_implementation == implementation
    logits = model(input_ids=input_ids, attention_mask=mask,
                   labels=labels).logits.detach()
    results[implementation] = (logits,) + _loss_and_gradients(
        model, input_ids=input_ids, attention_mask=mask, labels=labels)
  (eager_logits, eager_loss, eager_grads) = results["eager"]
  (sdpa_logits, sdpa_loss, sdpa_grads) = results["sdpa"]
  assert float((eager_logits - sdpa_logits).abs().max()) < TOLERANCE
  assert abs(eager_loss - sdpa_loss) < TOLERANCE
  _assert_close_gradients(sdpa_grads, eager_grads)


@contextlib.contextmanager
def _counting_checkpoints(model):
  """Counts the blocks run under checkpointing (transformers' hook)."""
  modeling = model_code.load()
  count = [0]
  blocks = [m for m in model.modules()
            if isinstance(m, modeling.MtfSynthesizerBlock)]
  for block in blocks:
    function = block._gradient_checkpointing_func

    def counted(*args, function=function, **kwargs):
      count[0] += 1
      return function(*args, **kwargs)

    block._gradient_checkpointing_func = counted
  yield count


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_gradient_checkpointing_changes_nothing(variant):
  """As a Trainer calls the model: training mode, the config's use_cache."""
  cases = (
      (_seq2seq, dict(zip(("input_ids", "attention_mask", "labels"),
                          _padded_inputs()))),
      (_causal_lm, dict(input_ids=torch.cat(
          [torch.zeros(3, 1, dtype=torch.long), _ids((3, 8), 5)], 1))))
  for build, inputs in cases:
    if build is _causal_lm:
      inputs["labels"] = inputs["input_ids"]
    model = _perturb(build(variant.components, num_layers=2))
    model.train()
    loss, gradients = _loss_and_gradients(model, **inputs)
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", FutureWarning)  # its new name
      model.gradient_checkpointing_enable()
    with _counting_checkpoints(model) as count:
      checkpointed_loss, checkpointed = _loss_and_gradients(model, **inputs)
    assert count[0] == 2 * 2 if build is _seq2seq else 2
    assert abs(checkpointed_loss - loss) < TOLERANCE
    _assert_close_gradients(checkpointed, gradients)


def test_unsupported_inputs_raise():
  model = _seq2seq(("random", "dot_product"))
  lm = _causal_lm(("dense",))
  input_ids, mask, labels = _padded_inputs()
  with pytest.raises(TypeError, match="bogus"):
    model(input_ids=input_ids, labels=labels, bogus=1)
  with pytest.raises(TypeError, match="head_mask"):
    model(input_ids=input_ids, labels=labels, head_mask=torch.ones(1, 2))
  with pytest.raises(TypeError, match="position_ids"):
    model(input_ids=input_ids, labels=labels,
          position_ids=torch.zeros_like(input_ids))
  with pytest.raises(TypeError, match="bogus"):
    lm(input_ids=input_ids, bogus=1)
  # Longer than the tables: the encoder, the decoder, a causal LM, decoding.
  with pytest.raises(ValueError, match="max_length"):
    model(input_ids=_ids((1, N + 1), 0), labels=labels[:1])
  with pytest.raises(ValueError, match="max_length"):
    model(input_ids=input_ids, labels=_ids((3, N + 1), 0))
  with pytest.raises(ValueError, match="max_length"):
    lm(input_ids=_ids((1, N + 1), 0))
  with pytest.raises(ValueError, match="max_length"):
    lm.generate(input_ids=_ids((1, N - 2), 0), max_new_tokens=4,
                do_sample=False, eos_token_id=None)
  # Mesh's SelfAttention reads any length.
  _seq2seq(("dot_product",))(input_ids=_ids((1, N + 1), 0),
                             labels=_ids((1, N + 1), 1))
  with pytest.raises(ValueError, match="(?i)flash"):
    model.set_attn_implementation("flash_attention_2")


@pytest.mark.parametrize("fields", [
    dict(encoder_synthesizers=("random", "bogus")),
    dict(decoder_synthesizers=()),
    dict(decoder_synthesizers=("dense", "dense")),
    dict(feed_forward_proj="gelu-gated"),
    dict(encoder_synthesizers=("factorized_dense",),
         factorized_dense_factors=(4, 3)),
    dict(relative_attention_type="absolute"),
    dict(num_memory_heads=3),
], ids=lambda fields: ",".join(fields))
def test_bad_config_fields_raise(fields):
  with pytest.raises((ValueError, StrictDataclassError)):
    _config(("dot_product",), **fields)


def test_max_length_is_generates_and_the_config_says_so(caplog):
  """transformers drops a config's max_length (generate()'s setting), as
  T5Config does; the warning points to synthesizer_max_length."""
  with caplog.at_level(logging.WARNING):
    config = _config(("random",), max_length=2 * N)
  assert config.synthesizer_max_length == N
  assert "synthesizer_max_length" in caplog.text


def test_unknown_activation_raises():
  with pytest.raises(StrictDataclassError, match="activation"):
    _seq2seq(("dot_product",), feed_forward_proj="gated-bogus")


# ---------------------------------------------------------------------------
# Training flows.


def _trainer_dataset(size, seed):
  data = []
  for row in range(size):
    inputs, targets = _repeat_task(1, seed=seed + row)
    data.append({"input_ids": inputs[0],
                 "attention_mask": torch.ones_like(inputs[0]),
                 "labels": targets[0]})
  return data


def _trainer(model, output_dir, optimizers=(None, None), **settings):
  values = dict(output_dir=str(output_dir), per_device_train_batch_size=16,
                logging_steps=1, report_to=[], use_cpu=True,
                save_strategy="no", disable_tqdm=True, seed=0, data_seed=0,
                dataloader_drop_last=True, lr_scheduler_type="constant",
                weight_decay=0.0)
  values.update(settings)
  return Seq2SeqTrainer(model=model,
                        args=Seq2SeqTrainingArguments(**values),
                        train_dataset=_trainer_dataset(128, seed=0),
                        optimizers=optimizers)


def test_seq2seq_trainer_finetunes_and_reloads(tmp_path):
  pytest.importorskip("accelerate")  # the Trainer's requirement
  variant = attentions.get("R+V")
  model = _seq2seq(variant.components)
  trainer = _trainer(
      model, tmp_path / "run", max_steps=40,
      optimizers=mesh_training.mesh_optimizer(model, constant=3e-2))
  trainer.train()
  losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
  assert len(losses) == 40
  assert sum(losses[-5:]) / 5 < 0.5 * losses[0], losses
  model.eval()
  input_ids, mask, labels = _padded_inputs()
  with torch.no_grad():
    logits = model(input_ids=input_ids, attention_mask=mask,
                   labels=labels).logits
  trainer.save_model(str(tmp_path / "trained"))
  model.save_pretrained(str(tmp_path / "saved"))
  for directory in ("trained", "saved"):
    reloaded = type(model).from_pretrained(str(tmp_path / directory))
    assert not reloaded.training
    assert ({k: v for k, v in reloaded.config.to_dict().items()
             if k != "_name_or_path"} ==
            {k: v for k, v in model.config.to_dict().items()
             if k != "_name_or_path"})
    with torch.no_grad():
      again = reloaded(input_ids=input_ids, attention_mask=mask,
                       labels=labels).logits
    assert torch.equal(again, logits), directory


def test_trainer_gradient_accumulation_gives_the_full_batch(tmp_path):
  """2 x 4 accumulated is one step on 8 (same label tokens in each half)."""
  pytest.importorskip("accelerate")
  variant = attentions.get("D+V")
  results = []
  for batch, accumulation in ((8, 1), (4, 2)):
    model = _seq2seq(variant.components)
    trainer = _trainer(model, tmp_path / str(batch), max_steps=1,
                       optim="sgd", learning_rate=1.0, max_grad_norm=0.0,
                       per_device_train_batch_size=batch,
                       gradient_accumulation_steps=accumulation)
    trainer.train()
    loss = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    results.append((loss, [p.detach().clone() for p in model.parameters()]))
  (loss, weights), (accumulated_loss, accumulated) = results
  assert abs(loss[0] - accumulated_loss[0]) < 1e-4, (loss, accumulated_loss)
  for full, parts in zip(weights, accumulated):
    assert float((full - parts).abs().max()) < 1e-5


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_compiled_training_step_equals_eager(variant):
  torch._dynamo.reset()
  model = _perturb(_seq2seq(variant.components))
  model.train()
  input_ids, mask, labels = _padded_inputs()

  def step(input_ids, attention_mask, labels):
    return model(input_ids=input_ids, attention_mask=attention_mask,
                 labels=labels).loss

  compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
  results = []
  for function in (step, compiled):
    model.zero_grad()
    loss = function(input_ids, mask, labels)
    loss.backward()
    results.append((float(loss), _gradients(model)))
  (loss, gradients), (compiled_loss, compiled_gradients) = results
  assert abs(loss - compiled_loss) < TOLERANCE
  _assert_close_gradients(compiled_gradients, gradients)


def test_compiled_generate_equals_eager():
  torch._dynamo.reset()
  variant = attentions.get("R+V")
  model = _perturb(_seq2seq(variant.components))
  model.eval()
  input_ids, mask, _ = _padded_inputs()
  settings = dict(attention_mask=mask, max_new_tokens=8, do_sample=False,
                  eos_token_id=None)
  eager = model.generate(input_ids=input_ids, **settings)
  model.forward = torch.compile(model.forward, backend="aot_eager",
                                dynamic=True)
  compiled = model.generate(input_ids=input_ids, **settings)
  assert eager.shape == (3, 9)
  assert torch.equal(compiled, eager)


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


WRAPS = ("ddp", "fsdp")


@pytest.fixture(scope="module")
def data_parallel_runs(tmp_path_factory):
  """torch_ddp_side.py's results: two gloo ranks and one process alone."""
  root = tmp_path_factory.mktemp("data_parallel")
  cases = root / "cases.json"
  cases.write_text(json.dumps([list(v.components) for v in VARIANTS]))
  script = os.path.join(os.path.dirname(__file__), "torch_ddp_side.py")
  command = conftest.pytorch_python(root)
  port = _free_port()
  processes = []
  for rank, world in ((0, 2), (1, 2), (0, 1)):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world),
               LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    result = root / ("result_%d_of_%d.pt" % (rank, world))
    processes.append((result, subprocess.Popen(
        command + [script, ",".join(WRAPS), str(cases), str(result)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)))
  for _, process in processes:
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-5000:]
  return [torch.load(str(path)) for path, _ in processes]


@pytest.mark.parametrize("wrap", WRAPS)
def test_two_processes_equal_one(data_parallel_runs, wrap):
  """Every variant: 3 SGD steps, the batch halved over two gloo ranks.

  `ddp`: DistributedDataParallel; `fsdp`: FSDP2, each block (and T5's
  relative bias table) sharded as tools/train_fsdp.py shards them.

  Args:
    data_parallel_runs: the results of rank 0 and 1 of 2, and of 1 alone.
    wrap: the key of the wrap's results.
  """
  rank0, rank1, alone = (run[wrap] for run in data_parallel_runs)
  for variant in VARIANTS:
    key = "+".join(variant.components)
    assert len(alone[key]["losses"]) == 3
    for step, (a, b) in enumerate(zip(rank0[key]["losses"],
                                      alone[key]["losses"])):
      assert abs(a - b) < 1e-5, (key, step, a, b)
    for name, weight in alone[key]["weights"].items():
      for ranked in (rank0, rank1):
        difference = float((ranked[key]["weights"][name] - weight).abs().max())
        assert difference < 1e-5, (key, name, difference)


def _saved_with_code(model, path):
  """`save_pretrained` with the model's code and its Auto classes."""
  model.config.register_for_auto_class()
  model.register_for_auto_class("AutoModelForSeq2SeqLM")
  model.save_pretrained(path)
  return path


def test_fsdp_command_two_processes_equal_one(tmp_path):
  """docs/pytorch.md's torchrun command, on CPU: 2 processes as 1 process."""
  model = _perturb(_seq2seq(attentions.get("D+V").components, num_layers=2))
  start = _saved_with_code(model, tmp_path / "model")
  documented = doc_blocks.find("docs/pytorch.md", "train_fsdp.py")
  torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
  runs = {}
  for processes in (2, 1):
    out = tmp_path / ("trained_by_%d" % processes)
    argv = documented.substituted({
        "torchrun": torchrun,
        "--nproc_per_node=8": "--nproc_per_node=%d" % processes,
        "--model_dir=$MODEL_DIR/hf": "--model_dir=%s" % start,
        "--output_dir=$MODEL_DIR/hf_fsdp": "--output_dir=%s" % out,
        "--steps=1000": "--steps=3"})
    env = dict(os.environ, OMP_NUM_THREADS="1",
               HF_MODULES_CACHE=str(tmp_path / ("modules_%d" % processes)))
    runs[out] = subprocess.Popen(
        argv, cwd=conftest.REPO, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  losses = []
  for process in runs.values():
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-5000:]
    losses.append([float(x) for x in
                   re.findall(r"^step \d+ loss (\S+)$", output, re.M)])
  assert len(losses[0]) == 3
  assert losses[0] == pytest.approx(losses[1], abs=1e-5)
  (sharded, alone), initial = (
      [safetensors_torch.load_file(str(out / "model.safetensors"))
       for out in runs], model.state_dict())
  assert sorted(sharded) == sorted(alone)
  for name, weight in alone.items():
    difference = float((sharded[name] - weight).abs().max())
    assert difference < 1e-5, (name, difference)
  assert not torch.equal(alone["lm_head.weight"], initial["lm_head.weight"])
  trained = AutoModelForSeq2SeqLM.from_pretrained(
      str(list(runs)[0]), trust_remote_code=True)
  assert type(trained).__name__ == "MtfSynthesizerForConditionalGeneration"
  for name, weight in trained.state_dict().items():
    assert torch.equal(weight, sharded.get(name, weight)), name
