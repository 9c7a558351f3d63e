# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Stock CLI: one training step on mesh model:2,batch:2 = on one device.

Runs tools/cli_mesh_check.py for one variant (R+V: a mixture, with a
position-indexed table and the dot product, both split by heads) on 4
logical CPU devices (MTF_SYNTH_CPU_DEVICES); the tool checks all ten
(`python tools/cli_mesh_check.py`), about 2-3 minutes per variant on 2
cores.
"""

import importlib.util
import os

import numpy as np
import pytest

from mtf_synthesizer import cpu_devices

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SPEC = importlib.util.spec_from_file_location(
    "cli_mesh_check", os.path.join(_ROOT, "tools", "cli_mesh_check.py"))
cli_mesh_check = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(cli_mesh_check)


def test_random_vanilla_same_loss_on_model2_batch2_as_one_device(tmp_path):
  losses = cli_mesh_check.check_variant("random_vanilla", str(tmp_path))
  one = losses["one_device"]
  mesh = losses[cli_mesh_check.MESH_SHAPE]
  assert np.isfinite(one) and one > 0
  np.testing.assert_allclose(mesh, one, rtol=1e-4)


def test_the_mesh_slices_are_on_real_devices(tmp_path):
  # Soft placement is off: with 2 devices for 4 slices the run must fail
  # (so the passing run above used 4 real logical devices).
  command = cli_mesh_check.train_command(
      str(tmp_path / "two"), "random", 1, cli_mesh_check.MESH_SHAPE)
  with pytest.raises(RuntimeError, match="available devices are"):
    cli_mesh_check._run(command, num_devices=2)  # pylint: disable=protected-access


@pytest.mark.parametrize("value", ["four", "0", "-2"])
def test_bad_device_count_is_a_clear_error(monkeypatch, value):
  monkeypatch.setenv(cpu_devices.ENV_VAR, value)
  with pytest.raises(ValueError, match="MTF_SYNTH_CPU_DEVICES"):
    cpu_devices.install_from_env()
