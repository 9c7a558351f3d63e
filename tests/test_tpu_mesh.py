# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The models lowered for a TPU mesh, as T5's estimator lowers them.

On a Cloud TPU, mesh's `tpu_estimator_model_fn` lowers the graph with
`SimdMeshImpl`: one program for every core, the collectives as TPU ops
(`CrossReplicaSum`, `AllToAll`, `CollectivePermute`), each variable's slices
replicated per core. Here, for every variant and baseline of the table,
the tiny encoder-decoder of test_xla.py (Linformer in the encoder only) with
a training step (loss, gradients, mesh's Adafactor update) and greedy
decoding is lowered on the layouts docs/tpu.md recommends
(`mesh_defaults.LAYOUT_RULES`): data-parallel (`batch:2`), heads
model-parallel (`model:2`) and both (`batch:2,model:2`; and T5 base's
8-core `batch:4,model:2`, on the TPU mesh only), with a stand-in device
assignment (every core is this CPU). The graph is built, not run: the TPU
ops have no CPU kernels.

The lowering must succeed, and the collectives it asks for, as mesh's
lowering counts them (`Lowering.counters`: the all-reduces of einsums and
reductions, the all-concats and all-to-alls of layout changes, with their
sizes), must be those of the same graph lowered on a placement mesh, which
the CPU tests run (test_mesh_layouts.py, test_mesh_comm.py). The TPU ops
in the program must be the ones those collectives make on a TPU, counted
from the placement lowering's record of every collective call
(`workbench.comm_audit.RecordingMeshImpl`): a `CrossReplicaSum` per
all-reduce, per all-concat (SimdMeshImpl sums one-hot placed slices) and
per sync of a replicated random tensor, an `AllToAll` per all-to-all and a
`CollectivePermute` per receive (shift over a split axis). So the claims of
test_mesh_comm.py hold on a TPU mesh too. On 8 cores the lowering must
succeed and sum over both axes with TPU all-reduces.
"""

import collections
from typing import Dict, Iterable, Tuple

import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import xla_harness
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import mesh_defaults
from workbench import comm_audit

# Builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

ROWS = attentions.VARIANTS + attentions.BASELINES
# docs/tpu.md's layouts: data-parallel, heads model-parallel, both.
MESHES = ("batch:2", "model:2", "batch:2,model:2")
# The 8-core layout of T5 base on a v3-8 (docs/tpu.md), lowered on the TPU
# mesh only (a placement mesh of 8 devices costs the test more).
EIGHT_CORES = "batch:4,model:2"
LAYOUT = mesh_defaults.LAYOUT_RULES
BATCH = 4
SHAPE = {}
COLLECTIVE_COUNTERS = ("allreduce", "allconcat", "alltoall")
TPU_COLLECTIVES = ("CrossReplicaSum", "AllToAll", "CollectivePermute")


def _counted(lowering: mtf.Lowering) -> Dict[Tuple[str, int], int]:
  """Mesh's own counts of the collectives: (counter key, size) -> how many."""
  return dict(collections.Counter(
      (key, size) for key, size in lowering.counters
      if key.split("/")[0] in COLLECTIVE_COUNTERS))


def _lower(graph: mtf.Graph, mesh: mtf.Mesh, mesh_impl: mtf.MeshImpl,
           outputs: Iterable[mtf.Tensor], used: Iterable[mtf.Tensor]):
  """Lowers the graph on mesh_impl.

  Args:
    graph: the mtf graph (its TF graph is the default graph).
    mesh: its mesh.
    mesh_impl: the mesh implementation.
    outputs: the tensors to export.
    used: tensors to lay out (running their pending all-reduces).

  Returns:
    The lowering, and the types of the TF ops it made, with those of the
    functions it added to the graph's library (control flow v2 keeps the
    bodies and conditions of loops there).
  """
  tf_graph = tf.get_default_graph()
  before = tf_graph.as_graph_def()
  old_functions = {f.signature.name for f in before.library.function}
  with tf.variable_scope(None, default_name="lowering"):
    lowering = mtf.Lowering(graph, {mesh: mesh_impl}, autostack=False)
    for t in outputs:
      lowering.export_to_tf_tensor(t)
    for t in used:
      lowering.tensors[t].to_laid_out_tensor()
  after = tf_graph.as_graph_def()
  old_nodes = len(before.node)
  types = collections.Counter(node.op for node in after.node[old_nodes:])
  for function in after.library.function:
    if function.signature.name not in old_functions:
      types.update(node.op for node in function.node_def)
  return lowering, types


def _lowerings(row: attentions.Attention):
  """Builds the model's step and decodes once; lowers them on each mesh.

  Args:
    row: a row of the table.

  Returns:
    mesh shape -> (the SimdMeshImpl lowering's counts, its TF op types, the
    placement lowering's counts, its recorded collectives).
  """
  model = xla_harness.build_model(row, xla_harness.ENCODER_DECODER, **SHAPE)
  rng = np.random.RandomState(0)
  data = rng.randint(2, xla_harness.VOCAB,
                     size=(2, BATCH, xla_harness.LENGTH)).astype(np.int32)
  with tf.Graph().as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    dims = [mtf.Dimension("batch", BATCH),
            mtf.Dimension("length", xla_harness.LENGTH)]
    inputs, targets = (mtf.import_tf_tensor(mesh, tf.constant(d), dims)
                       for d in data)
    vd = xla_harness.variable_dtype(tf.float32)
    _, loss = model.call_simple(
        inputs=inputs, targets=targets, compute_loss=True,
        mode=tf.estimator.ModeKeys.TRAIN, variable_dtype=vd)
    variables = graph.trainable_variables
    grads = mtf.gradients([loss], [v.outputs[0] for v in variables])
    # As mesh's utils export the decodes: renamed to unsplit dimensions
    # (SimdMeshImpl exports only fully replicated tensors).
    decoded = mtf.anonymize(model.decode(inputs, variable_dtype=vd,
                                         temperature=0.0))
    outputs = [loss, decoded]
    # The gradients are laid out as the optimizer would use them (their
    # pending sums run); the optimizer's update itself, local to each
    # variable's slices, is left out to keep the test fast (test_xla.py
    # compiles it).
    used = [g for g in grads if g is not None]
    result = {}
    for mesh_shape in MESHES:
      size = mtf.convert_to_shape(mesh_shape).size
      simd, simd_ops = _lower(graph, mesh, xla_harness.simd_mesh_impl_of(
          mesh_shape, LAYOUT), outputs, used)
      recording = comm_audit.RecordingMeshImpl(
          mtf.convert_to_shape(mesh_shape),
          mtf.convert_to_layout_rules(LAYOUT), [""] * size)
      recording.instrument(graph)
      placement, _ = _lower(graph, mesh, recording, outputs, used)
      result[mesh_shape] = (_counted(simd), simd_ops, _counted(placement),
                            recording.collectives)
    simd, simd_ops = _lower(graph, mesh, xla_harness.simd_mesh_impl_of(
        EIGHT_CORES, LAYOUT), outputs, used)
    result[EIGHT_CORES] = (_counted(simd), simd_ops, None, None)
  return result


_CACHE = {}


def _lowered(name: str, mesh_shape: str):
  if name not in _CACHE:
    _CACHE[name] = _lowerings(attentions.BY_NAME[name])
  return _CACHE[name][mesh_shape]


def _expected_tpu_ops(collectives) -> Dict[str, int]:
  """The TPU collective ops that SimdMeshImpl makes for these calls."""
  kinds = collections.Counter()
  for c in collectives:
    if c.kind in ("allreduce", "allconcat", comm_audit.RANDOM_SYNC):
      kinds["CrossReplicaSum"] += 1
    elif c.kind == "alltoall":
      kinds["AllToAll"] += 1
    elif c.kind == "receive":
      kinds["CollectivePermute"] += 1
  return dict(kinds)


@pytest.mark.parametrize("name", [row.name for row in ROWS])
def test_the_eight_core_tpu_mesh_lowers(name):
  simd, simd_ops, _, _ = _lowered(name, EIGHT_CORES)
  # Sums over both axes, each a TPU all-reduce.
  axes = {key.split("/")[1] for key, _ in simd if key.startswith("allreduce")}
  assert axes >= {"[0]", "[1]"}, simd
  assert simd_ops["CrossReplicaSum"] >= sum(
      n for (key, _), n in simd.items() if key.startswith("allreduce"))


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("name", [row.name for row in ROWS])
def test_the_tpu_mesh_lowers_the_collectives_of_the_placement_mesh(
    name, mesh_shape):
  simd, simd_ops, placement, recorded = _lowered(name, mesh_shape)
  assert simd == placement
  # There is communication: the gradient sums over "batch", and the sums of
  # the attention and feed-forward outputs over "model".
  assert simd
  tpu_ops = {k: simd_ops[k] for k in TPU_COLLECTIVES if simd_ops[k]}
  assert tpu_ops == _expected_tpu_ops(recorded), comm_audit.format_table(
      recorded, only_length=False)


def test_all_to_alls_and_permutes_are_counted():
  """A layout change and a shift over a split axis: the other TPU ops.

  The models above need neither on these layouts; here a reshape that moves
  the split from one dimension to another (an all-to-all) and a shift along
  a split dimension (a receive) show that they are counted on both meshes.
  """
  with tf.Graph().as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    a, b = mtf.Dimension("a", 4), mtf.Dimension("b", 4)
    x = mtf.import_tf_tensor(mesh, tf.ones([4, 4]), [a, b])
    y = mtf.reshape(x, [mtf.Dimension("a2", 4), mtf.Dimension("b2", 4)])
    z = mtf.shift(x, 1, a, wrap=False)
    outputs = [mtf.anonymize(y), mtf.anonymize(z)]
    layout = "a:model,b2:model"
    simd, simd_ops = _lower(graph, mesh, xla_harness.simd_mesh_impl_of(
        "model:2", layout), outputs, [])
    recording = comm_audit.RecordingMeshImpl(
        mtf.convert_to_shape("model:2"),
        mtf.convert_to_layout_rules(layout), ["", ""])
    recording.instrument(graph)
    placement, _ = _lower(graph, mesh, recording, outputs, [])
  assert _counted(simd) == _counted(placement)
  expected = _expected_tpu_ops(recording.collectives)
  assert expected["AllToAll"] >= 1 and expected["CollectivePermute"] >= 1
  assert {k: simd_ops[k] for k in TPU_COLLECTIVES if simd_ops[k]} == expected
