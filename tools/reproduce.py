# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""A small-scale reproduction of the paper's comparisons, offline on CPU.

Trains tiny models of every variant and baseline through the stock
`t5_mesh_transformer`, with several seeds, on four offline tasks, and
evaluates each on its validation split (tasks, models and the paper's
orderings: `workbench/reproduction.py`):

  lm       pydocs_lm: byte-level language model, decoder only (Table 2's
           LM1B in miniature); validation loss in nats per byte.
  spans    pydocs_span_corruption: T5's objective on an encoder-decoder
           (Table 4 in miniature); validation loss per target byte.
  listops  listops: LRA's ListOps with an encoder-only classifier
           (Table 7's setting); validation accuracy (%).
  presence key_presence: is the letter of the first segment among the
           letters of the second? (the sentence-pair tasks of Tables 5-6 in
           miniature); encoder-only, validation accuracy (%).

Not in the default set (`--tasks recall`): key_value_recall, the two-step
form (find the key, read its value).

Every run has its own model directory, `<output_dir>/<task>/<model>/seed<n>`,
with its logs. Finished runs are recorded in `results.json` as they end, so
an interrupted study resumes where it stopped, in as many sittings as it
takes (Ctrl-C or SIGTERM kills the runs in progress, which are not
recorded and start over); the file also records the commit of the code,
and a study is only resumed by the same commit (`--restart` starts over).
`--results` puts that record elsewhere: the study of docs/reproduction.md
keeps it in the repo, docs/reproduction_results.json, so that it resumes
on any machine.
`results.md` holds the tables: mean ± standard deviation over seeds, and
which of the paper's orderings hold.

  python tools/reproduce.py --output_dir runs/reproduce           # everything
  python tools/reproduce.py --tasks presence --models V,R,DyConv --seeds 1
"""

import argparse
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from workbench import checkout
from workbench import reproduction
from workbench import study


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the study; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output_dir", default="runs/reproduce")
  parser.add_argument("--tasks", default=",".join(reproduction.DEFAULT_TASKS))
  parser.add_argument("--models", default=None,
                      help="variant and baseline names or labels (default: "
                      "all)")
  parser.add_argument("--seeds", default=",".join(
      map(str, reproduction.DEFAULT_SEEDS)))
  parser.add_argument("--jobs", type=int, default=1,
                      help="runs at the same time")
  parser.add_argument("--results", default=None,
                      help="the study's record of finished runs (default: "
                      "<output_dir>/results.json); docs/reproduction.md's "
                      "study keeps it at docs/reproduction_results.json")
  parser.add_argument("--restart", action="store_true",
                      help="forget finished runs and start over")
  parser.add_argument("--report_only", action="store_true",
                      help="only write results.md from results.json (any "
                      "version of this tool; the tables name the commit "
                      "that ran the study)")
  args = parser.parse_args(argv)
  checkout.use_for_subprocesses()
  try:
    tasks = [reproduction.TASKS[t] for t in args.tasks.split(",")]
  except KeyError as e:
    parser.error("unknown task %s; choose from %s" % (
        e, ", ".join(reproduction.TASKS)))
  try:
    models = ([reproduction.model(m) for m in args.models.split(",")]
              if args.models else list(reproduction.MODELS))
  except ValueError as e:
    parser.error(str(e))
  seeds = [int(s) for s in args.seeds.split(",")]

  return study.run(args.output_dir, tasks, models, seeds, jobs=args.jobs,
                   results=args.results, restart=args.restart,
                   report_only=args.report_only)


if __name__ == "__main__":
  sys.exit(main())
