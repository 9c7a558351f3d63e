# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Runs the Synthesizer paper's experiments as Cloud TPU batch jobs.

  python tools/tpu_job.py --dry_run --bucket=gs://my-bucket \
    --tpu_topology=v3-8 --variant=random_vanilla --model_size=base --stage=all

The checkout's copy of the installed command `mtf-synthesizer-tpu-job`
(`mtf_synthesizer/commands/tpu_job.py`, which says more: the stages, the
experiments, the baselines); it and the stock-CLI commands it runs use this
working tree's package.
"""

import sys

import _checkout  # pylint: disable=unused-import  (the checkout first)
from mtf_synthesizer.commands import tpu_job
from workbench import checkout

if __name__ == "__main__":
  checkout.use_for_subprocesses()
  sys.exit(tpu_job.main())
