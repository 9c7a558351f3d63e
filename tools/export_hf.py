# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Exports a trained model to a Hugging Face `transformers` directory.

  python tools/export_hf.py MODEL_DIR OUT_DIR [--vocabulary=byte]

The checkout's copy of the installed command `mtf-synthesizer-export-hf`
(`mtf_synthesizer/commands/export_hf.py`, which says more), run with this
working tree's package (--help answers before TensorFlow is imported).
"""

import sys

import _checkout  # pylint: disable=unused-import  (the checkout first)
import _mtf_synthesizer_commands

if __name__ == "__main__":
  sys.exit(_mtf_synthesizer_commands.export_hf())
