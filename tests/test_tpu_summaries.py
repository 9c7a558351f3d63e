# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The alpha summaries on a TPU: through the host call of mesh's TPU model_fn.

On a Cloud TPU, T5's `utils.run` (`use_tpu=True`) trains with the model
function of mesh's `tpu_estimator_model_fn`, which TPUEstimator calls inside
the TPU rewrite (`tpu.replicate`, one replica per core). With
`tpu_estimator_model_fn.tpu_summaries = True` it lowers the graph on a
`SimdMeshImpl`, gathers the scalar summaries of mesh's collection into a
host call (`mtf.utils.create_host_call`), whose tensors TPUEstimator outfeeds
and whose function writes them on the host; a summary op inside the TPU
computation would fail to compile.

Here that model function is built, with use_tpu=True, inside `tpu.replicate`
on two cores (data-parallel, `batch:2`) of a stand-in TPU context (every
core and host is this CPU), and its host call's tensors are outfed as
TPUEstimator does; the graph is built, not run. For every mixture variant of
the table (the variants with alpha summaries), with and without mesh's
microbatches (`serialize_num_microbatches.tokens_per_microbatch_per_replica`:
the step inside a loop), and with TF's loops of both kinds (control flow v1,
as in the stock CLI, and v2):

  * every alpha of every mixture layer reaches the host call, as a scalar
    computed in the TPU computation, outside any loop;
  * no summary op is left inside the TPU computation (nor inside a loop
    body of it).

The values of the alpha summaries on a SimdMeshImpl, from inside and outside
the microbatch loop: test_summaries.py.
"""

from typing import Dict, List, Tuple

from absl import flags
import gin
import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.tpu import tpu  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.tpu.ops import tpu_ops  # pylint: disable=g-direct-tensorflow-import

import xla_harness
from mtf_synthesizer import attentions
# The fixture that builds TF loops of one kind (v1 or v2), shared.
from test_summaries import control_flow  # pylint: disable=unused-import

# Builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

MIXTURES = [row.name for row in attentions.VARIANTS if len(row.components) > 1]
CORES = 2
LOOP_OPS = frozenset(["Enter", "While", "StatelessWhile"])  # flow v1, v2
TPU_REPLICATE_ATTR = "_tpu_replicate"


@pytest.fixture(scope="module", autouse=True)
def absl_flags_parsed():
  """Mesh reads an absl flag (logical_cores_per_chip) when it maps cores."""
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()


def _tpu_training_step(variant: str, tokens_per_microbatch: int = 0
                       ) -> Tuple[tf.Graph, List[Tuple[str, tf.Tensor]],
                                  List[tf.Tensor]]:
  """Builds mesh's TPU training step of a tiny model inside tpu.replicate.

  Args:
    variant: a variant of the table.
    tokens_per_microbatch: if not 0, mesh's
      `serialize_num_microbatches.tokens_per_microbatch_per_replica`.

  Returns:
    (the TF graph, the summaries the host call received as (name, tensor),
    the host call's tensors).
  """
  model = xla_harness.build_model(attentions.BY_NAME[variant],
                                  xla_harness.ENCODER_DECODER)
  received = []
  create_host_call = mtf.utils.create_host_call

  def spy(model_dir):
    received.extend(tf.get_default_graph().get_collection(
        mtf.utils.SCALAR_SUMMARIES_COLLECTION_KEY))
    return create_host_call(model_dir)

  with gin.unlock_config():
    gin.clear_config()
    if tokens_per_microbatch:
      gin.bind_parameter(
          "serialize_num_microbatches.tokens_per_microbatch_per_replica",
          tokens_per_microbatch)
  model_fn = xla_harness.tpu_model_fn(
      model, xla_harness.ENCODER_DECODER, "batch:%d" % CORES, "batch:batch",
      {"inputs": xla_harness.LENGTH, "targets": xla_harness.LENGTH},
      tpu_summaries=True)
  host_tensors = []
  mtf.utils.create_host_call = spy
  try:
    with tf.Graph().as_default() as graph:
      tf.train.get_or_create_global_step()
      data = np.random.RandomState(0).randint(
          2, xla_harness.VOCAB,
          size=(xla_harness.BATCH_FOR_CORES, xla_harness.LENGTH))

      def computation():
        features = {k: tf.constant(data, tf.int32)
                    for k in ("inputs", "targets")}
        spec = model_fn(features, None, tf.estimator.ModeKeys.TRAIN,
                        {"context": xla_harness.StandInTPUContext(
                            CORES, [1, 1, 1, CORES])}, None)
        _, tensors = spec.host_call
        host_tensors.extend(tensors)
        # As TPUEstimator: the loss, the train op, and the host call's
        # tensors to the outfeed.
        with tf.control_dependencies([spec.train_op]):
          loss = tf.identity(spec.loss)
        return [loss, tpu_ops.outfeed_enqueue_tuple(tensors)]

      tpu.replicate(computation, inputs=[[]] * CORES)
  finally:
    mtf.utils.create_host_call = create_host_call
    gin.clear_config()
  return graph, received, host_tensors


def _summary_ops_in_tpu_computation(graph: tf.Graph) -> List[str]:
  """Summary ops of the TPU computation, and of loop bodies in the graph."""
  found = [op.name for op in graph.get_operations()
           if op.type in xla_harness.SUMMARY_OPS and
           TPU_REPLICATE_ATTR in op.node_def.attr]
  for function in graph.as_graph_def().library.function:
    found += ["%s/%s" % (function.signature.name, node.name)
              for node in function.node_def
              if node.op in xla_harness.SUMMARY_OPS]
  return found


def _alphas(variant: str) -> Dict[str, int]:
  """alpha_<function> -> how many layers write it (one per stack here)."""
  return {"alpha_" + name: 2
          for name in attentions.BY_NAME[variant].components}


@pytest.mark.parametrize("microbatches", [False, True])
@pytest.mark.parametrize("variant", MIXTURES)
def test_alpha_summaries_reach_the_host_call(variant, microbatches,
                                             control_flow):
  graph, received, host_tensors = _tpu_training_step(
      variant, tokens_per_microbatch=xla_harness.LENGTH if microbatches else 0)
  # With microbatches, the step is built inside a loop (its loop op is in
  # the graph with either kind of control flow).
  loops = LOOP_OPS & {op.type for op in graph.get_operations()}
  assert bool(loops) == microbatches, (loops, control_flow)
  names = [name for name, _ in received]
  alphas = {}
  for name, tensor in received:
    if "/mixture/alpha_" in name:
      alphas[name.rsplit("/", 1)[1]] = alphas.get(
          name.rsplit("/", 1)[1], 0) + 1
      assert tensor.shape.as_list() == [], name
      # Made in the TPU computation, outside any loop.
      assert tensor.graph is graph, name
      assert TPU_REPLICATE_ATTR in tensor.op.node_def.attr, name
      assert not control_flow_util.IsInWhileLoop(tensor.op), name
  assert alphas == _alphas(variant), names
  # The host call passes every received summary, after the global step.
  assert len(host_tensors) == 1 + len(received)
  assert all(t.shape.as_list() == [1] for t in host_tensors)
  assert not _summary_ops_in_tpu_computation(graph)


def test_a_summary_op_in_the_tpu_computation_is_found():
  """The check above sees a summary op made inside the TPU computation."""
  with tf.Graph().as_default() as graph:
    def computation():
      x = tf.constant(1.0)
      tf.summary.scalar("inside", x)
      return [x + 1]
    tpu.replicate(computation, inputs=[[]])
  assert any("inside" in name
             for name in _summary_ops_in_tpu_computation(graph))
