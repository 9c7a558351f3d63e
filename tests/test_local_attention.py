# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""WindowedSelfAttention (local attention) against a NumPy reference, its
step-by-step decoding, and baselines/local_attention.gin."""

import os

import gin
import mesh_tensorflow.transformer
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers
import numpy as np
import pytest

import decode_harness as dh
import layer_harness
from mtf_synthesizer.baselines import local_attention
from mtf_synthesizer.core import reference as ref
import t5.models

for _module in (mesh_tensorflow.transformer, t5.models):
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(_module.__file__), "gin"))

HEADS, DK, D_MODEL, BATCH, LENGTH, RADIUS = 2, 4, 8, 2, 7, 2


class _WithLayout:
  """Calls a layer after giving the harness's model mesh's layout fields.

  mesh's attention reads `context.model.layout` and `mesh_shape` (None: one
  device), which the harness's model lacks.
  """

  def __init__(self, layer):
    self.layer = layer

  def call(self, context, x, losses=None):
    context.model.layout = context.model.mesh_shape = None
    return self.layer.call(context, x, losses)


def _layer(cls=local_attention.WindowedSelfAttention, **kwargs):
  return _WithLayout(cls(num_heads=HEADS, key_value_size=DK,
                         relative_attention_type="bias", **kwargs))


def _x():
  return np.random.RandomState(0).randn(BATCH, LENGTH, D_MODEL).astype(
      np.float32)


def _reference(v, x, radius, causal):
  """Windowed multi-head attention with T5's relative bias, in NumPy."""
  pos = np.arange(LENGTH)
  relative = pos[None, :] - pos[:, None]   # memory minus query
  visible = (relative > -radius) & (relative <= (0 if causal else radius))
  bias = ref.relative_bias(v["relative_attention_bias"], LENGTH,
                           bidirectional=not causal)
  out = np.zeros(x.shape)
  for e in range(BATCH):
    for h in range(HEADS):
      cols = slice(h * DK, (h + 1) * DK)
      logits = (x[e] @ v["q"][:, cols]) @ (x[e] @ v["k"][:, cols]).T
      logits = np.where(visible, logits + bias[h], -np.inf)
      out[e] += ref.softmax(logits) @ (x[e] @ v["v"][:, cols]) @ v["o"][cols]
  return out


@pytest.mark.parametrize("causal", [False, True])
def test_forward_is_windowed_attention(causal):
  run = layer_harness.run_layer(_layer(radius=RADIUS), _x(), causal=causal)
  v = {k[len("layer/"):]: val.astype(np.float64)
       for k, val in run.variables.items()}
  np.testing.assert_allclose(run.output, _reference(v, _x(), RADIUS, causal),
                             rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_a_window_over_the_whole_sequence_is_self_attention(causal):
  ours = layer_harness.run_layer(_layer(radius=LENGTH), _x(), causal=causal)
  mesh = layer_harness.run_layer(
      _layer(transformer_layers.SelfAttention), _x(), causal=causal,
      variable_values=ours.variables)
  np.testing.assert_allclose(ours.output, mesh.output, rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def language_model():
  return dh.run_language_model([
      local_attention.WindowedSelfAttention(
          radius=3, num_heads=HEADS, key_value_size=DK,
          relative_attention_type="bias_shared"),
      transformer_layers.DenseReluDense(hidden_size=2 * dh.D_MODEL)])


def test_decoder_is_causal(language_model):
  dh.check_causal(language_model)


def test_step_by_step_decoding_computes_the_full_pass(language_model):
  # The window (3) is shorter than the sequence (8): the steps mask it too.
  dh.check_decodes_are_the_full_pass(language_model)


def test_radius_must_be_positive():
  with pytest.raises(ValueError, match="radius"):
    local_attention.WindowedSelfAttention(radius=0)


def test_baseline_file_puts_the_layer_in_every_stack_with_t5s_bindings():
  gin.clear_config()
  try:
    gin.parse_config_files_and_bindings(
        ["defaults.gin", "models/t5.1.1.tiny.gin",
         "baselines/local_attention.gin"],
        ["SelfAttention.dropout_rate = 0.25"])
    for scope in ("encoder", "decoder", None):
      with gin.config_scope(scope):
        first = transformer.make_layer_stack().layers[0]
      assert type(first) is local_attention.WindowedSelfAttention, scope
      assert first.radius == 128
      assert (first.num_heads, first.key_value_size) == (2, 64)  # tiny T5
      assert first.relative_attention_type == "bias_shared"
      assert first.dropout_rate == 0.25
  finally:
    gin.clear_config()


def test_baseline_file_decoder_decodes_its_full_pass():
  # The tiny T5 with a window of 2 (sequences of 8): causal decoder; a
  # greedy decode through mesh's own loop is the argmax of the full pass.
  run = dh.run_bitransformer(
      ["defaults.gin", "models/t5.1.1.tiny.gin",
       "baselines/local_attention.gin"],
      ["WindowedSelfAttention.radius = 2"])
  dh.check_causal(run)
  dh.check_decodes_are_the_full_pass(run)
