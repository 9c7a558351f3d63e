# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The training step of mesh's model_fn, ordered by `order_step_increment`.

mesh groups the optimizer's updates with `global_step`'s increment and
nothing orders the two: the learning-rate schedule and Adafactor's decay
rate read the step, and on a busy machine the increment can run first (two
same-seed runs then drift apart: tests/test_preemption.py). Here mesh's own
`tpu_estimator_model_fn` builds a tiny LM's training graph; every read of
the step that an update waits for must come before the increment once the
graph is ordered (and does not before: the control). The ordered step
runs in test_preemption.py's same-seed runs of the stock CLI.
"""

import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers
from mesh_tensorflow.transformer import utils as mtf_utils
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import graph_order
from mtf_synthesizer.training import determinism

LENGTH = 8
VOCABULARY = 16


@pytest.fixture(params=["resource variables", "reference variables"])
def train_graph(request, tmp_path):
  """mesh's training graph of a one-layer LM: (graph, EstimatorSpec, step)."""
  was_enabled = tf.resource_variables_enabled()
  if request.param == "resource variables":
    tf.enable_resource_variables()
  else:
    tf.disable_resource_variables()
  try:
    graph = tf.Graph()
    with graph.as_default():
      step = tf.train.get_or_create_global_step()
      model = transformer.Unitransformer(
          layer_stack=transformer.LayerStack(
              [transformer_layers.SelfAttention(num_heads=2,
                                                key_value_size=4),
               transformer_layers.DenseReluDense(hidden_size=8)],
              sublayers_initial=[],
              sublayers_per_layer=[transformer.sublayer_rms_norm,
                                   transformer.sublayer_call_layer,
                                   transformer.sublayer_residual],
              sublayers_final=[transformer.sublayer_rms_norm]),
          d_model=8, input_vocab_size=VOCABULARY,
          output_vocab_size=VOCABULARY, autoregressive=True,
          max_length=LENGTH)
      model_fn = mtf_utils.tpu_estimator_model_fn(
          "lm", model, vocabulary=None, model_dir=str(tmp_path),
          use_tpu=False, mesh_shape=mtf.Shape([]),
          layout_rules=mtf.LayoutRules([]), batch_size=2,
          sequence_length={"targets": LENGTH}, autostack=True,
          keep_checkpoint_max=1, save_checkpoints_steps=10,
          learning_rate_schedule=lambda step: tf.math.rsqrt(
              tf.cast(step, tf.float32) + 1.0),
          optimizer=mtf.optimize.AdafactorOptimizer)
      targets = np.arange(2 * LENGTH).reshape(2, LENGTH) % 15 + 1
      spec = model_fn({"targets": tf.constant(targets, tf.int32)}, None,
                      tf.estimator.ModeKeys.TRAIN, params={})
    yield graph, spec, step
  finally:
    if was_enabled:
      tf.enable_resource_variables()
    else:
      tf.disable_resource_variables()


def _reads_and_increment(step):
  """The ops that read `step` and the one that increments it."""
  variable = step.handle if hasattr(step, "handle") else step._ref()  # pylint: disable=protected-access
  consumers = variable.consumers()
  (increment,) = [op for op in consumers
                  if op.type in ("AssignAdd", "AssignAddVariableOp")]
  reads = {op for op in consumers
           if op.type in ("ReadVariableOp", "Identity")}
  return reads, increment


def test_reads_of_the_step_come_before_its_increment(train_graph):
  graph, spec, step = train_graph
  reads, increment = _reads_and_increment(step)
  updates = [op for op in spec.train_op.control_inputs
             if op is not increment]
  assert updates
  feeding = reads & set().union(*(graph_order.ancestors(op)
                                  for op in updates))
  # The learning rate and the decay rate read the step.
  assert feeding
  # mesh's graph as built: the increment need not wait for them.
  assert feeding - graph_order.ancestors(increment)

  assert determinism.order_step_increment(graph) == [increment]
  assert feeding <= graph_order.ancestors(increment)
  # Idempotent: a second pass adds nothing.
  before = list(increment.control_inputs)
  assert not determinism.order_step_increment(graph)
  assert increment.control_inputs == before


def test_a_graph_without_a_step_is_left_alone():
  graph = tf.Graph()
  with graph.as_default():
    tf.constant(1.0)
  assert determinism.order_step_increment(graph) == []
