# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What the stock `t5_mesh_transformer` runs when it imports the package.

  * `entry`: `run()`, called by the start-up hook
    (`_mtf_synthesizer_hooks.py`) right after `--module_import=
    mtf_synthesizer`, in the stock CLI only;
  * `checks`: the CLI's flags and `--gin_file=synthesizer/...` checked
    before TensorFlow or gin would fail on them;
  * `tpu_checks`: the Cloud TPU preflight, with `--tpu` (also run by
    `mtf-synthesizer-tpu-job`);
  * `cpu_devices`: `MTF_SYNTH_CPU_DEVICES=N`, N logical CPU devices for
    the CLI's sessions (a mesh layout on one machine);
  * `settings`: named edits of the estimator's default session config;
  * `gin_path`: where the package's gin files are (gin's search path).

The user's own commands (export, Cloud TPU jobs, checkpoint conversion) are
`mtf_synthesizer.commands`.
"""
