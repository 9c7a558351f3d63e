# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What runs when the stock `t5_mesh_transformer` imports the package.

The stock CLI parses its flags, then imports every `--module_import`, then
parses gin. The start-up hook (`_mtf_synthesizer_hooks.py`, loaded by
`mtf_synthesizer.pth` in every interpreter of the environment) calls `run()`
right after `mtf_synthesizer` is imported, and only when the program is the
stock CLI; importing the package anywhere else has no side effect. `run()`:

  * checks `--model_dir` and every `--gin_file=synthesizer/...` and says
    clearly what is wrong before TensorFlow or gin would (`checks.py`);
  * applies `MTF_SYNTH_CPU_DEVICES=N`: N logical CPU devices for the CLI's
    sessions (`cpu_devices.py`).
"""

from mtf_synthesizer.stock_cli import checks as cli_checks
from mtf_synthesizer.stock_cli import cpu_devices


def run() -> None:
  """Applies the stock CLI's checks and settings (see the module doc)."""
  cli_checks.check_cli_flags()
  cpu_devices.install_from_env()
