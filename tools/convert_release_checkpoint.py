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

import os
import sys

from absl import app
from absl import flags

# Run from the checkout: its packages first (workbench/checkout.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer import release_checkpoint

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Release checkpoint (prefix or dir).")
flags.DEFINE_string("output", None, "Output checkpoint prefix.")
flags.DEFINE_integer("num_heads", None, "Attention heads of the model.")


def main(argv):
  del argv
  print(release_checkpoint.convert(FLAGS.input, FLAGS.output,
                                   FLAGS.num_heads))


if __name__ == "__main__":
  flags.mark_flags_as_required(["input", "output", "num_heads"])
  app.run(main)
