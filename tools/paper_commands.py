# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Prints the t5_mesh_transformer commands of the paper's Tables 2-7.

For every table, every experiment behind it and every variant it reports,
the commands of `tools/tpu_job.py` (train, finetune where the table has one,
evaluate), with shell variables for the TPU, zone, project and bucket:

  python tools/paper_commands.py > paper_commands.sh
  TPU=synth-v3 ZONE=europe-west4-a PROJECT=my-project BUCKET=my-bucket \
      bash paper_commands.sh   # runs everything, one job after the other

Nothing touches the network; `--table` and `--variant` narrow the output.
The tables' experiments and variants are in
`mtf_synthesizer.tools_lib.tpu_jobs` (TABLE_EXPERIMENTS, TABLE_VARIANTS).
"""

import argparse
import sys
from typing import Optional, Sequence

from mtf_synthesizer import variants
from mtf_synthesizer.tools_lib import tpu_jobs


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Prints the commands; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--table", choices=sorted(tpu_jobs.TABLE_EXPERIMENTS),
                      action="append", help="default: every table")
  parser.add_argument("--variant", choices=variants.NAMES, action="append",
                      help="default: the variants each table reports")
  parser.add_argument("--model_size", default="base")
  parser.add_argument("--tpu_topology", default="2x2")
  args = parser.parse_args(argv)
  print("set -e")
  for table in args.table or tpu_jobs.TABLE_EXPERIMENTS:
    print("\n".join(tpu_jobs.table_commands(
        table, args.variant, args.model_size, args.tpu_topology)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
