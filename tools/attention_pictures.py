# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Pictures of the attention of trained Synthesizer models and mesh's.

Reads checkpoints written by the stock `t5_mesh_transformer` (a model_dir or
a checkpoint path) and writes PNGs to --output_dir: the learned synthetic
attention softmax(R) / softmax(R1 R2^T) per layer and head
(synthetic_<model>.png), the attention weights on --text
(input_<model>.png), their histograms side by side (histograms.png), and the
mixture weights (mixture_<model>.png). With --layers=all (the default) the
model is run by mesh on CPU and every layer is drawn; with --layers=first
layer 0 of each stack is computed in NumPy from the checkpoint. See
`workbench/pictures.py` (with `attention_layers.py`, `attention_maps.py`)
and docs/analysis.md.

Usage:

  python tools/attention_pictures.py --output_dir=/tmp/pictures \
      --model=R=runs/random --model=mesh=runs/t5_attention \
      [--text="..."] [--length=64] [--layers=all|first] [--no-causal]
"""

import argparse
import os
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from workbench import pictures


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Draws the pictures; prints the paths written."""
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--model", action="append", required=True,
                      help="NAME=PATH (model_dir or checkpoint); repeat.")
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--text", default=pictures.DEFAULT_TEXT)
  parser.add_argument("--length", type=int, default=64,
                      help="positions in the synthetic-attention pictures")
  parser.add_argument("--causal", action=argparse.BooleanOptionalAction,
                      default=True,
                      help="causal mask on decoder synthetic attention")
  parser.add_argument("--layers", choices=("all", "first"), default="all",
                      help="all: run the model with mesh; first: layer 0 "
                      "in NumPy")
  parser.add_argument("--dpi", type=int, default=120)
  args = parser.parse_args(argv)
  models = []
  for spec in args.model:
    name, sep, path = spec.partition("=")
    if not sep:
      name, path = os.path.basename(os.path.normpath(spec)), spec
    models.append((name, path))
  for path in pictures.draw(models, args.output_dir, args.text, args.length,
                            args.causal, args.layers == "all", args.dpi):
    print(path)
  return 0


if __name__ == "__main__":
  sys.exit(main())
