# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Trains or finetunes the Flax Synthesizer with the JAX trainer.

  .venv-jax/bin/python tools/jax_train.py --model_dir=MODEL_DIR \
      --gin_file=flax/random.gin --gin_file=flax/train/tiny_offline.gin

The checkout's copy of the installed command `mtf-synthesizer-jax-train`
(`mtf_synthesizer/commands/jax_train.py`, which says more), run with this
working tree's package in the JAX environment (.venv-jax).
"""

import sys

import _checkout  # pylint: disable=unused-import  (the checkout first)
from mtf_synthesizer.commands import jax_train

if __name__ == "__main__":
  sys.exit(jax_train.main())
