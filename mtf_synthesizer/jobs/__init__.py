# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Running the stock `t5_mesh_transformer`: what a user's jobs are made of.

  * `commands`: stock-CLI command lines as data (local, Cloud TPU);
  * `runner`: runs a command, streams its output, stops it cleanly;
  * `progress`: one status line per run, parsed from the CLI's log;
  * `events`: the scalars and parameter count a run leaves behind;
  * `cloud_tpu`: the paper's experiments as Cloud TPU jobs
    (`mtf-synthesizer-tpu-job`);
  * `mesh_defaults`: mesh shapes and layouts for T5-sized models on TPUs.
"""
