# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Flax model gives mesh's outputs from the checkpoints the CLI wrote.

Every case of tests/data/mesh_reference/ (tools/mesh_reference.py: the
stock CLI's checkpoint of a tiny model, every variant of the table as a
T5.1.0 encoder-decoder, language models, T5.1.1, a `model:2` run and
bfloat16 variables, and mesh's values on fixed inputs, which
tests/test_mesh_reference.py recomputes with mesh) is read without
TensorFlow (`flax_model.mesh_checkpoint`) into the Flax model of the
case's sizes, which must give mesh's encoder outputs, logits and
teacher-forced losses within 1e-5 relative and its greedy decodes token for
token.

Outputs are compared at the positions that are not padding: at a padding
position mesh's sequence-id mask lets the padding attend to the padding,
the Flax model (as T5X) masks padding among the keys only; nothing reads
those outputs (the loss skips them, and no query attends to padding).
"""

import json
import os

import jax
import numpy as np
import pytest

from mtf_synthesizer import attentions
from mtf_synthesizer.flax_model import decoding
from mtf_synthesizer.flax_model import losses
from mtf_synthesizer.flax_model import mesh_checkpoint
from mtf_synthesizer.flax_model import t5

ROOT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                    "mesh_reference")
CASES = sorted(n for n in os.listdir(ROOT)
               if os.path.exists(os.path.join(ROOT, n, "case.json")))
EOS = 1
# mesh's own SelfAttention (a released T5's layout) is the Flax V.
FLAX_VARIANT = {attentions.MESH_SELF_ATTENTION.name: "vanilla"}
RTOL = 1e-5


def model_of(case: dict) -> t5.T5Config:
  """The Flax model of a kept case (its case.json)."""
  dims, layout = case["dims"], case["case"]["layout"]
  gated = layout == "t5.1.1"
  config = t5.T5Config(
      vocab_size=case["vocab_size"], d_model=dims["d_model"],
      num_heads=dims["num_heads"], head_dim=dims["d_kv"],
      d_ff=dims["d_ff"], num_encoder_layers=dims["num_layers"],
      num_decoder_layers=dims["num_layers"],
      activations=("gelu", "linear") if gated else ("relu",),
      logits_via_embedding=not gated, dropout_rate=0.0,
      variant=FLAX_VARIANT.get(case["case"]["variant"],
                               case["case"]["variant"]),
      max_length=case["length"])
  return t5.make_model(decoder_only=case["case"]["model_type"] == "lm",
                       config=config)


def clean_decodes(tokens: np.ndarray) -> np.ndarray:
  """Every token after a row's first EOS is 0 (mesh's `clean_decodes`)."""
  after = np.cumsum(np.cumsum(tokens == EOS, axis=1), axis=1) > 1
  return np.where(after, 0, tokens)


def close(actual, expected, where=None) -> float:
  """max |actual - expected| / max |expected|, at `where` (broadcast)."""
  actual, expected = np.asarray(actual, np.float64), np.asarray(expected)
  if where is not None:
    where = np.broadcast_to(where, expected.shape)
    actual, expected = actual[where], expected[where]
  return float(np.max(np.abs(actual - expected)) / np.max(np.abs(expected)))


@pytest.fixture(name="case", params=CASES, scope="module")
def fixture_case(request):
  path = os.path.join(ROOT, request.param)
  with open(os.path.join(path, "case.json")) as f:
    case = json.load(f)
  case.setdefault("vocab_size", 384)
  model = model_of(case)
  loaded = mesh_checkpoint.load(model, path)
  arrays = dict(np.load(os.path.join(path, "reference.npz")))
  return request.param, case, model, loaded, arrays


def test_every_weight_is_read(case):
  _, _, model, loaded, _ = case
  assert loaded.fresh == [] and loaded.unused == []
  assert loaded.restored == sorted(mesh_checkpoint.expected_shapes(model))


def test_outputs_and_losses_equal_mesh(case):
  name, case_json, model, loaded, arrays = case
  variables = {"params": loaded.params}
  targets = arrays["targets"]
  counted = (targets > 0)[..., None]
  if case_json["case"]["model_type"] == "lm":
    logits = model.apply(variables, arrays["decoder_inputs"],
                         enable_dropout=False)
  else:
    encoded = model.apply(variables, arrays["inputs"], enable_dropout=False,
                          method=t5.EncoderDecoder.encode)
    assert close(encoded, arrays["encoder_output"],
                 (arrays["inputs"] > 0)[..., None]) < RTOL, name
    logits = model.apply(variables, arrays["inputs"],
                         arrays["decoder_inputs"], enable_dropout=False)
  assert close(logits, arrays["logits"], counted) < RTOL, name
  assert close(losses.loss(logits, targets, train=False),
               arrays["loss"]) < RTOL, name
  assert close(losses.loss(logits, targets, train=True),
               arrays["train_loss"]) < RTOL, name


def test_greedy_decodes_equal_the_clis(case):
  name, case_json, model, loaded, arrays = case
  length = arrays["targets"].shape[1]
  if case_json["case"]["model_type"] == "lm":
    prompts = arrays["prompts"]
    tokens, _ = decoding.greedy_decode(model, loaded.params, length,
                                       forced_tokens=prompts)
    tokens = np.asarray(tokens)
    # The continuation, its prompt removed (mesh's remove_partial_sequences).
    given = (prompts != 0).sum(axis=1)
    tokens = np.stack([np.pad(row[n:], (0, n)) for row, n in
                       zip(tokens, given)])
  else:
    tokens, _ = decoding.greedy_decode(model, loaded.params, length,
                                       encoder_input_tokens=arrays["inputs"])
  np.testing.assert_array_equal(clean_decodes(np.asarray(tokens)),
                                arrays["decodes"], err_msg=name)


def test_the_cases_cover_every_variant():
  variants = set()
  for name in CASES:
    with open(os.path.join(ROOT, name, "case.json")) as f:
      case = json.load(f)["case"]
    if case["model_type"] == "bitransformer" and case["layout"] == "t5.1.0":
      variants.add(case["variant"])
  assert variants == set(attentions.VARIANT_NAMES)
  assert jax.devices()[0].platform == "cpu"
