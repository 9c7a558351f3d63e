# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A Cloud TPU job's preflight, in a process that ends before the job runs.

A TPU VM's TensorFlow loads libtpu when it is imported and holds the TPU
(`/tmp/libtpu_lockfile`) until the importing process exits; a second
process then gets "The TPU is already in use by process with pid ...". So
`mtf-synthesizer-tpu-job`, which stays alive while its `t5_mesh_transformer`
commands run, never imports TensorFlow: `run()` starts this module as a
short-lived process of the same interpreter, which

  1. runs the TPU preflight (`stock_cli/tpu_checks.py`), printing its
     warnings;
  2. checks that the TFDS data folder holds every dataset the job's
     mixtures read (`jobs/datasets.py`), since seqio would otherwise
     download and build a missing one on the TPU VM;

and exits with status 2 and one line naming what to do, or 0; only then
does the tool start its first command. Run alone:

  python -m mtf_synthesizer.jobs.preflight --tpu=local --tpu_topology=v3-8 \
    --data_dir=gs://my-bucket/tensorflow_datasets \
    --mixture=synth_glue_super_glue_proportional
"""

import argparse
import subprocess
import sys
from typing import List, Optional, Sequence

from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import datasets

PROGRAM = "mtf-synthesizer-tpu-job"


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  """Parses the preflight's command line."""
  p = argparse.ArgumentParser(prog="python -m mtf_synthesizer.jobs.preflight",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--tpu", default=None, help="the TPU the job drives")
  p.add_argument("--tpu_topology", default=None)
  p.add_argument("--tpu_version", default=None,
                 help="the generation of a chip-grid topology")
  p.add_argument("--logical_cores_per_chip", type=int, default=None)
  p.add_argument("--data_dir", default=None,
                 help="the jobs' --t5_tfds_data_dir; no data check without")
  p.add_argument("--mixture", action="append", default=[],
                 help="a mixture or task the job reads (repeatable)")
  return p.parse_args(argv)


def data_error(data_dir: str, mixtures: Sequence[str]) -> Optional[str]:
  """The line that says which datasets data_dir lacks, if any.

  Args:
    data_dir: the TFDS data folder.
    mixtures: the mixtures and tasks the job reads.

  Returns:
    The error line, or None when every dataset is prepared.
  """
  names = datasets.tfds_names(mixtures)
  lacking = datasets.missing(names, data_dir)
  if not lacking:
    return None
  return (
      "the data folder %s lacks %s, which %s read%s; seqio would download "
      "and build %s on the TPU VM. Prepare %s once, from any machine that "
      "can write there: %s" % (
          data_dir, ", ".join(lacking), ", ".join(mixtures),
          "s" if len(mixtures) == 1 else "",
          "it" if len(lacking) == 1 else "them",
          "it" if len(lacking) == 1 else "them",
          " ".join(commands.shell_quote(a) for a in
                   datasets.prepare_argv(mixtures, data_dir))))


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the checks; returns 0, or 2 after printing one line."""
  # pylint: disable=g-import-not-at-top
  from mtf_synthesizer.stock_cli import tpu_checks
  args = parse_args(argv)
  try:
    warnings = tpu_checks.check(
        args.tpu, args.tpu_topology, tpu_version=args.tpu_version,
        logical_cores_per_chip=args.logical_cores_per_chip)
  except tpu_checks.TpuPreflightError as e:
    print("%s: error: %s" % (PROGRAM, e), file=sys.stderr, flush=True)
    return 2
  for warning in warnings:
    print("%s: warning: %s" % (PROGRAM, warning), file=sys.stderr,
          flush=True)
  if args.data_dir and args.mixture:
    error = data_error(args.data_dir, args.mixture)
    if error:
      print("%s: error: %s" % (PROGRAM, error), file=sys.stderr, flush=True)
      return 2
  return 0


def argv_of(*, tpu: str, tpu_topology: str, tpu_version: str,
            logical_cores_per_chip: Optional[int], data_dir: str,
            mixtures: Sequence[str]) -> List[str]:
  """The preflight's command line for a job.

  Args:
    tpu: `--tpu`.
    tpu_topology: the slice's topology.
    tpu_version: the generation of a chip grid.
    logical_cores_per_chip: mesh's flag, if the commands pass it.
    data_dir: `--t5_tfds_data_dir`.
    mixtures: the mixtures and tasks the commands read.

  Returns:
    The argv, this interpreter first.
  """
  argv = [sys.executable, "-m", "mtf_synthesizer.jobs.preflight",
          "--tpu=%s" % tpu, "--tpu_topology=%s" % tpu_topology,
          "--tpu_version=%s" % tpu_version, "--data_dir=%s" % data_dir]
  if logical_cores_per_chip is not None:
    argv.append("--logical_cores_per_chip=%d" % logical_cores_per_chip)
  return argv + ["--mixture=%s" % name for name in mixtures]


def run(argv: Sequence[str]) -> int:
  """Runs the preflight in its own process and waits for it to end.

  Args:
    argv: from `argv_of`.

  Returns:
    Its exit status (its lines go to this process's stderr).
  """
  return subprocess.run(list(argv), check=False).returncode


if __name__ == "__main__":
  sys.exit(main())
