# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Equality with the original release; causality; decoding = full forward."""

import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import layer_harness
import lowering as lowering_lib
import mtf_synthesizer as ms
from mtf_synthesizer.checkpoints import release

HEADS, DK, D_MODEL = 2, 4, 8

CORRECT_MODES = ["random", "dense_minus", "random_plus", "random_plus_alpha",
                 "dense_plus", "dense_plus_alpha"]


@pytest.mark.parametrize("mode", CORRECT_MODES)
def test_same_weights_same_outputs_as_release(mode):
  x = np.random.RandomState(0).randn(2, 6, D_MODEL).astype(np.float32)
  original = transformer_layers.Synthesizer(
      synthesize_mode=mode, num_heads=HEADS, key_value_size=DK)
  values = {}
  if "alpha" in mode:  # move alpha off its zero initial value
    values["layer/alpha"] = np.array([0.7], np.float32)
  theirs = layer_harness.run_layer(original, x, causal=True,
                                   variable_values=values)
  # The release's variables, under its class scope, mapped to ours.
  converted = release.convert_variables(
      {"m/Synthesizer/" + k[len("layer/"):]: v
       for k, v in theirs.variables.items()}, num_heads=HEADS)
  ours_values = {"layer/" + k[len("m/SynthesizerAttention/"):]: v
                 for k, v in converted.items()}
  layer = ms.SynthesizerAttention(synthesize_mode=mode, max_length=512,
                                  num_heads=HEADS, key_value_size=DK)
  ours = layer_harness.run_layer(layer, x, causal=True,
                                 variable_values=ours_values)
  assert sorted(ours.variables) == sorted(ours_values)
  np.testing.assert_allclose(ours.output, theirs.output, rtol=1e-5,
                             atol=1e-6)


def test_release_factorized_is_degenerate_and_not_converted():
  x = np.random.RandomState(0).randn(1, 5, D_MODEL).astype(np.float32)
  original = transformer_layers.Synthesizer(
      synthesize_mode="factorized", num_heads=HEADS, key_value_size=DK)
  theirs = layer_harness.run_layer(original, x)
  with pytest.raises(ValueError, match="broken 'factorized'"):
    release.convert_variables(
        {"m/Synthesizer/" + k[len("layer/"):]: v
         for k, v in theirs.variables.items()}, num_heads=HEADS)


def test_unknown_mode_lists_valid_ones():
  with pytest.raises(ValueError, match="dense_plus_alpha.*random_plus_alpha"):
    ms.SynthesizerAttention(synthesize_mode="randm")


def test_errors_at_graph_build():
  x = np.zeros((1, 6, D_MODEL), np.float32)
  with pytest.raises(ValueError, match="max_length is 4"):
    layer_harness.run_layer(ms.SynthesizerAttention(
        synthesizers=[ms.Random()], max_length=4, num_heads=HEADS,
        key_value_size=DK), x)
  with pytest.raises(ValueError, match="a \\* b == max_length"):
    layer_harness.run_layer(ms.SynthesizerAttention(
        synthesizers=[ms.FactorizedDense(a=3, b=3)], max_length=8,
        num_heads=HEADS, key_value_size=DK), x)
  with pytest.raises(ValueError, match="at least one"):
    ms.SynthesizerAttention(synthesizers=[])
  with pytest.raises(ValueError, match="each synthesizing function once"):
    ms.SynthesizerAttention(synthesizers=[ms.Random(), ms.Random()])


# Every variant of the table, by its label: its functions at small sizes.
_ARGS = {"factorized_random": {"k": 2}}
VARIANTS = {
    v.label: [ms.synthesizers.BY_NAME[c](**_ARGS.get(c, {}))
              for c in v.components]
    for v in ms.attentions.VARIANTS}


def _lm(synthesizers, vocab=16, length=8):
  layer = ms.SynthesizerAttention(synthesizers=synthesizers, max_length=8,
                                  num_heads=HEADS, key_value_size=DK)
  stack = transformer.LayerStack(
      [layer, transformer_layers.DenseReluDense(hidden_size=16)],
      sublayers_initial=[],
      sublayers_per_layer=[transformer.sublayer_rms_norm,
                           transformer.sublayer_call_layer,
                           transformer.sublayer_residual],
      sublayers_final=[transformer.sublayer_rms_norm])
  return transformer.Unitransformer(
      layer_stack=stack, d_model=D_MODEL, input_vocab_size=vocab,
      output_vocab_size=vocab, autoregressive=True, max_length=length)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_causal_and_decoding_equals_full_forward(name):
  """Greedy step-by-step decoding matches the full forward pass.

  Also causality: logits at positions < 4 do not change when the tokens
  from position 4 on change.
  """
  batch, length, vocab = 2, 8, 16
  rng = np.random.RandomState(1)
  ids_a = rng.randint(2, vocab, size=(batch, length)).astype(np.int32)
  ids_b = ids_a.copy()
  ids_b[:, 4:] = rng.randint(2, vocab, size=(batch, length - 4))
  prefix = ids_a.copy()
  prefix[:, 3:] = 0  # decode positions 3.. greedily
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.set_random_seed(0)
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    batch_dim = mtf.Dimension("batch", batch)
    length_dim = mtf.Dimension("length", length)
    model = _lm(VARIANTS[name])

    def imp(a):
      return mtf.import_tf_tensor(mesh, tf.constant(a),
                                  [batch_dim, length_dim])
    with tf.variable_scope("lm", reuse=tf.AUTO_REUSE):
      logits_a, _ = model.call_simple(imp(ids_a), None, False,
                                   mode=tf.estimator.ModeKeys.EVAL)
      logits_b, _ = model.call_simple(imp(ids_b), None, False,
                                   mode=tf.estimator.ModeKeys.EVAL)
      decoded = model.sample_autoregressive(
          imp(prefix), stop_at_token=999, temperature=0.0)  # never stop
      # The sampler feeds the sequence shifted right by one; so does this.
      logits_full, _ = model.call_simple(
          transformer.autoregressive_inputs(decoded), None, False,
                                      mode=tf.estimator.ModeKeys.EVAL)
    lowering = lowering_lib.lower(graph, mesh)
    fetch = [lowering.export_to_tf_tensor(t)
             for t in (logits_a, logits_b, decoded, logits_full)]
    with tf.Session(graph=tf_graph) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(lowering.copy_masters_to_slices())
      la, lb, tokens, lfull = sess.run(fetch)
  np.testing.assert_allclose(la[:, :4], lb[:, :4], rtol=1e-5, atol=1e-5)
  assert not np.allclose(la[:, 4:], lb[:, 4:])
  np.testing.assert_array_equal(tokens[:, :3], ids_a[:, :3])
  # Full forward over the decoded sequence predicts each decoded token.
  full = np.argmax(lfull, axis=-1)
  np.testing.assert_array_equal(full[:, 3:], tokens[:, 3:])
