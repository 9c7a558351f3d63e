# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention softmax (ops.softmax) against NumPy, on split meshes.

The fused path (TF's softmax on each device's slice) runs where the layout
leaves the reduced dimension whole; where it splits it, or with an
`extra_logit`, mtf's softmax runs. Both must give NumPy's values and
gradients, also for logits without a batch dimension on a mesh that splits
the batch (R's). `ops.order.order_gradients` must leave values and gradients
unchanged and make each device's values' gradient wait for its logits'.
"""

import collections

import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import graph_order
import lowering as lowering_lib
from mtf_synthesizer.ops import order
from mtf_synthesizer.ops import softmax as softmax_lib

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
    weights = softmax_lib.softmax(x, dims[-1], Context(layout, mesh_shape),
                            extra_logit=extra_logit)
    loss = mtf.reduce_sum(weights * mtf.import_tf_tensor(mesh, dy, dims))
    [grad] = mtf.gradients([loss], [x])
    lowering = lowering_lib.lower(graph, mesh, mesh_shape, layout)
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


@pytest.mark.parametrize("mesh_shape,layout", [
    ("", ""), ("batch:2", "batch:batch"), ("model:2", "heads:model")])
def test_values_gradient_waits_for_the_logits_gradient(mesh_shape, layout):
  """order_gradients: same values and gradients (logits without a batch
  dimension, like R's, summed over a split batch), and on every device the
  values' gradient comes after the logits'."""
  rng = np.random.RandomState(1)
  d_kv = 5
  logits_np = rng.randn(HEADS, LENGTH, MEMORY).astype(np.float32)
  values_np = rng.randn(BATCH, HEADS, MEMORY, d_kv).astype(np.float32)
  dy_np = rng.randn(BATCH, HEADS, LENGTH, d_kv).astype(np.float32)
  batch, heads, length, memory, kv = [
      mtf.Dimension(n, s) for n, s in (
          ("batch", BATCH), ("heads", HEADS), ("length", LENGTH),
          ("memory_length", MEMORY), ("d_kv", d_kv))]
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    logits = mtf.import_tf_tensor(mesh, logits_np, [heads, length, memory])
    values = mtf.import_tf_tensor(mesh, values_np, [batch, heads, memory, kv])
    ordered_logits, ordered_values = order.order_gradients(logits, values)
    weights = softmax_lib.softmax(ordered_logits, memory,
                            Context(layout, mesh_shape))
    out = mtf.einsum([weights, ordered_values],
                     output_shape=[batch, heads, length, kv])
    loss = mtf.reduce_sum(
        out * mtf.import_tf_tensor(mesh, dy_np, out.shape))
    grad_logits, grad_values = mtf.gradients([loss], [logits, values])
    lowering = lowering_lib.lower(graph, mesh, mesh_shape, layout)
    # On each device, the softmax's gradient (the logits' before any sum
    # over a split batch) is computed before the values' gradient.
    for device, values_slice in enumerate(
        lowering.tensors[grad_values].to_laid_out_tensor().tensor_list):
      softmax_gradient = {
          op for op in tf_graph.get_operations()
          if op.name.startswith("softmax/gradients/softmax_gradient/")
          and "/parallel_%d/" % device in op.name and op.type == "Mul"}
      assert softmax_gradient
      assert softmax_gradient <= graph_order.ancestors(values_slice)
    fetch = [lowering.export_to_tf_tensor(t)
             for t in (out, grad_logits, grad_values)]
    with tf.Session(graph=tf_graph) as sess:
      got_out, got_logits, got_values = sess.run(fetch)
  w = _numpy_softmax(logits_np)
  np.testing.assert_allclose(got_out, np.einsum("hqk,bhkd->bhqd", w,
                                                values_np), rtol=1e-5,
                             atol=1e-6)
  dw = np.einsum("bhqd,bhkd->hqk", dy_np, values_np)
  want_logits = w * (dw - (dw * w).sum(axis=-1, keepdims=True))
  np.testing.assert_allclose(got_logits, want_logits, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(got_values, np.einsum("hqk,bhqd->bhkd", w,
                                                   dy_np), rtol=1e-5,
                             atol=1e-6)


@pytest.mark.parametrize("shape,axis", [
    ((3, 5), 1),         # fewer rows than pieces: one product
    ((4, 3, 6), 2),      # 12 rows in pieces of 2 and 1
    ((1, 9, 7), 2),      # a leading dimension of 1
    ((2, 7, 5), 1),      # not the last axis: one product
])
def test_softmax_gradient_matches_numpy(shape, axis):
  rng = np.random.RandomState(2)
  y = np.moveaxis(_numpy_softmax(np.moveaxis(
      rng.randn(*shape).astype(np.float32), axis, -1)), -1, axis)
  dy = rng.randn(*shape).astype(np.float32)
  with tf.Graph().as_default(), tf.Session() as sess:
    got = sess.run(softmax_lib.softmax_gradient(tf.constant(y), tf.constant(dy),
                                           axis))
  want = y * (dy - (dy * y).sum(axis=axis, keepdims=True))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
