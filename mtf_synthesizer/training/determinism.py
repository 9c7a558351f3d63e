# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Same seed, same losses: a drop-in for mesh's `utils.train_model`.

Two fresh runs of mesh 0.1.21's training differ from the first step on CPU:
mesh builds its RunConfig without `tf_random_seed`, so the initial weights
differ; and with a graph-level seed they still drift apart from the second
step (by 1e-4 to 1e-3 in the loss), which resource variables cure (reads of
TF1 reference variables are not ordered against the optimizer's in-place
updates). Fixing the thread counts, oneDNN or `TF_DETERMINISTIC_OPS` does
not. One race is left: mesh adds `global_step`'s increment to the training
step with no order against the step's reads of it (the learning-rate
schedule, Adafactor's decay rate), so on a busy machine an update can see
the next step's number. `order_step_increment` makes the increment wait for
the step's updates. Measured in `docs/preemption.md`; tested in
`tests/test_preemption.py`.

  --gin_param="utils.run.train_model_fn = @mtf_synthesizer.deterministic_train_model"
  --gin_param="mtf_synthesizer.deterministic_train_model.tf_random_seed = 1"

The data order is fixed by t5's own `mesh_train_dataset_fn.seed` when the
dataset is shuffled.
"""

from typing import Any, List

import gin
from mesh_tensorflow.transformer import utils as mtf_utils
import tensorflow.compat.v1 as tf


@gin.configurable(module="mtf_synthesizer")
def deterministic_train_model(estimator, vocabulary, sequence_length,
                              batch_size, train_dataset_fn, train_steps,
                              ensemble_inputs,
                              tf_random_seed: int = gin.REQUIRED,
                              resource_variables: bool = True,
                              **kwargs: Any) -> None:
  """mesh's `utils.train_model`: graph seed, resource variables, ordered step.

  The estimator's `train` gets a session hook that applies
  `order_step_increment` to the training graph before it runs.

  Args:
    estimator: as in `mesh_tensorflow.transformer.utils.train_model`.
    vocabulary: as there.
    sequence_length: as there.
    batch_size: as there.
    train_dataset_fn: as there.
    train_steps: as there.
    ensemble_inputs: as there.
    tf_random_seed: the graph-level seed of the training graph (initial
      weights, dropout).
    resource_variables: use TF resource variables (process-wide, from here
      on); without them same-seed runs drift apart after the first step.
    **kwargs: `train_model`'s other keyword arguments (`dataset_split`,
      `skip_seen_data`, ...), passed on.
  """
  if resource_variables:
    tf.enable_resource_variables()
  train = estimator.train

  def train_with_ordered_step(*args, hooks=None, **train_kwargs):
    hooks = list(hooks or []) + [_OrderStepIncrement()]
    return train(*args, hooks=hooks, **train_kwargs)

  estimator.train = train_with_ordered_step
  # mesh's get_estimator builds the RunConfig without a seed, and an
  # Estimator's config has no setter: give this one a seeded copy.
  estimator._config = estimator.config.replace(  # pylint: disable=protected-access
      tf_random_seed=tf_random_seed)
  mtf_utils.train_model(estimator, vocabulary, sequence_length, batch_size,
                        train_dataset_fn, train_steps, ensemble_inputs,
                        **kwargs)


_INCREMENTS = ("AssignAdd", "AssignAddVariableOp")


def order_step_increment(graph: tf.Graph) -> List[tf.Operation]:
  """Makes `global_step`'s increment wait for the rest of its training step.

  mesh's model_fn groups the optimizer's updates with
  `tf.assign_add(global_step, 1)`, and nothing orders that increment against
  the reads of `global_step` the updates depend on (the learning-rate
  schedule, Adafactor's decay rate): it may run before them. Here each
  increment that is grouped with other ops gets those ops as control
  inputs, so every read that feeds an update sees the step's own number.

  Args:
    graph: a graph with a global step, not yet run in a session.

  Returns:
    The increments given new control inputs (one for mesh's training graph;
    none when it is ordered already).
  """
  with graph.as_default():
    step = tf.train.get_global_step()
  if step is None:
    return []
  # The variable's own tensor (a resource handle, or the ref of a
  # reference variable) is its op's output.
  handle = step.op.outputs[0]
  increments = [op for op in handle.consumers() if op.type in _INCREMENTS]
  ordered = []
  for increment in increments:
    groups = [op for op in graph.get_operations()
              if increment in op.control_inputs]
    waits_for = set(increment.control_inputs)
    siblings = [op for group in groups for op in group.control_inputs
                if op is not increment and op not in waits_for]
    if siblings:
      increment._add_control_inputs(siblings)  # pylint: disable=protected-access
      ordered.append(increment)
  return ordered


class _OrderStepIncrement(tf.train.SessionRunHook):
  """Applies `order_step_increment` to the training graph (`begin`)."""

  def begin(self):
    ordered = order_step_increment(tf.get_default_graph())
    tf.logging.info("global_step's increment ordered after the step's "
                    "updates (%d increment(s))", len(ordered))
