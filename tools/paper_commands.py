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
"""

import argparse
import os
import sys
from typing import List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tpu_job  # pylint: disable=g-import-not-at-top

# The experiments behind each table.
TABLE_EXPERIMENTS = {
    "Table 2-3": ("wmt_ende", "wmt_enfr", "lm1b", "cnn_dm", "personachat"),
    "Table 4": ("c4_glue_superglue",),
    "Tables 5-6": ("c4_glue_superglue",),
    "Table 7": ("ag_news", "imdb"),
}
# Table 4 is the pretraining stage of the C4 + GLUE/SuperGLUE job.
_TABLE_STAGES = {"Table 4": "pretrain"}


def table_commands(table: str, variants: Optional[Sequence[str]] = None,
                   model_size: str = "base",
                   tpu_topology: str = "2x2") -> List[str]:
  """The commands of one table, as shell text with a comment per job.

  Args:
    table: a key of TABLE_EXPERIMENTS.
    variants: variant names (default: those the table reports).
    model_size: T5 model size (the paper: base).
    tpu_topology: TPU topology (the paper's Table 4: 2x2 TPU v3).

  Returns:
    Lines of shell text.
  """
  lines = []
  for experiment in TABLE_EXPERIMENTS[table]:
    for variant in variants or tpu_job.TABLE_VARIANTS[table]:
      job = tpu_job.Job(tpu="${TPU}", zone="${ZONE}",
                        gcp_project="${PROJECT}", bucket="gs://${BUCKET}",
                        tpu_topology=tpu_topology, variant=variant,
                        model_size=model_size, experiment=experiment)
      lines.append("# %s, variant %s" % (job.exp.paper, variant))
      for argv in job.commands(_TABLE_STAGES.get(table, "all")):
        # The placeholders are for the shell to expand (in double quotes).
        lines.append(tpu_job.format_command(argv).replace("\\${", "${"))
  return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--table", choices=sorted(TABLE_EXPERIMENTS),
                      action="append", help="default: every table")
  parser.add_argument("--variant", choices=tpu_job.VARIANTS, action="append",
                      help="default: the variants each table reports")
  parser.add_argument("--model_size", default="base")
  parser.add_argument("--tpu_topology", default="2x2")
  args = parser.parse_args(argv)
  print("set -e")
  for table in args.table or TABLE_EXPERIMENTS:
    print("\n".join(table_commands(table, args.variant, args.model_size,
                                   args.tpu_topology)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
