# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Converts a mesh model directory into the Flax model's orbax checkpoint.

  .venv-jax/bin/python tools/flax_from_mesh.py --model_dir=MESH_MODEL_DIR \
      --gin_file=flax/t5_1_1.gin --gin_file=flax/dense_vanilla.gin \
      --output_dir=OUT_DIR

The checkout's copy of the installed command `mtf-synthesizer-flax-from-mesh`
(`mtf_synthesizer/commands/flax_from_mesh.py`, which says more), run with
this working tree's package in the JAX environment (.venv-jax).
"""

import sys

import _checkout  # pylint: disable=unused-import  (the checkout first)
from mtf_synthesizer.commands import flax_from_mesh

if __name__ == "__main__":
  sys.exit(flax_from_mesh.main())
