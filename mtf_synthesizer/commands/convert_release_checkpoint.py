# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Converts a checkpoint of the original release's Synthesizer layer.

Reads every variable of INPUT, maps the release layer's variables with
`mtf_synthesizer.checkpoints.release.convert_variables` (R transposed to
[heads, N, N], the shared dense kernel copied per head, alpha to mixture
weights; the layer's optimizer slots dropped) and writes OUTPUT, which a
model built with `SynthesizerAttention(synthesize_mode=<the same mode>)` and
the same max_length restores through `utils.run.init_checkpoint`.

  mtf-synthesizer-convert-release-checkpoint \
    --input=/path/release/model.ckpt-1000 --output=/path/new/model.ckpt-1000 \
    --num_heads=8

(or `python -m mtf_synthesizer.commands.convert_release_checkpoint`, or, in
a checkout, `python tools/convert_release_checkpoint.py`).
"""

import argparse
import sys
from typing import Optional, Sequence

from mtf_synthesizer.checkpoints import release_checkpoint


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  """Parses the command line (without the program name)."""
  parser = argparse.ArgumentParser(
      prog="mtf-synthesizer-convert-release-checkpoint",
      description=__doc__.split("\n")[0])
  parser.add_argument("--input", required=True,
                      help="release checkpoint (prefix or dir)")
  parser.add_argument("--output", required=True,
                      help="output checkpoint prefix")
  parser.add_argument("--num_heads", type=int, required=True,
                      help="attention heads of the model")
  return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Converts the checkpoint; prints what it wrote; returns the status.

  Args:
    argv: the arguments (default: the command line's).

  Returns:
    0, or 2 when the checkpoint is missing, cannot be read or cannot be
    converted (the reason, naming it, on stderr).
  """
  args = parse_args(sys.argv[1:] if argv is None else argv)
  try:
    print(release_checkpoint.convert(args.input, args.output,
                                     args.num_heads))
  except (ValueError, OSError) as e:
    print("error: %s" % e, file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
