# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The decoding step's fast paths compute what the full pass computes.

  * the cache write (`ops.positions.write_state`) is mesh's one-hot update;
  * a row lookup smaller than its table (`gather_positions` in place) is
    NumPy's gather;
  * step-by-step decoding of every variant (mixture weights, biases and
    tables random) gives the full pass's logits, with the position tables
    as long as the sequence and longer (R's row, D's W2 product on the
    token's hidden layer, FD's outer product cut to the memory length);
  * FD's outer product over a memory length that is not a multiple of a
    matches the NumPy reference, forward and gradients.
"""

import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer_layers
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import decode_harness as dh
import layer_harness
import lowering as lowering_lib
import mtf_synthesizer as ms
from mtf_synthesizer import attentions
from mtf_synthesizer.core import reference as ref
from mtf_synthesizer.core import synthesizers
from mtf_synthesizer.ops import positions as positions_lib

HEADS, DK = 2, 4


def _run_mtf(build):
  """Lowers `build(mesh)` (a dict of mtf Tensors) on one device; NumPy."""
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    outputs = build(mesh)
    lowering = lowering_lib.lower(graph, mesh)
    fetch = {k: lowering.export_to_tf_tensor(t) for k, t in outputs.items()}
    with tf.Session(graph=tf_graph) as sess:
      return sess.run(fetch)


def test_write_state_is_meshs_one_hot_update():
  rng = np.random.RandomState(0)
  batch, memory, heads, d = (mtf.Dimension("batch", 3),
                             mtf.Dimension("memory_length", 5),
                             mtf.Dimension("heads", 2),
                             mtf.Dimension("d_kv", 4))
  old = rng.randn(3, 5, 2, 4).astype(np.float32)
  # The step's keys in another order than the cache's, as mesh lays them.
  new = rng.randn(3, 4, 2).astype(np.float32)
  position = np.array([0, 4, 2], np.int32)

  def build(mesh):
    old_t = mtf.import_tf_tensor(mesh, old, [batch, memory, heads, d])
    new_t = mtf.import_tf_tensor(mesh, new, [batch, d, heads])
    position_t = mtf.import_tf_tensor(mesh, position, [batch])
    one_hot = mtf.one_hot(position_t, memory, dtype=tf.float32)
    at = mtf.equal(mtf.range(mesh, memory, tf.int32), position_t)
    meshs = old_t * (1.0 - one_hot) + new_t * one_hot
    return {"ours": positions_lib.write_state(old_t, new_t, at),
            "mesh": mtf.transpose(meshs, old_t.shape)}

  out = _run_mtf(build)
  np.testing.assert_array_equal(out["ours"], out["mesh"])
  expected = old.copy()
  expected[np.arange(3), position] = new.transpose(0, 2, 1)
  np.testing.assert_array_equal(out["ours"], expected)


@pytest.mark.parametrize("positions_last", [False, True])
def test_row_lookup_reads_the_table_in_place(positions_last):
  rng = np.random.RandomState(1)
  table = rng.randn(2, 6, 5).astype(np.float32)  # heads, positions, memory
  position = np.array([5, 0, 3], np.int32)
  heads, rows, memory = (mtf.Dimension("heads", 2),
                         mtf.Dimension("rows", 6),
                         mtf.Dimension("memory_length", 5))
  batch = mtf.Dimension("batch", 3)

  def build(mesh):
    table_t = mtf.import_tf_tensor(mesh, table, [heads, rows, memory])
    position_t = mtf.import_tf_tensor(mesh, position, [batch])
    return {"rows": positions_lib.gather_positions(
        table_t, rows, position_t, positions_last=positions_last,
        batch_dims=[batch])}

  got = _run_mtf(build)["rows"]
  want = table[:, position, :]  # heads, batch, memory
  want = (want.transpose(0, 2, 1) if positions_last else
          want.transpose(1, 0, 2))
  np.testing.assert_array_equal(got, want)


def _layer(components, max_length):
  functions = [synthesizers.FactorizedRandom(k=3)
               if name == "factorized_random"
               else synthesizers.BY_NAME[name]() for name in components]
  return ms.SynthesizerAttention(
      synthesizers=functions, max_length=max_length, num_heads=HEADS,
      key_value_size=DK, relative_attention_type="bias_shared")


@pytest.mark.parametrize("max_length", [dh.LENGTH, 12])
@pytest.mark.parametrize("name", attentions.VARIANT_NAMES)
def test_stepped_decoding_is_the_full_pass(name, max_length):
  run = dh.run_language_model([
      _layer(attentions.get(name).components, max_length),
      transformer_layers.DenseReluDense(hidden_size=2 * dh.D_MODEL)])
  dh.check_causal(run)
  dh.check_decodes_are_the_full_pass(run)


def test_factorized_dense_columns_cut_to_the_memory_length():
  # max_length 12: a = 3, b = 4; 7 positions use 3 rows of B (9 columns).
  x = np.random.RandomState(2).randn(2, 7, 8).astype(np.float32)

  def layer():
    return ms.SynthesizerAttention(
        synthesizers=[synthesizers.FactorizedDense()], max_length=12,
        num_heads=HEADS, key_value_size=DK)

  first = layer_harness.run_layer(layer(), x, causal=True)
  rng = np.random.RandomState(3)
  run = layer_harness.run_layer(layer(), x, causal=True, variable_values={
      k: rng.randn(*v.shape).astype(np.float32)
      for k, v in first.variables.items() if not np.any(v)})

  def reference(v, xs):
    return ref.layer_output(["factorized_dense"], v, xs, HEADS, DK,
                            causal=True)

  np.testing.assert_allclose(
      run.output, reference(layer_harness.local_variables(run.variables), x),
      rtol=2e-4, atol=2e-5)
  layer_harness.assert_gradients_match(run, x, reference)
