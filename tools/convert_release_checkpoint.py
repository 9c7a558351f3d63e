# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Converts a checkpoint of the original release's Synthesizer layer.

  python tools/convert_release_checkpoint.py \
    --input=/path/release/model.ckpt-1000 --output=/path/new/model.ckpt-1000 \
    --num_heads=8

The checkout's copy of the installed command
`mtf-synthesizer-convert-release-checkpoint`
(`mtf_synthesizer/commands/convert_release_checkpoint.py`, which says
more), run with this working tree's package.
"""

import sys

import _checkout  # pylint: disable=unused-import  (the checkout first)
from mtf_synthesizer.commands import convert_release_checkpoint

if __name__ == "__main__":
  sys.exit(convert_release_checkpoint.main())
