# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Stock CLI: one training step on mesh model:2,batch:2 = on one device.

Runs the check of tools/cli_mesh_check.py (`workbench.mesh_check`) for one
variant (R+V: a mixture, with a position-indexed table and the dot product,
both split by heads) on 4 logical CPU devices (MTF_SYNTH_CPU_DEVICES); the
tool checks all ten (`python tools/cli_mesh_check.py`), about 2-3 minutes
per variant on 2 cores. The checkpoint the mesh run writes is read without
TensorFlow (`checkpoints/tf_format.py`) and compared with TensorFlow's
reading and with the one-device run's variables.
"""

import os

import numpy as np
import pytest

from mtf_synthesizer.checkpoints import tf_format
from mtf_synthesizer.stock_cli import cpu_devices
import test_tf_checkpoint_reader
from workbench import mesh_check

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow


def test_random_vanilla_same_loss_on_model2_batch2_as_one_device(tmp_path):
  losses = mesh_check.check_variant("random_vanilla", str(tmp_path))
  one = losses["one_device"]
  mesh = losses[mesh_check.MESH_SHAPE]
  assert np.isfinite(one) and one > 0
  np.testing.assert_allclose(mesh, one, rtol=1e-4)
  # mesh saves each variable whole on the mesh too (its slices are not
  # saved): the same names and shapes as one device, in the same two
  # shards, and the reader without TensorFlow reads them as TensorFlow does.
  root = tmp_path / "random_vanilla"
  mesh_prefix = tf_format.latest_checkpoint(str(root / "mesh"))
  one_prefix = tf_format.latest_checkpoint(str(root / "one"))
  assert os.path.basename(mesh_prefix) == "model.ckpt-2"
  mesh_reader = tf_format.CheckpointReader(mesh_prefix)
  one_reader = tf_format.CheckpointReader(one_prefix)
  assert mesh_reader.num_shards == one_reader.num_shards == 2
  names = mesh_reader.variable_names()
  assert names == one_reader.variable_names()
  assert [mesh_reader.shape(n) for n in names] == [
      one_reader.shape(n) for n in names]
  test_tf_checkpoint_reader.assert_reads_as_tensorflow(mesh_prefix)


def test_the_mesh_slices_are_on_real_devices(tmp_path):
  # Soft placement is off: with 2 devices for 4 slices the run must fail
  # (so the passing run above used 4 real logical devices).
  command = mesh_check.train_command(
      str(tmp_path / "two"), "random", 1, mesh_check.MESH_SHAPE,
      num_devices=2)
  with pytest.raises(RuntimeError, match="available devices are"):
    mesh_check.final_loss(command)


@pytest.mark.parametrize("value", ["four", "0", "-2"])
def test_bad_device_count_is_a_clear_error(monkeypatch, value):
  monkeypatch.setenv(cpu_devices.ENV_VAR, value)
  with pytest.raises(ValueError, match="MTF_SYNTH_CPU_DEVICES"):
    cpu_devices.install_from_env()
