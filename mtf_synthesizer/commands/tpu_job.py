# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Runs the Synthesizer paper's experiments as Cloud TPU batch jobs.

Composes `t5_mesh_transformer` command lines (the stock T5 CLI, with
`--module_import=mtf_synthesizer --module_import=t5_tasks`) for the stages
of one experiment, and runs them one after the other on the TPU VM it runs
on (`--tpu=local`, the default), streaming their output and stopping at the
first failure; a SIGTERM kills the command in progress and ends the tool
(status 143). The commands start the stock CLI installed beside the tool's
own interpreter, whatever PATH holds. Before the first, the Cloud TPU
preflight checks that this TensorFlow and machine can drive the TPU
(`mtf_synthesizer/stock_cli/tpu_checks.py`) and that the data folder holds
every dataset the commands read (`mtf_synthesizer/jobs/datasets.py`), in a
process of its own that ends before any command starts, so that the tool
never holds the TPU its commands need (`mtf_synthesizer/jobs/preflight.py`);
it exits with status 2 and one line when they cannot. With --dry_run it
only prints the commands, with the gcloud command that creates the TPU VM,
the command that prepares the data and the TensorBoard command; nothing
touches the network.

Each experiment is a gin file in gin/experiments/ (task,
lengths, steps, learning rate, model type), used after the T5 model file of
the chosen size and before the attention file: a Synthesizer variant
(--variant, gin/synthesizer/<name>.gin; the default, random) or one of the
paper's baselines (--baseline, gin/baselines/<name>.gin;
mtf_synthesizer/attentions.py). A non-causal baseline (linformer) is refused
for the decoder-only language model (lm1b); in an encoder-decoder it
replaces the encoder's self-attention only.

Stages:
  pretrain  train from scratch on the experiment's training mixture (C4 span
            corruption for c4_glue_superglue; the task itself otherwise).
  finetune  (c4_glue_superglue only) continue from the pretrained checkpoint
            on GLUE + SuperGLUE (the gin route; see
            mtf_synthesizer/jobs/cloud_tpu.py for why not --mode).
  eval      perplexity of the pretrained model on its validation split;
            decode-and-score of the finetuned (or trained) model.
  all       the three in order.

The commands are composed by `mtf_synthesizer.jobs.cloud_tpu`. Installed as
`mtf-synthesizer-tpu-job` (also `python -m mtf_synthesizer.commands.tpu_job`;
in a checkout, `python tools/tpu_job.py` runs the working tree's).

Example (the paper's Table 4-6 setting, on a v3-8 TPU VM):
  mtf-synthesizer-tpu-job --dry_run --bucket=gs://my-bucket \
    --tpu_topology=v3-8 --variant=random_vanilla --model_size=base \
    --stage=all

Linformer in Table 7 (binds the paper's LinformerAttention.k = 32):
  mtf-synthesizer-tpu-job --dry_run --bucket=gs://my-bucket \
    --tpu_topology=v3-8 --baseline=linformer --experiment=ag_news --stage=all
"""

import argparse
import sys
from typing import Optional, Sequence

from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import cloud_tpu
from mtf_synthesizer.jobs import experiments
from mtf_synthesizer.jobs import mesh_defaults
from mtf_synthesizer.jobs import preflight
from mtf_synthesizer.stock_cli import tpu_checks


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  """Parses the command line."""
  p = argparse.ArgumentParser(
      prog="mtf-synthesizer-tpu-job",
      description=__doc__.split("\n\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--tpu", default=tpu_checks.LOCAL,
                 help="the TPU the stock CLI drives: 'local' (default), the "
                 "TPU of the TPU VM this runs on; the slice's name for a "
                 "multi-host slice (with MTF_SYNTH_MULTI_HOST=1; "
                 "docs/tpu.md)")
  p.add_argument("--zone", default=None,
                 help="e.g. europe-west4-a: the printed gcloud command's, "
                 "and --tpu_zone for a TPU name")
  p.add_argument("--gcp_project", default=None,
                 help="the printed gcloud command's, and the CLI's "
                 "--gcp_project for a TPU name")
  p.add_argument("--tpu_vm_name", default=None,
                 help="the TPU VM's name in the printed gcloud command "
                 "(default: synth-<accelerator type>)")
  p.add_argument("--bucket", required=True, help="gs://bucket[/prefix]")
  p.add_argument("--data_dir", default=None,
                 help="the TFDS data folder every command reads "
                 "(--t5_tfds_data_dir; default: <bucket>/tensorflow_datasets)")
  p.add_argument("--tpu_topology", default="v3-8",
                 help="'v3-8', 'v4-8', 'v3-32', or a chip grid such as "
                 "'2x2'")
  p.add_argument("--tpu_version", default="v3",
                 help="TPU generation for a chip-grid topology (gcloud)")
  attention = p.add_mutually_exclusive_group()
  attention.add_argument("--variant", default="random",
                         choices=attentions.VARIANT_NAMES,
                         help="a Synthesizer variant (gin/synthesizer/)")
  attention.add_argument("--baseline", default=None,
                         choices=attentions.BASELINE_NAMES,
                         help="a baseline instead of a variant "
                         "(gin/baselines/)")
  p.add_argument("--model_size", default="base",
                 choices=mesh_defaults.MODEL_SIZES)
  p.add_argument("--t5_version", default="1.0",
                 choices=sorted(experiments.MODEL_GIN))
  p.add_argument("--experiment", default="c4_glue_superglue",
                 choices=sorted(experiments.EXPERIMENTS))
  p.add_argument("--stage", default="all",
                 choices=experiments.STAGES + ("all",))
  p.add_argument("--model_parallelism", type=int, default=None,
                 help="default: mesh_defaults.model_parallelism(size)")
  p.add_argument("--pretrain_steps", type=int, default=None,
                 help="steps of the pretrain stage (default: the paper's)")
  p.add_argument("--finetune_steps", type=int,
                 default=experiments.DEFAULT_FINETUNE_STEPS)
  p.add_argument("--gin_param", action="append", default=[],
                 help="extra gin binding for every command (repeatable)")
  p.add_argument("--dry_run", action="store_true",
                 help="print the commands, run nothing")
  return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Prints (--dry_run) or runs the commands; returns the exit status."""
  args = parse_args(argv)
  try:
    job = cloud_tpu.Job(
        tpu=args.tpu, zone=args.zone, gcp_project=args.gcp_project,
        tpu_vm_name=args.tpu_vm_name, bucket=args.bucket,
        tpu_topology=args.tpu_topology,
        variant=None if args.baseline else args.variant,
        baseline=args.baseline, model_size=args.model_size,
        experiment=args.experiment, t5_version=args.t5_version,
        model_parallelism=args.model_parallelism,
        pretrain_steps=args.pretrain_steps,
        finetune_steps=args.finetune_steps, tpu_version=args.tpu_version,
        extra_gin_params=args.gin_param, data_dir=args.data_dir)
  except ValueError as e:
    print("tpu_job: %s" % e, file=sys.stderr)
    return 2
  if args.dry_run:
    print(job.dry_run_text(args.stage))
    return 0
  # In a process of its own, which ends before the first command starts:
  # this one never imports TensorFlow (jobs/preflight.py says why).
  if preflight.run(job.preflight_argv(args.stage)):
    return 2
  return cloud_tpu.run_commands(job.commands(args.stage))


if __name__ == "__main__":
  sys.exit(main())
