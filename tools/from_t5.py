# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Writes a Synthesizer built around a transformers T5 checkpoint.

  python tools/from_t5.py --t5=T5_DIR_OR_HUB_NAME --variant=D+V \
      --output_dir=OUT_DIR

The checkout's copy of the installed command `mtf-synthesizer-from-t5`
(`mtf_synthesizer/commands/from_t5.py`, which says more), run with this
working tree's package, without TensorFlow.
"""

import sys

import _checkout  # pylint: disable=unused-import  (the checkout first)
import _mtf_synthesizer_commands

if __name__ == "__main__":
  sys.exit(_mtf_synthesizer_commands.from_t5())
