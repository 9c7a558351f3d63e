# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Regenerates the stock CLI's training losses from step-0 checkpoints.

  .venv/bin/python tools/mesh_training_reference.py \
      [--output_dir=tests/data/mesh_training] [--case=NAME ...]

For every case of `workbench/mesh_training_reference.py` (V and D+V, tiny
T5.1.0 encoder-decoders, unpacked byte-level span corruption) the stock
`t5_mesh_transformer` runs twice: from scratch, to keep its step-0
checkpoint, then 20 steps from a copy of it, whose per-step training
losses are kept with the batches it consumed in `<output_dir>/<case>/`
(the two runs must agree, and mesh's steps replayed in this process on the
batches must give the same losses). Prints one line per case (seconds,
bytes kept) and the total. tests/test_mesh_training_reference.py reruns
the CLI from the kept checkpoints.
"""

import argparse
import os
import sys
import time
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from workbench import mesh_training_reference

DEFAULT_OUTPUT = os.path.join(_checkout.ROOT, "tests", "data",
                              "mesh_training")


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Regenerates the cases; prints what each took."""
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--output_dir", default=DEFAULT_OUTPUT)
  parser.add_argument("--case", action="append", default=[],
                      choices=sorted(mesh_training_reference.BY_NAME),
                      help="a case to regenerate (repeat; default: all)")
  args = parser.parse_args(argv)
  cases = ([mesh_training_reference.BY_NAME[c] for c in args.case]
           if args.case else list(mesh_training_reference.CASES))
  start = time.time()

  def report(summary):
    print("%-45s %6.1f s %8d bytes" % (summary["case"], summary["seconds"],
                                        summary["bytes"]), flush=True)

  summaries = mesh_training_reference.generate(args.output_dir, cases,
                                               on_done=report)
  print("%d cases in %.0f s, %d bytes" % (
      len(summaries), time.time() - start,
      sum(s["bytes"] for s in summaries)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
