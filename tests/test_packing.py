# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Packed batches without explicit positions (T5's model files).

T5's model files set `positional_embedding = False`; mesh then hands the
layers default (row) positions even for packed batches, and only the
segment ids tell the segments apart. The position-indexed functions must
still read their tables at positions inside each segment.
"""

import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import layer_harness
import lowering as lowering_lib
import mtf_synthesizer as ms
from mtf_synthesizer.core import layer as layer_lib
from mtf_synthesizer.core import reference as ref
from mtf_synthesizer.ops import positions as positions_lib

HEADS, DK, D_MODEL, MAX_LEN = 2, 4, 8, 8
SEGMENTS = np.array([[1, 1, 1, 2, 2, 2, 2, 0],
                     [1, 1, 2, 3, 3, 3, 0, 0]])
POSITIONS = np.array([[0, 1, 2, 0, 1, 2, 3, 0],
                      [0, 1, 0, 0, 1, 2, 0, 1]])  # written out by hand


def _run_tf(fn):
  with tf.Graph().as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    out = fn(mesh)
    lowering = lowering_lib.lower(graph, mesh)
    with tf.Session() as sess:
      return sess.run(lowering.export_to_tf_tensor(out))


def _import(mesh, array, names):
  dims = [mtf.Dimension(n, s) for n, s in zip(names, array.shape)]
  return mtf.import_tf_tensor(mesh, tf.constant(array, tf.int32), dims)


def test_positions_in_segments_match_hand_written():
  def fn(mesh):
    ids = _import(mesh, SEGMENTS, ["batch", "length"])
    return positions_lib.positions_in_segments(ids, ids.shape.dims[1])
  np.testing.assert_array_equal(_run_tf(fn), POSITIONS)


def test_positions_in_segments_length_not_last():
  # [length, batch, beam]: the length axis is found by its dimension.
  ids = np.stack([SEGMENTS.T, SEGMENTS.T[:, ::-1]], axis=-1)

  def fn(mesh):
    t = _import(mesh, ids, ["length", "batch", "beam"])
    return positions_lib.positions_in_segments(t, t.shape.dims[0])
  expected = np.stack([POSITIONS.T, POSITIONS.T[:, ::-1]], axis=-1)
  np.testing.assert_array_equal(_run_tf(fn), expected)


def _context(mesh, sequence_id, length_dim):
  return transformer.Context(
      model=None, mesh=mesh, batch_dims=[], length_dim=length_dim,
      variable_dtype=mtf.VariableDType(tf.float32),
      mode=tf.estimator.ModeKeys.EVAL, sequence_id=sequence_id)


def test_only_packed_segment_ids_count_as_packed():
  with tf.Graph().as_default():
    mesh = mtf.Mesh(mtf.Graph(), "mesh")
    tokens = _import(mesh, SEGMENTS * 7, ["batch", "length"])
    length_dim = tokens.shape.dims[1]
    # Features of a packed batch.
    packed = _context(mesh, tokens, length_dim)
    assert layer_lib.packed_sequence_id(packed) is tokens
    # Bitransformer.call_simple's padding mask for unpacked input.
    made_up = _context(mesh, mtf.minimum(tokens, 1), length_dim)
    assert layer_lib.packed_sequence_id(made_up) is None
    for plain in (None, 1):
      assert layer_lib.packed_sequence_id(
          _context(mesh, plain, length_dim)) is None


KINDS = {
    "random": [ms.Random],
    "factorized_random": [lambda: ms.FactorizedRandom(k=3)],
    "dense": [ms.Dense],
    "factorized_dense": [ms.FactorizedDense],
    "random+dot_product": [ms.Random, ms.DotProduct],
}


def _layer(name):
  return ms.SynthesizerAttention(
      synthesizers=[make() for make in KINDS[name]], max_length=MAX_LEN,
      num_heads=HEADS, key_value_size=DK)


def _input_and_values(name, x_seed, values_seed):
  """An input [2, 8, d_model] and N(0, 1) values for every variable.

  Large random tables, so that reading the wrong rows shows.
  """
  x = np.random.RandomState(x_seed).randn(2, 8, D_MODEL).astype(np.float32)
  first = layer_harness.run_layer(_layer(name), x)
  rng = np.random.RandomState(values_seed)
  values = {k: rng.randn(*v.shape).astype(np.float32)
            for k, v in first.variables.items()}
  return x, values


@pytest.mark.parametrize("name", sorted(KINDS))
def test_default_positions_packed_equal_each_segment_alone(name):
  kinds = name.split("+")
  x, values = _input_and_values(name, 0, 4)
  # Default positions (mesh's range) with packed segment ids.
  run = layer_harness.run_layer(_layer(name), x, causal=True,
                                segment_ids=SEGMENTS, variable_values=values)
  v = {k[len("layer/"):]: val.astype(np.float64)
       for k, val in run.variables.items()}
  for e in range(2):
    for segment in set(SEGMENTS[e]) - {0}:
      cols = np.flatnonzero(SEGMENTS[e] == segment)
      alone = ref.layer_output(kinds, v, x[e:e + 1, cols], HEADS, DK,
                               causal=True)
      np.testing.assert_allclose(run.output[e, cols], alone[0], rtol=2e-4,
                                 atol=2e-4, err_msg="%s row %d" % (name, e))


@pytest.mark.parametrize("name", ["random", "factorized_dense",
                                  "random+dot_product"])
def test_default_positions_packed_same_on_a_mesh(name):
  # Batch and heads split over 4 devices: the derived positions are computed
  # per batch slice, and the tables' gradients are summed over the slices.
  x, values = _input_and_values(name, 1, 5)
  one = layer_harness.run_layer(_layer(name), x, causal=True,
                                segment_ids=SEGMENTS, variable_values=values)
  mesh = layer_harness.run_layer(
      _layer(name), x, causal=True, segment_ids=SEGMENTS,
      variable_values=values, mesh_shape="model:2,batch:2",
      layout="heads:model,batch:batch", num_devices=4)
  np.testing.assert_allclose(mesh.output, one.output, rtol=1e-5, atol=1e-5)
  assert sorted(mesh.grads) == sorted(one.grads)
  for key in one.grads:
    np.testing.assert_allclose(mesh.grads[key], one.grads[key], rtol=1e-4,
                               atol=1e-5, err_msg=key)
