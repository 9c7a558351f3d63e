# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Runs the Synthesizer paper's experiments as Cloud TPU batch jobs.

Composes `t5_mesh_transformer` command lines (the stock T5 CLI, with
`--module_import=mtf_synthesizer --module_import=t5_tasks`) for the stages
of one experiment, and runs them one after the other, streaming their output
and stopping at the first failure; a SIGTERM kills the command in progress
and ends the tool (status 143). With --dry_run it only prints them, with
the gcloud command that creates the TPU and the TensorBoard command; nothing
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

The commands are composed by `mtf_synthesizer.jobs.cloud_tpu`. This is the
checkout's copy of the installed command `mtf-synthesizer-tpu-job`
(`mtf_synthesizer/commands/tpu_job.py`): it and the commands it runs use this
working tree's package.

Example (the paper's Table 4-6 setting):
  python tools/tpu_job.py --dry_run --tpu=synth-v3 --zone=europe-west4-a \
    --gcp_project=my-project --bucket=gs://my-bucket --tpu_topology=2x2 \
    --variant=random_vanilla --model_size=base --stage=all

Linformer in Table 7 (binds the paper's LinformerAttention.k = 32):
  python tools/tpu_job.py --dry_run --tpu=synth-v3 --zone=europe-west4-a \
    --gcp_project=my-project --bucket=gs://my-bucket --tpu_topology=2x2 \
    --baseline=linformer --experiment=ag_news --stage=all
"""
import os
import sys

# Run from the checkout: its packages first (workbench/checkout.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer.commands import tpu_job
from workbench import checkout

if __name__ == "__main__":
  checkout.use_for_subprocesses()
  sys.exit(tpu_job.main())
