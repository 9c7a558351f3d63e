# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The commands a user runs, installed with the package (setup.py).

  mtf-synthesizer-export-hf      `export_hf`: a trained model to a
                                 transformers directory (PyTorch)
  mtf-synthesizer-tpu-job        `tpu_job`: the paper's experiments as
                                 Cloud TPU jobs (`jobs.cloud_tpu`)
  mtf-synthesizer-convert-release-checkpoint
                                 `convert_release_checkpoint`: a checkpoint
                                 of the original release's layer to this
                                 package's names (`checkpoints.release`)

Each also runs as `python -m mtf_synthesizer.commands.<module>`; the
checkout's `tools/` scripts of the same names call them.
"""
