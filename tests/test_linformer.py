# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""LinformerAttention against the NumPy reference, and what it refuses."""

import gin
import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import layer_harness
from mtf_synthesizer.baselines import linformer
from mtf_synthesizer.core import reference as ref

HEADS, DK, D_MODEL, K = 2, 4, 8, 3
BATCH, LENGTH, MAX_LEN = 2, 6, 8
# Row 0 ends in two padding tokens (id 0); row 1 has none.
TOKENS = np.array([[5, 3, 7, 2, 0, 0], [4, 9, 4, 6, 8, 3]])
PAD = TOKENS == 0


class _WithContext:
  """Calls a layer after setting what the harness's Context lacks.

  Attributes:
    layer: the layer under test.
    tokens: [batch, length] ids (0 = padding) or None.
    via: how mesh marks padding: "inputs" (context.inputs, as in an
      encoder-only model) or "sequence_id" (mtf.minimum(inputs, 1), as in
      an unpacked encoder).
    mode: a context.mode to force, or None.
  """

  def __init__(self, layer, tokens=None, via="inputs", mode=None):
    self.layer, self.tokens, self.via, self.mode = layer, tokens, via, mode

  def call(self, context, x, losses=None):
    if self.tokens is not None:
      ids = mtf.import_tf_tensor(
          context.mesh, tf.constant(self.tokens, tf.int32),
          context.batch_dims + [context.length_dim])
      if self.via == "inputs":
        context.inputs = ids
      else:
        context.sequence_id = mtf.minimum(ids, 1)
    if self.mode is not None:
      context.mode = self.mode
    return self.layer.call(context, x, losses)


def _x(seed=0, length=LENGTH):
  return np.random.RandomState(seed).randn(BATCH, length, D_MODEL).astype(
      np.float32)


def _layer(**kwargs):
  kwargs.setdefault("num_heads", HEADS)
  kwargs.setdefault("key_value_size", DK)
  kwargs.setdefault("k", K)
  kwargs.setdefault("max_length", MAX_LEN)
  return linformer.LinformerAttention(**kwargs)


_local = layer_harness.local_variables


# (sharing arguments, how padding is marked: None for no padding, max_length)
CASES = {
    "per_head": (dict(), "inputs", MAX_LEN),
    "headwise": (dict(headwise_sharing=True), None, MAX_LEN),
    "key_value": (dict(key_value_sharing=True), "sequence_id", MAX_LEN),
    "both_full_length": (dict(headwise_sharing=True,
                              key_value_sharing=True), "inputs", None),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case_run(request):
  sharing, via, max_length = CASES[request.param]
  x = _x()
  layer = _WithContext(_layer(max_length=max_length, **sharing),
                       TOKENS if via else None, via or "inputs")
  run = layer_harness.run_layer(layer, x)
  nonpadding = (~PAD).astype(np.float64) if via else None
  return request.param, x, nonpadding, run


def test_variables_follow_the_sharing_options(case_run):
  name, _, _, run = case_run
  sharing, _, max_length = CASES[name]
  rows = max_length or LENGTH
  projection = ([rows, K] if sharing.get("headwise_sharing") else
                [HEADS, rows, K])
  expected = {"q": [D_MODEL, HEADS * DK], "k": [D_MODEL, HEADS * DK],
              "v": [D_MODEL, HEADS * DK], "o": [HEADS * DK, D_MODEL],
              "E": projection}
  if not sharing.get("key_value_sharing"):
    expected["F"] = projection
  got = {k: list(v.shape) for k, v in _local(run.variables).items()}
  assert got == expected


def test_forward_matches_numpy(case_run):
  _, x, nonpadding, run = case_run
  expected = ref.linformer(_local(run.variables), x.astype(np.float64),
                           HEADS, DK, nonpadding)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)


def test_gradients_match_numpy(case_run):
  _, x, nonpadding, run = case_run
  layer_harness.assert_gradients_match(
      run, x, lambda v, xs: ref.linformer(v, xs, HEADS, DK, nonpadding))
  assert len(run.grads) == len(run.variables) + 1


def test_padding_contributes_nothing():
  # Other values at the padded positions: the real positions' outputs stay.
  x = _x()
  other = x.copy()
  other[PAD] = np.random.RandomState(7).randn(PAD.sum(), D_MODEL) * 5
  runs = [layer_harness.run_layer(_WithContext(_layer(), TOKENS), inputs)
          for inputs in (x, other)]
  np.testing.assert_allclose(runs[0].output[~PAD], runs[1].output[~PAD],
                             rtol=1e-5, atol=1e-6)
  # Without the padding marks the same change does reach them.
  plain = [layer_harness.run_layer(_layer(), inputs) for inputs in (x, other)]
  assert not np.allclose(plain[0].output[~PAD], plain[1].output[~PAD],
                         atol=1e-3)


def test_one_head():
  run = layer_harness.run_layer(_layer(num_heads=1), _x())
  v = _local(run.variables)
  assert list(v["E"].shape) == [MAX_LEN, K]
  np.testing.assert_allclose(
      run.output, ref.linformer(v, _x().astype(np.float64), 1, DK),
      rtol=2e-4, atol=2e-5)


def test_causal_use_is_refused():
  with pytest.raises(ValueError, match="not causal.*encoder"):
    layer_harness.run_layer(_layer(), _x(), causal=True)


@pytest.mark.parametrize("mode", ["incremental", "first_part"])
def test_incremental_decoding_is_refused(mode):
  with pytest.raises(ValueError, match="cannot decode incrementally"):
    layer_harness.run_layer(_WithContext(_layer(), mode=mode), _x())


def test_packed_batches_are_refused():
  segments = np.array([[1, 1, 1, 2, 2, 2], [1, 1, 1, 1, 1, 1]])
  with pytest.raises(ValueError, match="mesh_train_dataset_fn.pack = False"):
    layer_harness.run_layer(_layer(), _x(), segment_ids=segments)


def test_longer_than_max_length_is_refused():
  with pytest.raises(ValueError, match="LinformerAttention.max_length = 6"):
    layer_harness.run_layer(_layer(max_length=4), _x())


@pytest.mark.parametrize("kwargs,named", [
    (dict(relative_attention_type="bias"), "no relative position bias"),
    (dict(shared_kv=True), "key_value_sharing"),
    (dict(num_memory_heads=1), "num_memory_heads"),
    (dict(attention_kwargs={"extra_logit": 0.0}), "extra_logit"),
    (dict(k=0), "k must be positive"),
])
def test_settings_it_cannot_honour_are_refused(kwargs, named):
  with pytest.raises(ValueError, match=named):
    _layer(**kwargs)


def test_self_attention_bindings_reach_it_but_not_the_bias():
  gin.clear_config()
  try:
    gin.parse_config([
        "SelfAttention.relative_attention_type = 'bias_shared'",
        "SelfAttention.dropout_rate = 0.25",
        "SelfAttention.num_heads = 3",
    ])
    layer = linformer.LinformerAttention()
  finally:
    gin.clear_config()
  assert layer.relative_attention_type is None
  assert layer.dropout_rate == 0.25 and layer.num_heads == 3
