# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The commands a user runs, installed with the package (setup.py).

  mtf-synthesizer-export-hf      `export_hf`: a trained model to a
                                 transformers directory (PyTorch)
  mtf-synthesizer-from-t5        `from_t5`: a Synthesizer around a
                                 transformers T5 checkpoint's weights
  mtf-synthesizer-tpu-job        `tpu_job`: the paper's experiments as
                                 Cloud TPU jobs (`jobs.cloud_tpu`)
  mtf-synthesizer-convert-release-checkpoint
                                 `convert_release_checkpoint`: a checkpoint
                                 of the original release's layer to this
                                 package's names (`checkpoints.release`)

export_hf and from_t5 write their output directory whole or not at all
(`whole_dir`).

Each also runs as `python -m mtf_synthesizer.commands.<module>`; the
checkout's `tools/` scripts of the same names call them. The export and
from_t5 start through `_mtf_synthesizer_commands` (their console scripts
and tools/ scripts); the package imports no TensorFlow until mesh is
imported: --help and argument errors answer at once, and from_t5 never
imports it.
"""
