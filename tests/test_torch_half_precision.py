# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""float16 and bfloat16 with padding: finite logits that follow float32.

A masked position's bias is the dtype's minimum (`torch.finfo(dtype).min`),
as transformers builds its masks: a bias that overflows the dtype (mesh's
-1e9 is -inf in float16) turns a row with no visible key (a left-padded
query) into NaN, which the next layer's values carry to every position.
For every variant of the table and both heads, eager and sdpa, left- and
right-padded, with and without `output_attentions`, the logits of each
half-precision copy of one float32 model are finite at every real position
and close to float32's there.
"""

import copy

import pytest
import torch

import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
HEADS = ("seq2seq", "causal_lm")
# Logits of a two-block model of width 32 in each dtype, against float32's.
# The outputs' attention weights, by head.
ATTENTIONS = ("attentions", "encoder_attentions", "decoder_attentions",
              "cross_attentions")
TOLERANCES = {torch.float16: 2e-2, torch.bfloat16: 1.5e-1}

pytestmark = pytest.mark.usefixtures("one_thread")


def _batch(head, side, seed=0):
  """Two sequences of 8, the second with 3 padded positions on `side`."""
  generator = torch.Generator().manual_seed(seed)
  ids = torch.randint(2, tiny_models.RANDOM_MODEL_VOCAB, (2, 8),
                      generator=generator)
  mask = torch.ones_like(ids)
  padded = slice(0, 3) if side == "left" else slice(5, 8)
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
  key = (variant.label, head)
  if key not in models:
    models[key] = tiny_models.random_model(
        modeling, variant.components, head == "causal_lm", seed=0)
  return models[key]


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_half_precision_logits_are_finite_and_follow_float32(
    models, variant, head):
  reference = _model(models, variant, head)
  failures = []
  for implementation in ("eager", "sdpa"):
    for side in ("left", "right"):
      batch = _batch(head, side)
      real = _real(head, batch)
      for output_attentions in (False, True):
        reference.set_attn_implementation(implementation)
        with torch.no_grad():
          expected = reference(**batch, use_cache=False).logits
        for dtype, tolerance in TOLERANCES.items():
          half = _cast_copy(reference, dtype, implementation)
          with torch.no_grad():
            out = half(**batch, use_cache=False,
                       output_attentions=output_attentions)
          logits = out.logits.float()[real]
          case = (implementation, side, output_attentions, dtype)
          if not torch.isfinite(logits).all():
            failures.append(case + ("not finite",))
            continue
          error = (logits - expected[real]).abs().max().item()
          if error > tolerance:
            failures.append(case + (error,))
          if output_attentions:
            weights = [w for name in ATTENTIONS for w in getattr(
                out, name, None) or () if w is not None]
            if not weights or not all(
                torch.isfinite(w).all() for w in weights):
              failures.append(case + ("attention weights not finite",))
  assert not failures, failures


def _cast_copy(model, dtype, implementation):
  """A copy of the model in `dtype` with the attention implementation."""
  half = copy.deepcopy(model).to(dtype)
  half.set_attn_implementation(implementation)
  return half
