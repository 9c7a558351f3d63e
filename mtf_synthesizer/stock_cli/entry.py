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
  * with `--tpu`, runs the Cloud TPU preflight (`tpu_checks.py`);
  * applies `MTF_SYNTH_CPU_DEVICES=N`: N logical CPU devices for the CLI's
    sessions (`cpu_devices.py`).

A failed check ends the program with status 2 and one line on stderr,
before any graph is built.
"""

import sys

from mtf_synthesizer.stock_cli import checks as cli_checks
from mtf_synthesizer.stock_cli import cpu_devices
from mtf_synthesizer.stock_cli import tpu_checks

PROGRAM = "t5_mesh_transformer"


def check_tpu_flags() -> None:
  """The TPU preflight on the stock CLI's parsed flags, if a TPU is asked."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flag_values = flags.FLAGS
  if not flag_values.is_parsed() or "tpu" not in flag_values:
    return
  gin_params = []
  if "gin_param" in flag_values:
    gin_params = flag_values.gin_param or []
  topology = tpu_checks.gin_topology(gin_params)
  if topology is None and "use_model_api" in flag_values and (
      flag_values.use_model_api):
    topology = flag_values.tpu_topology  # the Model API's flag
  logical_cores_per_chip = None
  if "logical_cores_per_chip" in flag_values:
    logical_cores_per_chip = flag_values.logical_cores_per_chip
  for warning in tpu_checks.check(
      flag_values.tpu, topology,
      logical_cores_per_chip=logical_cores_per_chip):
    print("%s: warning: %s" % (PROGRAM, warning), file=sys.stderr,
          flush=True)


def run() -> None:
  """Applies the stock CLI's checks and settings (see the module doc)."""
  try:
    cli_checks.check_cli_flags()
    check_tpu_flags()
  except cli_checks.CliError as e:
    print("%s: error: %s" % (PROGRAM, e), file=sys.stderr, flush=True)
    raise SystemExit(2) from None
  cpu_devices.install_from_env()
