# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""float16 and bfloat16 with padding: finite logits that follow float32.

A masked logit is the minimum of the dtype the kernel computes in
(`torch.finfo(dtype).min`), selected once the relative bias and the
synthesized logits are summed (`attention_mtf_synthesizer.masked_bias`): a
bias that leaves the dtype (mesh's -1e9 is -inf in float16, and so is the
float16 minimum plus a row of logits at -40) turns a row with no visible key
(a left-padded query) into NaN, which the next layer's values carry to
every position.

Softmax leaves each row's level free, so a trained, converted or exported
model may hold synthesized rows far from zero. Each model of the table is
checked at its random weights and at two draws away from them
(`_drawn`): R's and Fix's tables, FR's product and D's and FD's outputs
spread to tens and shifted as a whole by -40 or +40, with the mixture
weights (alpha) saturated at the first function or at the last. For every
variant and both heads, eager and sdpa, left- and right-padded, with and
without `output_attentions`, and decoding step by step with the cache, the
logits of each half-precision copy of a float32 model are finite at every
real position and close to float32's there.
"""

import copy

import pytest
import torch

import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_model import functions_mtf_synthesizer as functions
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
HEADS = ("seq2seq", "causal_lm")
# The outputs' attention weights, by head.
ATTENTIONS = ("attentions", "encoder_attentions", "decoder_attentions",
              "cross_attentions")
DTYPES = (torch.float16, torch.bfloat16)
# The draws of weights (`_drawn`): None keeps the random weights; else the
# shift of the synthesized rows and the function alpha is saturated at.
DRAWS = {"random": None, "low": (-40.0, 0), "high": (40.0, -1)}
# The largest difference from float32's logits at a real position, relative
# to the largest of float32's logits there (or 1), in units of the dtype's
# epsilon (float16 9.8e-4, bfloat16 7.8e-3), for a two-block model of width
# 32: at the random weights, and at drawn ones, whose attention logits near
# 40 + 30 are rounded by about 50 epsilon each before the softmax. Measured
# over the table: at most 3.2 and 4.4 epsilon at random weights, 18 and 37
# drawn (float16, bfloat16); docs/pytorch.md gives the figures.
EPSILONS = {"random": 16, "drawn": 64}
# How far the drawn synthesized logits spread about their shift.
SPREAD = 10.0
# The positions of `_batch`'s sequences; the prompt of the cached decoding.
LENGTH, PROMPT = 8, 5

pytestmark = pytest.mark.usefixtures("one_thread")


def _batch(head, side, seed=0):
  """Two sequences of 8, the second with 3 padded positions on `side`."""
  generator = torch.Generator().manual_seed(seed)
  ids = torch.randint(2, tiny_models.RANDOM_MODEL_VOCAB, (2, LENGTH),
                      generator=generator)
  mask = torch.ones_like(ids)
  padded = slice(0, 3) if side == "left" else slice(LENGTH - 3, LENGTH)
  ids[1, padded] = 0
  mask[1, padded] = 0
  batch = {"input_ids": ids, "attention_mask": mask}
  if head == "seq2seq":
    targets = torch.randint(2, tiny_models.RANDOM_MODEL_VOCAB, (2, 5),
                            generator=generator)
    batch["decoder_input_ids"] = targets
  return batch


def _real(head, batch):
  """The positions of the logits that are real tokens: [batch, length]."""
  if head == "seq2seq":
    return torch.ones_like(batch["decoder_input_ids"], dtype=torch.bool)
  return batch["attention_mask"].bool()


@pytest.fixture(scope="module")
def models():
  """One float32 model per variant and head, built once."""
  return {}


def _model(models, variant, head):
  """The float32 model of a variant and head (`models`' own, built once)."""
  key = (variant.label, head)
  if key not in models:
    models[key] = tiny_models.random_model(
        modeling, variant.components, head == "causal_lm", seed=0)
  return models[key]


def _draw_function(function, shift, generator):
  """Gives a function's logits a spread of tens about `shift` (in place).

  The first layers' outputs relu(W1 x + b1) have about unit scale here.

  Args:
    function: a synthesizing function's module.
    shift: the level of its logits.
    generator: draws the weights.

  Raises:
    KeyError: a function this test cannot draw.
  """
  def normal(tensor, std):
    tensor.copy_(std * torch.randn(tensor.shape, generator=generator))

  root = abs(shift)**0.5
  sign = 1.0 if shift >= 0 else -1.0
  name = function.name
  if name == "dot_product":  # the layer's own; drawn by random_model
    return
  if name in ("random", "fixed_random"):
    normal(function.R, SPREAD)
    function.R.add_(shift)
  elif name == "factorized_random":
    k = function.R1.shape[-1]
    for table in (function.R1, function.R2):
      normal(table, (SPREAD / (k - 1)**0.5)**0.5)
    # One column of each gives every product the shift.
    function.R1[..., 0] = root
    function.R2[..., 0] = sign * root
  elif name == "dense":
    normal(function.w2, SPREAD / function.hidden_size**0.5)
    function.b2.fill_(shift)
  elif name == "factorized_dense":
    # C = A B with A and B about root and sign * root, each spread by 3.
    for weights in (function.wa, function.wb):
      normal(weights, 3.0 / function.hidden_size**0.5)
    function.ba.fill_(root)
    function.bb.fill_(sign * root)
  else:
    raise KeyError("no draw for the synthesizing function %r" % name)


def _drawn(model, draw, seed=1):
  """A copy of the model with its synthesized rows drawn (`DRAWS`).

  Args:
    model: a float32 model.
    draw: a key of DRAWS.
    seed: draws the weights.

  Returns:
    The copy (the model itself for "random").
  """
  if DRAWS[draw] is None:
    return model
  shift, saturated = DRAWS[draw]
  model = copy.deepcopy(model)
  generator = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for module in model.modules():
      if isinstance(module, functions.MtfSynthesizerFunction):
        _draw_function(module, shift, generator)
      alpha = getattr(module, "alpha_logits", None)
      if alpha is not None:
        alpha.fill_(-30.0)
        alpha[saturated] = 30.0
  return model


def test_every_function_can_be_drawn():
  """A new synthesizing function gets a draw here before the test runs."""
  config = tiny_models.config(tuple(functions.FUNCTIONS), modeling=modeling)
  generator = torch.Generator().manual_seed(0)
  with torch.no_grad():
    for cls in functions.FUNCTIONS.values():
      _draw_function(cls(config), -40.0, generator)


def _error(logits, expected, real):
  """The largest difference at a real position, relative to float32's."""
  scale = max(float(expected[real].abs().max()), 1.0)
  return float((logits[real] - expected[real]).abs().max()) / scale


def _decoded(model, head, batch):
  """The logits of decoding step by step with the cache.

  The prompt in one call, then one token a call, as `generate()` calls
  the model (positions from the attention mask), the tokens given.

  Args:
    model: the model.
    head: "seq2seq" (the decoder's inputs decoded) or "causal_lm".
    batch: `_batch`'s inputs.

  Returns:
    float32 logits [batch, t, vocab] of every position decoded.
  """
  if head == "seq2seq":
    targets = batch["decoder_input_ids"]
    common = {"input_ids": batch["input_ids"],
              "attention_mask": batch["attention_mask"]}
    steps = [slice(0, 2)] + [slice(i, i + 1)
                             for i in range(2, targets.shape[1])]
    calls = [dict(common, decoder_input_ids=targets[:, step])
             for step in steps]
  else:
    ids, mask = batch["input_ids"], batch["attention_mask"]
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    steps = [slice(0, PROMPT)] + [slice(i, i + 1)
                                  for i in range(PROMPT, ids.shape[1])]
    calls = [{"input_ids": ids[:, step],
              "attention_mask": mask[:, :step.stop],
              "position_ids": positions[:, step]} for step in steps]
  cache, logits = None, []
  with torch.no_grad():
    for call in calls:
      out = model(**call, past_key_values=cache, use_cache=True)
      cache = out.past_key_values
      logits.append(out.logits.float())
  return torch.cat(logits, dim=1)


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_half_precision_logits_are_finite_and_follow_float32(
    models, variant, head):
  failures = []
  for draw in DRAWS:
    reference = _drawn(_model(models, variant, head), draw)
    halves = {dtype: copy.deepcopy(reference).to(dtype) for dtype in DTYPES}
    for implementation in ("eager", "sdpa"):
      reference.set_attn_implementation(implementation)
      for half in halves.values():
        half.set_attn_implementation(implementation)
      for side in ("left", "right"):
        batch = _batch(head, side)
        real = _real(head, batch)
        with torch.no_grad():
          expected = reference(**batch, use_cache=False).logits
        decoded = _decoded(reference, head, batch)
        for dtype, half in halves.items():
          case = (draw, implementation, side, dtype)
          tolerance = _tolerance(dtype, draw)
          for output_attentions in (False, True):
            with torch.no_grad():
              out = half(**batch, use_cache=False,
                         output_attentions=output_attentions)
            failures += _check(out.logits.float(), expected, real,
                               tolerance,
                               case + ("output_attentions",) * (
                                   output_attentions))
            if output_attentions:
              weights = [w for name in ATTENTIONS for w in getattr(
                  out, name, None) or () if w is not None]
              if not weights or not all(
                  torch.isfinite(w).all() for w in weights):
                failures.append(case + ("attention weights not finite",))
          failures += _check(_decoded(half, head, batch), decoded, real,
                             tolerance, case + ("cached decoding",))
  assert not failures, failures


def _tolerance(dtype, draw):
  """The largest relative difference from float32's logits (`EPSILONS`)."""
  epsilons = EPSILONS["random" if DRAWS[draw] is None else "drawn"]
  return epsilons * torch.finfo(dtype).eps


def _check(logits, expected, real, tolerance, case):
  """[] where the logits are finite at real positions and within tolerance.

  Args:
    logits: the half-precision model's, in float32.
    expected: float32's.
    real: the real positions [batch, length].
    tolerance: relative to float32's largest logit (`_error`).
    case: what names the failure.

  Returns:
    A list of at most one failure.
  """
  if not torch.isfinite(logits[real]).all():
    return [case + ("not finite",)]
  error = _error(logits, expected, real)
  return [case + (error,)] if error > tolerance else []
