# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Same seed, same losses: a drop-in for mesh's `utils.train_model`.

Two fresh runs of mesh 0.1.21's training differ from the first step on CPU:
mesh builds its RunConfig without `tf_random_seed`, so the initial weights
differ; and with a graph-level seed they still drift apart from the second
step (by 1e-4 to 1e-3 in the loss), which resource variables cure (reads of
TF1 reference variables are not ordered against the optimizer's in-place
updates). Fixing the thread counts, oneDNN or `TF_DETERMINISTIC_OPS` does
not. Measured in `docs/preemption.md`; tested in `tests/test_preemption.py`.

  --gin_param="utils.run.train_model_fn = @mtf_synthesizer.deterministic_train_model"
  --gin_param="mtf_synthesizer.deterministic_train_model.tf_random_seed = 1"

The data order is fixed by t5's own `mesh_train_dataset_fn.seed` when the
dataset is shuffled.
"""

from typing import Any

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
  """mesh's `utils.train_model` with a graph seed and resource variables.

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
  # mesh's get_estimator builds the RunConfig without a seed, and an
  # Estimator's config has no setter: give this one a seeded copy.
  estimator._config = estimator.config.replace(  # pylint: disable=protected-access
      tf_random_seed=tf_random_seed)
  mtf_utils.train_model(estimator, vocabulary, sequence_length, batch_size,
                        train_dataset_fn, train_steps, ensemble_inputs,
                        **kwargs)
