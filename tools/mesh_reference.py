# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Regenerates mesh's reference values on tiny stock-CLI checkpoints.

  .venv/bin/python tools/mesh_reference.py \
      [--output_dir=tests/data/mesh_reference] [--case=NAME ...] \
      [--workers=2] [--no-check_cli_decodes]

For every case of `workbench/mesh_reference.py` (every variant of the
attention table as a T5.1.0 encoder-decoder, a sample of decoder-only
language models, T5.1.1's layout, a `model:2` mesh run and a bfloat16 run)
the stock `t5_mesh_transformer` trains a tiny model for two steps; its
checkpoint is kept with mesh's values on fixed inputs (encoder outputs,
logits, the evaluation and training losses, greedy decodes, which the
CLI's `--mode=infer` must reproduce) in `<output_dir>/<case>/`. Prints one
line per case (seconds, bytes kept) and the total. The tests recompute the
values from the kept checkpoints (tests/test_mesh_reference.py).
"""

import argparse
import os
import sys
import time
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from workbench import mesh_reference

DEFAULT_OUTPUT = os.path.join(_checkout.ROOT, "tests", "data",
                              "mesh_reference")


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Regenerates the cases; prints what each took."""
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--output_dir", default=DEFAULT_OUTPUT)
  parser.add_argument("--case", action="append", default=[],
                      choices=sorted(mesh_reference.BY_NAME),
                      help="a case to regenerate (repeat; default: all)")
  parser.add_argument("--workers", type=int, default=2,
                      help="stock-CLI runs at a time")
  parser.add_argument("--check_cli_decodes",
                      action=argparse.BooleanOptionalAction, default=True,
                      help="decode with the CLI's --mode=infer too and "
                      "require the same texts")
  args = parser.parse_args(argv)
  cases = ([mesh_reference.BY_NAME[c] for c in args.case] if args.case
           else list(mesh_reference.CASES))
  start = time.time()

  def report(summary):
    print("%-45s %6.1f s %8d bytes" % (summary["case"], summary["seconds"],
                                        summary["bytes"]), flush=True)

  summaries = mesh_reference.generate(
      args.output_dir, cases, workers=args.workers,
      check_cli_decodes=args.check_cli_decodes, on_done=report)
  print("%d cases in %.0f s, %d bytes" % (
      len(summaries), time.time() - start,
      sum(s["bytes"] for s in summaries)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
