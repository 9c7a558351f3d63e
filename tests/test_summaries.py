# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A mixture's alpha summaries wherever mesh builds the training step.

Mesh builds the step inside an `mtf.while_loop` when it accumulates
gradients over microbatches (`mtf.serialize_training_step`, as its
`utils.run` does). Here a mixture layer is trained that way on placement
meshes (one device; heads split over two) and on a TPU mesh
(`SimdMeshImpl`, lowered on the CPU), with TF's loops of both kinds (control
flow v1, as in the stock CLI, and v2, TF 2's default, as in T5's Python
API): every alpha summary must be outside the loop, mergeable (what the
estimator's summary hook does), and equal to alpha computed in NumPy from
the variable; the loss and the gradients must not change. The stock CLI's run with microbatches: test_variants_cli.py.
"""

from typing import Dict, Tuple

import mesh_tensorflow as mtf
from mesh_tensorflow import simd_mesh_impl
from mesh_tensorflow.transformer import transformer
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import control_flow_v2_toggles  # pylint: disable=g-direct-tensorflow-import

import layer_harness
import lowering as lowering_lib
import mtf_synthesizer as ms
from mtf_synthesizer.training import summaries as summaries_lib

BATCH, LENGTH, D_MODEL, HEADS, DK = 4, 6, 8, 2, 4
KINDS = ("random", "dot_product")
ALPHA_LOGITS = "layer/mixture/alpha_logits"
LOGITS = np.array([[0.3, -1.0], [1.0, 0.5]], np.float32)  # [functions, heads]
LOOP_OPS = {"Enter", "While", "StatelessWhile"}  # control flow v1, v2


@pytest.fixture(params=["control flow v1", "control flow v2"])
def control_flow(request):
  """Builds TF loops of one kind, then restores TF's setting."""
  was_v2 = control_flow_v2_toggles.control_flow_v2_enabled()
  if request.param.endswith("v2"):
    control_flow_v2_toggles.enable_control_flow_v2()
  else:
    control_flow_v2_toggles.disable_control_flow_v2()
  yield request.param
  if was_v2:
    control_flow_v2_toggles.enable_control_flow_v2()
  else:
    control_flow_v2_toggles.disable_control_flow_v2()


def _train_step(microbatches: int, mesh_impl_fn, num_devices: int = 1
                ) -> Tuple[Dict[str, float], float, Dict[str, np.ndarray],
                           tf.Graph]:
  """Builds and runs one mixture layer's loss and gradients.

  Args:
    microbatches: 1, or the number of microbatches mesh accumulates over.
    mesh_impl_fn: returns the mesh implementation.
    num_devices: logical CPU devices.

  Returns:
    (the alpha summaries by tag, the loss, the gradients by variable name,
    the TF graph).
  """
  x = np.random.RandomState(0).randn(BATCH, LENGTH, D_MODEL).astype(
      np.float32)
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.set_random_seed(0)
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    batch_dim = mtf.Dimension("batch", BATCH)
    length_dim = mtf.Dimension("length", LENGTH)
    shape = mtf.Shape([batch_dim, length_dim,
                       mtf.Dimension("d_model", D_MODEL)])
    features = {"x": mtf.import_tf_tensor(mesh, tf.constant(x), shape)}
    layer = ms.SynthesizerAttention(
        synthesizers=[ms.synthesizers.BY_NAME[k]() for k in KINDS],
        num_heads=HEADS, key_value_size=DK, max_length=LENGTH)

    def model_fn(features):
      inputs = features["x"]
      context = transformer.Context(
          model=layer_harness._Model(inputs.shape.dims[-1],  # pylint: disable=protected-access
                                     fully_autoregressive=False),
          mesh=mesh, batch_dims=inputs.shape.dims[:1], length_dim=length_dim,
          variable_dtype=mtf.VariableDType(tf.float32),
          mode=tf.estimator.ModeKeys.TRAIN,
          position=mtf.range(mesh, length_dim, tf.int32),
          position_is_default=True, losses=[])
      with tf.variable_scope("layer", reuse=tf.AUTO_REUSE):
        y = layer.call(context, inputs)
      return {"loss": mtf.reduce_sum(mtf.square(y))}

    if microbatches > 1:
      grads, outputs = mtf.serialize_training_step(
          features, model_fn, batch_dim, microbatches)
    else:
      outputs = model_fn(features)
      grads = mtf.gradients([outputs["loss"]],
                            [v.outputs[0] for v in graph.trainable_variables])
    variables = graph.trainable_variables
    lowering = mtf.Lowering(graph, {mesh: mesh_impl_fn()})
    fetch = {"loss": lowering.export_to_tf_tensor(outputs["loss"]),
             "grads": {v.name: lowering.export_to_tf_tensor(g)
                       for v, g in zip(variables, grads)}}
    collected = tf_graph.get_collection(
        mtf.utils.SCALAR_SUMMARIES_COLLECTION_KEY)
    fetch["collected"] = dict(collected)
    if tf_graph.get_collection(tf.GraphKeys.SUMMARIES):
      fetch["merged"] = tf.summary.merge_all()
    written = [t for _, t in collected] + tf_graph.get_collection(
        tf.GraphKeys.SUMMARIES)
    assert all(t.graph is tf_graph and
               not control_flow_util.IsInWhileLoop(t.op) for t in written)
    by_name = {v.name: v for v in graph.all_variables}
    config = lowering_lib.session_config(num_devices)
    with tf.Session(graph=tf_graph, config=config) as sess:
      sess.run(tf.global_variables_initializer())
      by_name[ALPHA_LOGITS].get_master().load(LOGITS, sess)
      sess.run(lowering.copy_masters_to_slices())
      values = sess.run(fetch)
  summaries = {k: float(v) for k, v in values["collected"].items()}
  if "merged" in values:
    for value in tf.Summary.FromString(values["merged"]).value:
      summaries[value.tag] = value.simple_value
  return summaries, float(values["loss"]), values["grads"], tf_graph


def _placement(mesh_shape="", layout="", devices=("",)):
  return lambda: mtf.placement_mesh_impl.PlacementMeshImpl(
      mtf.convert_to_shape(mesh_shape), mtf.convert_to_layout_rules(layout),
      list(devices))


class _OneCoreAssignment:
  """A TPU device assignment of one core, placed on the CPU."""

  def tpu_device(self, replica=0, logical_core=0, job=None):
    del replica, logical_core, job
    return ""


def _simd():
  return simd_mesh_impl.SimdMeshImpl(
      mtf.convert_to_shape(""), mtf.convert_to_layout_rules(""),
      device_assignment=_OneCoreAssignment())


MESHES = {
    "one device": (_placement(), 1),
    "heads over two devices": (
        _placement("model:2", "heads:model", ["/cpu:0", "/cpu:1"]), 2),
    "TPU mesh": (_simd, 1),
}


@pytest.mark.parametrize("mesh", sorted(MESHES))
def test_alpha_summaries_from_inside_the_microbatch_loop(mesh, control_flow):
  make_impl, devices = MESHES[mesh]
  summaries, loss, grads, tf_graph = _train_step(2, make_impl, devices)
  # The step really is a loop.
  assert LOOP_OPS & {op.type for op in tf_graph.get_operations()}, (
      control_flow)
  alpha = np.exp(LOGITS) / np.exp(LOGITS).sum(axis=0)
  assert sorted(summaries) == ["layer/mixture/alpha_dot_product",
                               "layer/mixture/alpha_random"]
  np.testing.assert_allclose(summaries["layer/mixture/alpha_random"],
                             alpha[0].mean(), rtol=1e-6)
  np.testing.assert_allclose(summaries["layer/mixture/alpha_dot_product"],
                             alpha[1].mean(), rtol=1e-6)
  # The summaries change nothing else: loss and gradients are those of one
  # batch without microbatches.
  _, want_loss, want_grads, _ = _train_step(1, make_impl, devices)
  np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
  assert sorted(grads) == sorted(want_grads)
  for name in want_grads:
    np.testing.assert_allclose(grads[name], want_grads[name], rtol=1e-4,
                               atol=1e-5, err_msg=name)


def test_a_summary_of_each_microbatch_is_left_out(caplog, control_flow):
  """A value that changes between iterations cannot be written once."""
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    batch_dim = mtf.Dimension("batch", 4)
    x = mtf.get_variable(mesh, "x", [batch_dim])

    def model_fn(features):
      summaries_lib.scalar_summary("batch_sum",
                                   mtf.reduce_sum(features["x"]))
      return {"loss": mtf.reduce_sum(features["x"] * x)}

    mtf.serialize_training_step({"x": mtf.ones(mesh, [batch_dim])},
                                model_fn, batch_dim, 2)
    mtf.Lowering(graph, {mesh: _placement()()})
    assert not tf_graph.get_collection(tf.GraphKeys.SUMMARIES)
  assert "batch_sum is left out" in caplog.text, control_flow
