# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Checkpoint files of the original release, converted (for the command
`mtf-synthesizer-convert-release-checkpoint`,
`mtf_synthesizer/commands/convert_release_checkpoint.py`).

The variables are mapped by `release.convert_variables`; this module reads
and writes the checkpoint files around it.
"""

from typing import Dict

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from mtf_synthesizer.checkpoints import release


def read_checkpoint(path: str) -> Dict[str, np.ndarray]:
  """Every variable of a checkpoint.

  Args:
    path: a checkpoint prefix, or a directory (its latest checkpoint).

  Returns:
    {name: value}.

  Raises:
    FileNotFoundError: no checkpoint at path (named).
    ValueError: a checkpoint whose files cannot be read (named).
  """
  if tf.io.gfile.isdir(path):
    found = tf.train.latest_checkpoint(path)
    if not found:
      raise FileNotFoundError("no checkpoint in the directory %s" % path)
    path = found
  elif not (tf.io.gfile.exists(path + ".index") or
            tf.io.gfile.exists(path)):  # TF2's files, or TF1's one file
    raise FileNotFoundError("no checkpoint at %s (no %s.index)" % (path,
                                                                   path))
  try:
    reader = tf.train.load_checkpoint(path)
    return {n: reader.get_tensor(n)
            for n in reader.get_variable_to_shape_map()}
  # A data file cut short gives IndexError "Read less bytes than requested".
  except (tf.errors.OpError, IndexError, RuntimeError) as e:
    raise ValueError("cannot read the checkpoint %s: %s" % (path, e)) from None


def write_checkpoint(values: Dict[str, np.ndarray], path: str) -> str:
  """Writes variables to a checkpoint.

  Args:
    values: {name: value}.
    path: the checkpoint prefix.

  Returns:
    The prefix written.
  """
  graph = tf.Graph()
  with graph.as_default():
    variables = [tf.Variable(v, name=n) for n, v in sorted(values.items())]
    with tf.Session() as sess:
      sess.run(tf.variables_initializer(variables))
      return tf.train.Saver(variables).save(sess, path,
                                            write_meta_graph=False)


def convert(input_path: str, output_path: str, num_heads: int) -> str:
  """Converts a release checkpoint.

  Args:
    input_path: the release checkpoint (prefix or directory).
    output_path: the output prefix.
    num_heads: attention heads of the model.

  Returns:
    The prefix written.

  Raises:
    FileNotFoundError: no checkpoint at input_path (named).
    ValueError: input_path's files cannot be read, or its variables cannot
      be converted.
  """
  values = read_checkpoint(input_path)
  converted = release.convert_variables(values, num_heads=num_heads)
  for name in sorted(set(converted) - set(values)):
    logging.info("converted -> %s %s", name, converted[name].shape)
  return write_checkpoint(converted, output_path)
