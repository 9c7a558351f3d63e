# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention softmax (layer.softmax) against NumPy, on split meshes.

The fused path (TF's softmax on each device's slice) runs where the layout
leaves the reduced dimension whole; where it splits it, or with an
`extra_logit`, mtf's softmax runs. Both must give NumPy's values and
gradients.
"""

import collections

import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from mtf_synthesizer import layer

BATCH, HEADS, LENGTH, MEMORY = 2, 4, 3, 6
Context = collections.namedtuple("Context", ["layout", "mesh_shape"])


def _numpy_softmax(x, extra_logit=None):
  z = x - x.max(axis=-1, keepdims=True)
  e = np.exp(z)
  total = e.sum(axis=-1, keepdims=True)
  if extra_logit is not None:
    total += np.exp(extra_logit - x.max(axis=-1, keepdims=True))
  return e / total


def _run(mesh_shape: str, layout: str, extra_logit=None):
  """softmax over memory_length and d loss / d logits, on a placement mesh.

  Returns:
    (weights, gradient of sum(weights * dy), the TF op types of the graph).
  """
  rng = np.random.RandomState(0)
  logits = 3.0 * rng.randn(BATCH, HEADS, LENGTH, MEMORY).astype(np.float32)
  dy = rng.randn(BATCH, HEADS, LENGTH, MEMORY).astype(np.float32)
  dims = [mtf.Dimension("batch", BATCH), mtf.Dimension("heads", HEADS),
          mtf.Dimension("length", LENGTH),
          mtf.Dimension("memory_length", MEMORY)]
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    x = mtf.import_tf_tensor(mesh, logits, dims)
    weights = layer.softmax(x, dims[-1], Context(layout, mesh_shape),
                            extra_logit=extra_logit)
    loss = mtf.reduce_sum(weights * mtf.import_tf_tensor(mesh, dy, dims))
    [grad] = mtf.gradients([loss], [x])
    shape = mtf.convert_to_shape(mesh_shape)
    mesh_impl = mtf.placement_mesh_impl.PlacementMeshImpl(
        shape, mtf.convert_to_layout_rules(layout), [""] * shape.size)
    lowering = mtf.Lowering(graph, {mesh: mesh_impl})
    fetch = [lowering.export_to_tf_tensor(t) for t in (weights, grad)]
    op_types = {op.type for op in tf_graph.get_operations()}
    with tf.Session(graph=tf_graph) as sess:
      got_weights, got_grad = sess.run(fetch)
  return logits, dy, got_weights, got_grad, op_types


@pytest.mark.parametrize("mesh_shape,layout,fused", [
    ("", "", True),
    ("model:2,batch:2", "heads:model,batch:batch", True),
    ("model:2", "memory_length:model", False),
])
def test_values_and_gradients_match_numpy(mesh_shape, layout, fused):
  logits, dy, weights, grad, op_types = _run(mesh_shape, layout)
  want = _numpy_softmax(logits)
  np.testing.assert_allclose(weights, want, rtol=1e-5, atol=1e-7)
  # d/dx sum(y * dy) = y * (dy - sum(dy * y)), by hand.
  want_grad = want * (dy - (dy * want).sum(axis=-1, keepdims=True))
  np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-6)
  # The fused op runs unless the layout splits the reduced dimension.
  assert ("Softmax" in op_types) == fused, sorted(op_types)


def test_extra_logit_is_an_implicit_logit_in_every_row():
  logits, _, weights, _, op_types = _run("", "", extra_logit=0.5)
  np.testing.assert_allclose(weights, _numpy_softmax(logits, 0.5),
                             rtol=1e-5, atol=1e-7)
  assert np.all(weights.sum(axis=-1) < 1.0)
  assert "Softmax" not in op_types
