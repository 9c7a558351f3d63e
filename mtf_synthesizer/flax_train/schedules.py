# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mesh's learning-rate schedules, as functions of the step for optax.

The same names, arguments and defaults as mesh's
`mesh_tensorflow.transformer.learning_rate_schedules`, registered in gin
under the same module name, so that t5's schedule bindings read the same
here:

  train.learning_rate_schedule = @learning_rate_schedules.learning_rate_schedule_noam
  learning_rate_schedule_noam.linear_decay_fraction = 0.0

(t5's `learning_rate_schedules/rsqrt_no_ramp_down.gin`, for pre-training),
or `@learning_rate_schedules.constant_learning_rate` with
`constant_learning_rate.learning_rate = 0.001` (t5's
`constant_0_001.gin`, for finetuning). `step` is the number of updates
applied before this one (mesh's global step: 0 at the first update);
`total_train_steps` is the run's last step (mesh's `train_steps`).
"""

import math
from typing import Callable, Sequence, Union

import gin
import jax.numpy as jnp

Schedule = Callable[..., jnp.ndarray]

_MODULE = "learning_rate_schedules"


def _float(step) -> jnp.ndarray:
  return jnp.asarray(step, jnp.float32)


@gin.configurable(module=_MODULE)
def product_learning_rate(
    step, total_train_steps: int,
    factors: Sequence[Union[float, Schedule]] = gin.REQUIRED,
    offset: int = 0) -> jnp.ndarray:
  """The product of numbers and schedules, at `step - offset`.

  Args:
    step: the step.
    total_train_steps: the run's steps.
    factors: numbers and schedules (functions of step and total_train_steps).
    offset: subtracted from the step and from total_train_steps.

  Returns:
    The learning rate, float32.
  """
  rate = jnp.float32(1.0)
  for factor in factors:
    rate = rate * (factor(_float(step) - offset, total_train_steps - offset)
                   if callable(factor) else factor)
  return rate


@gin.configurable(module=_MODULE)
def linear_decay(step, total_train_steps: int,
                 steps_or_fraction: float = 0.1) -> jnp.ndarray:
  """Ramps down linearly to 0 at the last step, over the last steps.

  Args:
    step: the step.
    total_train_steps: the run's steps.
    steps_or_fraction: the ramp's steps if > 1, else its fraction of the
      run.

  Returns:
    min(1, (total - step) / ramp steps).
  """
  decay_steps = steps_or_fraction
  if steps_or_fraction <= 1:
    decay_steps *= total_train_steps
  return jnp.minimum(1.0, (total_train_steps - _float(step)) / decay_steps)


@gin.configurable(module=_MODULE)
def linear_warmup(step, total_train_steps: int,
                  steps_or_fraction: float = 10000) -> jnp.ndarray:
  """Ramps up linearly from 0 to 1 over the first steps.

  Args:
    step: the step.
    total_train_steps: the run's steps.
    steps_or_fraction: the ramp's steps if > 1, else its fraction of the
      run.

  Returns:
    min(1, step / ramp steps).
  """
  warmup_steps = steps_or_fraction
  if steps_or_fraction <= 1:
    warmup_steps *= total_train_steps
  return jnp.minimum(1.0, _float(step) / warmup_steps)


@gin.configurable(module=_MODULE)
def truncated_rsqrt(step, total_train_steps: int,
                    warmup_steps: int = 10000) -> jnp.ndarray:
  """1 / sqrt(max(step, warmup_steps)).

  Args:
    step: the step.
    total_train_steps: unused.
    warmup_steps: the steps of constant rate.

  Returns:
    The learning rate.
  """
  del total_train_steps
  return 1.0 / jnp.sqrt(jnp.maximum(_float(step), warmup_steps))


@gin.configurable(module=_MODULE)
def constant(step, total_train_steps: int, value: float = 1.0) -> jnp.ndarray:
  """`value` at every step.

  Args:
    step: unused.
    total_train_steps: unused.
    value: the rate.

  Returns:
    The learning rate.
  """
  del step, total_train_steps
  return jnp.float32(value)


@gin.configurable(module=_MODULE)
def constant_learning_rate(step, total_train_steps: int,
                           learning_rate: float = gin.REQUIRED
                           ) -> jnp.ndarray:
  """`learning_rate` at every step (t5's finetuning schedule).

  Args:
    step: unused.
    total_train_steps: unused.
    learning_rate: the rate.

  Returns:
    The learning rate.
  """
  del step, total_train_steps
  return jnp.float32(learning_rate)


@gin.configurable(module=_MODULE)
def linear_decay_learning_rate(step, total_train_steps: int,
                               initial_lr: float = 0.1,
                               offset: int = 0) -> jnp.ndarray:
  """initial_lr, ramped down linearly to 0 from `offset` to the last step.

  Args:
    step: the step.
    total_train_steps: the run's steps.
    initial_lr: the rate at `offset`.
    offset: the ramp's first step.

  Returns:
    The learning rate.
  """
  return initial_lr * jnp.minimum(
      1.0, (total_train_steps - _float(step)) / (total_train_steps - offset))


@gin.configurable(module=_MODULE)
def learning_rate_schedule_noam(step, total_train_steps: int,
                                warmup_steps: int = 10000,
                                linear_decay_fraction: float = 0.1,
                                multiplier: float = 1.0,
                                offset: int = 0) -> jnp.ndarray:
  """T5's pre-training rate: rsqrt(max(step, warmup)), ramped down at the end.

  Args:
    step: the step.
    total_train_steps: the run's steps.
    warmup_steps: the steps of constant rate 1 / sqrt(warmup_steps).
    linear_decay_fraction: the fraction of the run ramped down to 0 at its
      end; 0: none (t5's `rsqrt_no_ramp_down.gin`).
    multiplier: a factor.
    offset: subtracted from the step and the run's steps (finetuning).

  Returns:
    The learning rate.
  """
  train_steps = float(total_train_steps) - offset
  step_num = _float(step) - offset
  rate = multiplier / jnp.sqrt(jnp.maximum(step_num, warmup_steps))
  if linear_decay_fraction > 0:
    rate = rate * jnp.minimum(1.0, (train_steps - step_num) /
                              (train_steps * linear_decay_fraction))
  return rate


@gin.configurable(module=_MODULE)
def slanted_triangular(step, total_train_steps: int,
                       cut_fraction: float = 0.1, ratio: float = 32,
                       max_learning_rate: float = 0.01,
                       start_step: int = 0) -> jnp.ndarray:
  """ULMFiT's triangle: a short linear ramp up, a long one down.

  Args:
    step: the step.
    total_train_steps: the run's steps.
    cut_fraction: the fraction of the run that ramps up.
    ratio: the largest rate over the smallest.
    max_learning_rate: the largest rate (at the cut).
    start_step: the step the triangle starts at (finetuning).

  Returns:
    max_learning_rate * (1 + p * (ratio - 1)) / ratio, p rising from 0 to 1
    over the cut and falling back to 0 at the last step.
  """
  cut = math.floor(float(total_train_steps) * cut_fraction)
  step_num = _float(step) - float(start_step)
  p = jnp.where(step_num < cut, step_num / cut,
                1 - (step_num - cut) / (cut * (1 / cut_fraction - 1)))
  return max_learning_rate * (1 + p * (ratio - 1)) / ratio
