# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Several logical CPU devices for the stock CLI, to try mesh layouts on CPU.

The stock `t5_mesh_transformer` builds its estimator with no session config
on CPU, and gin cannot give it one, so its session has one CPU device. With
the environment variable `MTF_SYNTH_CPU_DEVICES=N` (N > 1), the stock CLI's
`--module_import=mtf_synthesizer` (through `stock_cli/entry.py`; importing the
package elsewhere does not) makes the estimator's
default session config ask for N CPU devices, with soft placement off so
that an op placed on a missing device fails instead of moving silently.
Then give mesh the devices:

  MTF_SYNTH_CPU_DEVICES=4 t5_mesh_transformer --module_import=mtf_synthesizer \\
    ... --gin_param="utils.run.mesh_shape = 'model:2,batch:2'" \\
    --gin_param="utils.run.mesh_devices = ['/cpu:0', '/cpu:1', '/cpu:2', '/cpu:3']"

Only for CPU experiments: on TPU mesh's own session config applies.
"""

import os

from mtf_synthesizer.stock_cli import settings as cli_settings

ENV_VAR = "MTF_SYNTH_CPU_DEVICES"


def install_from_env() -> int:
  """Applies `MTF_SYNTH_CPU_DEVICES`, if set; returns the device count.

  Returns:
    The number of CPU devices the estimator's sessions will have (1 when the
    variable is unset).

  Raises:
    ValueError: when the variable is not a positive integer.
  """
  value = os.environ.get(ENV_VAR, "").strip() or "1"
  try:
    num_devices = int(value)
  except ValueError:
    num_devices = 0
  if num_devices < 1:
    raise ValueError("%s must be a positive integer, got %r." % (ENV_VAR,
                                                                 value))

  def with_devices(config):
    config.device_count["CPU"] = num_devices
    config.allow_soft_placement = False

  cli_settings.set_session_edit(ENV_VAR,
                                with_devices if num_devices > 1 else None)
  return num_devices
