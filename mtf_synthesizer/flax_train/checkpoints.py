# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The trainer's checkpoints: orbax's CheckpointManager in the model directory.

`model_dir/checkpoint_<step>/` holds the whole train state (step,
parameters, optimizer state) as orbax writes it: into a temporary
directory first, renamed to its step's name only once every file is
written, so that a run killed while saving leaves no half-written
checkpoint that `latest_step` would return (orbax removes the leftover
temporary directory when the manager next opens the directory). A
checkpoint is written every `save_interval_steps` steps and at the last
step; the last `max_to_keep` are kept.
"""

import os
from typing import Any, Optional

import gin
import orbax.checkpoint as ocp

STEP_PREFIX = "checkpoint"
STATE = "state"


@gin.configurable(module="mtf_synthesizer.flax_train")
def checkpoint_options(save_interval_steps: int = 1000,
                       max_to_keep: Optional[int] = 5,
                       async_save: bool = True
                       ) -> ocp.CheckpointManagerOptions:
  """How often checkpoints are written and how many are kept.

  Args:
    save_interval_steps: a checkpoint every this many steps.
    max_to_keep: the newest kept (None: all).
    async_save: write in the background while training goes on.

  Returns:
    orbax's options.
  """
  # Every save_interval_steps steps, and no extra save at a run's first
  # step (orbax's default policy adds one); `save(force=True)` at the last.
  return ocp.CheckpointManagerOptions(
      save_decision_policy=ocp.checkpoint_managers.FixedIntervalPolicy(
          save_interval_steps),
      max_to_keep=max_to_keep,
      step_prefix=STEP_PREFIX, create=True, cleanup_tmp_directories=True,
      enable_async_checkpointing=async_save)


def manager(model_dir: str,
            options: Optional[ocp.CheckpointManagerOptions] = None
            ) -> ocp.CheckpointManager:
  """The model directory's checkpoint manager.

  Args:
    model_dir: the model directory (local or a bucket).
    options: `checkpoint_options()` by default.

  Returns:
    The manager (close it, or use it in a `with`).
  """
  directory = model_dir if "://" in model_dir else os.path.abspath(model_dir)
  return ocp.CheckpointManager(
      directory, options=options or checkpoint_options())


def save(checkpoints: ocp.CheckpointManager, step: int, state: Any,
         force: bool = False) -> bool:
  """Writes the state at `step` if the interval (or `force`) says so.

  Args:
    checkpoints: the manager.
    step: the state's step.
    state: the train state.
    force: write whatever the interval.

  Returns:
    Whether a checkpoint is being written.
  """
  return checkpoints.save(
      step, args=ocp.args.Composite(**{STATE: ocp.args.StandardSave(state)}),
      force=force)


def restore(checkpoints: ocp.CheckpointManager, step: int,
            abstract_state: Any) -> Any:
  """The train state of a step, placed as `abstract_state`'s shardings say.

  Args:
    checkpoints: the manager.
    step: a step `checkpoints.all_steps()` lists.
    abstract_state: the state's shapes, dtypes and shardings.

  Returns:
    The state.
  """
  restored = checkpoints.restore(step, args=ocp.args.Composite(
      **{STATE: ocp.args.StandardRestore(abstract_state)}))
  return restored[STATE]
