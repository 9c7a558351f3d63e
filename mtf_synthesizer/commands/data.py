# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Lists, checks and prepares the TFDS datasets that T5 mixtures read.

Every `t5_tasks` task reads a TFDS dataset at a pinned version (the
registry says which: `mtf_synthesizer/jobs/datasets.py`). Given mixtures
(or a paper experiment) and a TFDS data folder (a job's
`--t5_tfds_data_dir`), this prints each dataset with whether the folder
holds it; with --prepare it builds the missing ones there with TFDS's own
`download_and_prepare`, and prints what it made (the folder and the
examples per split). C4 (`c4/en:3.1.0`) is built with Apache Beam: about
7 TB of Common Crawl downloads and about 335 CPU-days (t5's README); this
command does not build it, it prints the `tfds build` command that runs it
on Cloud Dataflow. Exit status: 0 when every dataset is prepared, 1 when
one is still missing, 2 for bad arguments.

Installed as `mtf-synthesizer-data` (also `python -m
mtf_synthesizer.commands.data`). Downloads happen only with --prepare.

Example (the paper's GLUE + SuperGLUE finetuning data, in a bucket):
  mtf-synthesizer-data --data_dir=gs://my-bucket/tensorflow_datasets \
    --mixture=synth_glue_super_glue_proportional --prepare
"""

import argparse
import sys
from typing import List, Optional, Sequence

from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import datasets
from mtf_synthesizer.jobs import experiments

PROGRAM = "mtf-synthesizer-data"


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  """Parses the command line."""
  p = argparse.ArgumentParser(
      prog=PROGRAM, description=__doc__.split("\n\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog=__doc__.split("\n\n", 1)[1])
  p.add_argument("--data_dir", required=True,
                 help="the TFDS data folder (a local path or gs://)")
  p.add_argument("--mixture", action="append", default=[],
                 help="a t5_tasks mixture or task (repeatable)")
  p.add_argument("--experiment", action="append", default=[],
                 choices=sorted(experiments.EXPERIMENTS),
                 help="a paper experiment: the mixtures of all its stages "
                 "(repeatable)")
  p.add_argument("--prepare", action="store_true",
                 help="build the missing datasets (downloads)")
  args = p.parse_args(argv)
  if not args.mixture and not args.experiment:
    p.error("give --mixture or --experiment")
  return args


def mixtures_of(args: argparse.Namespace) -> List[str]:
  """The mixtures named, and those of the experiments named, each once."""
  names = list(args.mixture)
  for name in args.experiment:
    names.extend(experiments.EXPERIMENTS[name].mixtures)
  return list(dict.fromkeys(names))


def _made(name: str, data_dir: str) -> str:
  """What TFDS holds of a prepared dataset: its folder and split sizes."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  builder = tfds.builder(name, data_dir=data_dir)
  splits = ", ".join("%s %d" % (split, info.num_examples)
                     for split, info in sorted(builder.info.splits.items()))
  return "%s (%s)" % (builder.data_path, splits)


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Lists, checks and (--prepare) builds; returns the exit status."""
  args = parse_args(argv)
  try:
    found = datasets.datasets(mixtures_of(args))
  except ValueError as e:
    print("%s: error: %s" % (PROGRAM, e), file=sys.stderr)
    return 2
  lacking = 0
  for dataset in found:
    if datasets.is_prepared(dataset.name, args.data_dir):
      print("prepared  %s: %s" % (
          dataset.name, datasets.data_path(dataset.name, args.data_dir)),
            flush=True)
      continue
    if args.prepare and not dataset.beam:
      import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
      print("preparing %s in %s" % (dataset.name, args.data_dir), flush=True)
      tfds.builder(dataset.name, data_dir=args.data_dir).download_and_prepare()
      print("made      %s: %s" % (dataset.name,
                                   _made(dataset.name, args.data_dir)),
            flush=True)
      continue
    lacking += 1
    how = " ".join(commands.shell_quote(a) for a in
                   datasets.tfds_build_argv(dataset, args.data_dir))
    if dataset.beam:
      print("missing   %s: %s; prepare it with (PROJECT, REGION set; "
            "beam_requirements.txt holding tensorflow-datasets[c4]): %s" %
            (dataset.name, datasets.BEAM_NOTE,
             how.replace("\\${", "${")), flush=True)
    else:
      print("missing   %s: prepare it with --prepare, or: %s" %
            (dataset.name, how), flush=True)
  return 1 if lacking else 0


if __name__ == "__main__":
  sys.exit(main())
