# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Mesh's TPU model function, built inside the TPU rewrite on a CPU.

On a Cloud TPU, T5's `utils.run` (`use_tpu=True`) hands TPUEstimator the
model function of mesh's `tpu_estimator_model_fn`, which TPUEstimator calls
inside the TPU rewrite (`tpu.replicate`, one replica per core): training
(`TRAIN`), perplexity evaluation (`EVAL`) and decoding (`PREDICT`). Here,
for every variant and baseline of the table, in an encoder-decoder and in a
decoder-only LM (Linformer: the encoder-decoder only), the tiny model of
`xla_harness` goes through that model function in each mode, inside
`tpu.replicate` on 4 cores of a stand-in TPU context (two v3 chips; every
core and host is this CPU), on a mesh with both axes (`batch:2,model:2`,
the TPU layout rules). The graph is built, not run (the TPU ops have no CPU
kernels): what a TPU run does first, before the TPU is asked for anything.

Each mode must build, and the TPU computation must hold no summary op and
no float64 tensor; training gives the host call its summaries (mesh's loss,
a mixture's alphas), decoding gives token ids of the batch's shape and
evaluation its metric tensors.
"""

from typing import Dict, List

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.python.tpu import tpu  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.tpu.ops import tpu_ops  # pylint: disable=g-direct-tensorflow-import

import xla_harness
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import mesh_defaults

# Builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

ROWS = attentions.VARIANTS + attentions.BASELINES
CASES = [(row.name, architecture) for row in ROWS
         for architecture in xla_harness.ARCHITECTURES
         if xla_harness.valid(row, architecture)]
CORES = 4
MESH = "batch:2,model:2"
PHYSICAL_SHAPE = [2, 1, 1, 2]  # two chips of two cores
MODES = (tf.estimator.ModeKeys.TRAIN, tf.estimator.ModeKeys.EVAL,
         tf.estimator.ModeKeys.PREDICT)
TPU_REPLICATE_ATTR = "_tpu_replicate"


@pytest.fixture(scope="module", autouse=True)
def absl_flags_parsed():
  """Mesh reads an absl flag (logical_cores_per_chip) when it maps cores."""
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()


def _features(architecture: str, mode: str) -> Dict[str, int]:
  """The features' lengths, as T5's tasks give them to the model function.

  Args:
    architecture: xla_harness.ENCODER_DECODER or LANGUAGE_MODEL.
    mode: a tf.estimator.ModeKeys.

  Returns:
    feature name -> length (also the model function's sequence_length).
  """
  if architecture == xla_harness.ENCODER_DECODER:
    return {"inputs": xla_harness.LENGTH, "targets": xla_harness.LENGTH}
  if mode != tf.estimator.ModeKeys.PREDICT:  # a language model: targets only
    return {"targets": xla_harness.LENGTH}
  # Decoding continues the inputs, padded by the targets' length.
  half = xla_harness.LENGTH // 2
  return {"inputs": half, "targets": half}


def _build(name: str, architecture: str, mode: str):
  """Builds the model function's TPU computation in `mode`.

  Args:
    name: a row of the table.
    architecture: xla_harness.ENCODER_DECODER or LANGUAGE_MODEL.
    mode: a tf.estimator.ModeKeys.

  Returns:
    (the TF graph, the TPUEstimatorSpec).
  """
  model = xla_harness.build_model(attentions.BY_NAME[name], architecture)
  lengths = _features(architecture, mode)
  model_fn = xla_harness.tpu_model_fn(
      model, architecture, MESH, mesh_defaults.LAYOUT_RULES, lengths,
      tpu_summaries=True)
  rng = np.random.RandomState(0)
  specs = []
  with tf.Graph().as_default() as graph:
    tf.train.get_or_create_global_step()

    def computation() -> List[object]:
      features = {
          key: tf.constant(rng.randint(
              2, xla_harness.VOCAB,
              size=(xla_harness.BATCH_FOR_CORES, length)).astype(np.int32))
          for key, length in lengths.items()
          if key != "targets" or mode != tf.estimator.ModeKeys.PREDICT}
      spec = model_fn(features, None, mode,
                      {"context": xla_harness.StandInTPUContext(
                          CORES, PHYSICAL_SHAPE)}, None)
      specs.append(spec)
      if mode == tf.estimator.ModeKeys.PREDICT:
        return list(spec.predictions.values())
      if mode == tf.estimator.ModeKeys.EVAL:
        _, tensors = spec.eval_metrics
        return [spec.loss] + list(tensors)
      with tf.control_dependencies([spec.train_op]):
        loss = tf.identity(spec.loss)
      return [loss, tpu_ops.outfeed_enqueue_tuple(spec.host_call[1])]

    tpu.replicate(computation, inputs=[[]] * CORES)
  return graph, specs[0]


def _not_for_a_tpu(graph: tf.Graph) -> List[str]:
  """Summary ops and float64 tensors of the TPU computation."""
  found = []
  for op in graph.get_operations():
    if TPU_REPLICATE_ATTR not in op.node_def.attr:
      continue
    if op.type in xla_harness.SUMMARY_OPS:
      found.append("%s (%s): summary" % (op.name, op.type))
    if any(t.dtype == tf.float64 for t in op.outputs):
      found.append("%s (%s): float64" % (op.name, op.type))
  return found


@pytest.mark.parametrize("name,architecture", CASES)
def test_the_tpu_model_function_builds_in_every_mode(name, architecture):
  for mode in MODES:
    graph, spec = _build(name, architecture, mode)
    assert not _not_for_a_tpu(graph), (mode, _not_for_a_tpu(graph))
    if mode == tf.estimator.ModeKeys.TRAIN:
      # The global step, mesh's loss, and one alpha per function of a
      # mixture in each stack with it.
      components = attentions.BY_NAME[name].components
      alphas = len(components) if len(components) > 1 else 0
      stacks = 1 if architecture == xla_harness.LANGUAGE_MODEL else 2
      assert len(spec.host_call[1]) == 2 + alphas * stacks
    elif mode == tf.estimator.ModeKeys.PREDICT:
      outputs = spec.predictions["outputs"]
      assert outputs.dtype == tf.int32
      assert outputs.shape.as_list()[0] == xla_harness.BATCH_FOR_CORES
    else:
      assert spec.eval_metrics is not None


def test_a_summary_and_a_float64_in_the_tpu_computation_are_found():
  with tf.Graph().as_default() as graph:
    def computation():
      x = tf.constant(1.0)
      tf.raw_ops.ScalarSummary(tags="inside", values=x)
      return [tf.cast(tf.cast(x, tf.float64), tf.float32)]
    tpu.replicate(computation, inputs=[[]])
  found = _not_for_a_tpu(graph)
  assert any(f.endswith("(ScalarSummary): summary") for f in found), found
  assert any(f.endswith(": float64") for f in found), found
