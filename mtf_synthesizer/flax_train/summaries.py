# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Scalar metrics in TensorBoard's event files (TensorFlow's summary writer).

`model_dir/train/` gets the training metrics, `model_dir/eval/` the
evaluation's, as T5X and mesh's CLI write theirs:

  tensorboard --logdir=MODEL_DIR
"""

from typing import Mapping


class Writer:
  """Scalars of one directory's event file."""

  def __init__(self, directory: str):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self._tf = tf
    self._writer = tf.summary.create_file_writer(directory)

  def write(self, step: int, scalars: Mapping[str, float]) -> None:
    """Writes each scalar at `step` and flushes.

    Args:
      step: the step.
      scalars: name -> value.
    """
    tf = self._tf
    # TensorBoard's scalar summaries (what tf.summary.scalar writes, whose
    # implementation lives in the tensorboard package).
    metadata = tf.compat.v1.SummaryMetadata(
        plugin_data=tf.compat.v1.SummaryMetadata.PluginData(
            plugin_name="scalars"))
    with self._writer.as_default():
      for name, value in sorted(scalars.items()):
        tf.summary.write(name, tf.constant(float(value), tf.float32),
                         step=int(step), metadata=metadata)
    self._writer.flush()

  def close(self) -> None:
    self._writer.close()


def writer(directory: str) -> Writer:
  """A writer of `directory`'s event file (created when missing).

  Args:
    directory: where the event file goes.

  Returns:
    The Writer.
  """
  return Writer(directory)


def read_scalars(directory: str) -> Mapping[str, Mapping[int, float]]:
  """The scalars of a directory's event files (the newest value per step).

  Args:
    directory: a directory `writer` wrote.

  Returns:
    name -> step -> value.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  out = {}
  for path in sorted(tf.io.gfile.glob(directory + "/events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        number = float(tf.make_ndarray(value.tensor)) if value.HasField(
            "tensor") else value.simple_value
        out.setdefault(value.tag, {})[int(event.step)] = number
  return out
