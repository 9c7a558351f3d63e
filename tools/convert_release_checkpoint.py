# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Converts a checkpoint of the original release's Synthesizer layer.

Reads every variable of INPUT, maps the release layer's variables with
`mtf_synthesizer.release.convert_variables` (R transposed to [heads, N, N],
the shared dense kernel copied per head, alpha to mixture weights; the
layer's optimizer slots dropped) and writes OUTPUT, which a model built with
`SynthesizerAttention(synthesize_mode=<the same mode>)` and the same
max_length restores through `utils.run.init_checkpoint`.

  python tools/convert_release_checkpoint.py \
    --input=/path/release/model.ckpt-1000 --output=/path/new/model.ckpt-1000 \
    --num_heads=8
"""

from typing import Dict

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from mtf_synthesizer import release

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Release checkpoint (prefix or dir).")
flags.DEFINE_string("output", None, "Output checkpoint prefix.")
flags.DEFINE_integer("num_heads", None, "Attention heads of the model.")


def read_checkpoint(path: str) -> Dict[str, np.ndarray]:
  """Returns every variable of a checkpoint by name."""
  if tf.io.gfile.isdir(path):
    path = tf.train.latest_checkpoint(path)
  reader = tf.train.load_checkpoint(path)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def write_checkpoint(values: Dict[str, np.ndarray], path: str) -> str:
  """Writes variables to a checkpoint; returns its prefix."""
  graph = tf.Graph()
  with graph.as_default():
    variables = [tf.Variable(v, name=n) for n, v in sorted(values.items())]
    with tf.Session() as sess:
      sess.run(tf.variables_initializer(variables))
      return tf.train.Saver(variables).save(sess, path,
                                            write_meta_graph=False)


def convert(input_path: str, output_path: str, num_heads: int) -> str:
  """Converts INPUT to OUTPUT; returns the written prefix."""
  values = read_checkpoint(input_path)
  converted = release.convert_variables(values, num_heads=num_heads)
  for name in sorted(set(converted) - set(values)):
    logging.info("converted -> %s %s", name, converted[name].shape)
  return write_checkpoint(converted, output_path)


def main(argv):
  del argv
  print(convert(FLAGS.input, FLAGS.output, FLAGS.num_heads))


if __name__ == "__main__":
  flags.mark_flags_as_required(["input", "output", "num_heads"])
  app.run(main)
