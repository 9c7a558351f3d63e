# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Prints the t5_mesh_transformer commands of the paper's Tables 2-7.

For every table, every experiment behind it, and every Synthesizer variant
and baseline it reports, the commands of `tools/tpu_job.py` (train, finetune
where the table has one, evaluate), with shell variables for the TPU, zone,
project and bucket:

  python tools/paper_commands.py > paper_commands.sh
  TPU=synth-v3-8 ZONE=europe-west4-a PROJECT=my-project BUCKET=my-bucket \
      bash paper_commands.sh   # runs everything, one job after the other

The baseline rows: DyConv and LightConv in Table 4, DyConv in Tables 5-6,
Linformer in Table 7 (with the paper's k = 32); the paper's Tables 2-3
report none.

Nothing touches the network. `--table` narrows the tables; `--variant` and
`--baseline` (repeatable) replace the rows a table reports with the ones
given, for any table where they are valid, e.g.

  python tools/paper_commands.py --baseline dynamic_conv --table "Table 2-3"

A non-causal baseline (Linformer) is refused, with exit status 2, for a
table named with `--table` that has a decoder-only language model (LM1B in
Tables 2-3); without `--table`, such a table is left out with a note on
stderr and the other tables' commands are printed.

The tables' experiments, variants and baselines are in
`mtf_synthesizer.jobs.experiments` (TABLE_EXPERIMENTS, TABLE_VARIANTS,
TABLE_BASELINES, the last from `mtf_synthesizer.attentions`).
"""

import argparse
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import cloud_tpu
from mtf_synthesizer.jobs import experiments


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Prints the commands; returns the exit status."""
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog=__doc__.split("\n\n", 1)[1])
  parser.add_argument("--table", choices=list(experiments.TABLE_EXPERIMENTS),
                      action="append", help="default: every table")
  parser.add_argument("--variant", choices=attentions.VARIANT_NAMES,
                      action="append",
                      help="default (without --baseline): the variants each "
                      "table reports")
  parser.add_argument("--baseline", choices=attentions.BASELINE_NAMES,
                      action="append",
                      help="default (without --variant): the baselines each "
                      "table reports")
  parser.add_argument("--model_size", default="base")
  parser.add_argument("--tpu_topology", default="2x2")
  args = parser.parse_args(argv)
  lines = ["set -e"]
  for table in args.table or experiments.TABLE_EXPERIMENTS:
    try:
      lines += cloud_tpu.table_commands(
          table, args.variant, args.baseline, model_size=args.model_size,
          tpu_topology=args.tpu_topology)
    except ValueError as e:
      if args.table:
        print("paper_commands: %s: %s" % (table, e), file=sys.stderr)
        return 2
      print("paper_commands: %s left out: %s" % (table, e), file=sys.stderr)
  print("\n".join(lines))
  return 0


if __name__ == "__main__":
  sys.exit(main())
