# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What a run leaves in its model directory: scalars and parameters.

The scalar summaries of TF event files (training loss, speed, the mixture
weights, evaluation metrics) and the size of the latest checkpoint.
"""

import os
import statistics
from typing import Dict, List, Optional, Tuple

# {tag: [(step, wall_time, value)]}
Scalars = Dict[str, List[Tuple[int, float, float]]]


def _quiet_tf():
  """Imports TensorFlow without its start-up and deprecation chatter."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.get_logger().setLevel("ERROR")
  return tf


def read_scalars(event_dir: str) -> Scalars:
  """The scalar summaries of the event files in one folder.

  Args:
    event_dir: a model directory or one of its eval folders.

  Returns:
    {tag: [(step, wall_time, value)]}, in file order.
  """
  tf = _quiet_tf()
  out = {}
  for name in sorted(tf.io.gfile.listdir(event_dir)):
    if not name.startswith("events.out.tfevents"):
      continue
    for event in tf.train.summary_iterator(os.path.join(event_dir, name)):
      for value in event.summary.value:
        if value.HasField("simple_value"):
          out.setdefault(value.tag, []).append(
              (event.step, event.wall_time, value.simple_value))
  return out


def last_value(scalars: Scalars, tag: str) -> Optional[float]:
  """The value of `tag` at its last step, or None."""
  points = scalars.get(tag, [])
  return max(points)[2] if points else None


def steps_per_sec(scalars: Scalars) -> Optional[float]:
  """The median training speed, start-up and the first step excluded.

  Args:
    scalars: a model directory's scalars.

  Returns:
    The median `global_step/sec` after step 1, or None.
  """
  rates = [v for s, _, v in scalars.get("global_step/sec", []) if s > 1]
  return statistics.median(rates) if rates else None


def eval_scalars(model_dir: str, prefix: str) -> Scalars:
  """The scalars of the last eval folder whose name starts with `prefix`.

  Args:
    model_dir: the model directory.
    prefix: e.g. "eval_pydocs_span_corruption_validation" (the perplexity
      evaluation) or "validation_eval" (decodes).

  Returns:
    {tag: [(step, wall_time, value)]}; {} when there is no such folder.
  """
  folders = [d for d in sorted(os.listdir(model_dir)) if d.startswith(prefix)
             and os.path.isdir(os.path.join(model_dir, d))]
  return read_scalars(os.path.join(model_dir, folders[-1])) if folders else {}


def count_parameters(model_dir: str) -> int:
  """Parameters in the latest checkpoint, without slots and global_step.

  Args:
    model_dir: the model directory.

  Returns:
    The number of parameters.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  tf = _quiet_tf()
  total = 0
  for name, shape in tf.train.list_variables(
      tf.train.latest_checkpoint(model_dir)):
    if "_slot_" in name or name == "global_step":
      continue
    total += int(np.prod(shape))
  return total
