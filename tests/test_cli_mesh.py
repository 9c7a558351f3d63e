# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Stock CLI: one training step on mesh model:2,batch:2 = on one device.

Runs tools/cli_mesh_check.py for one variant (R+V: a mixture, with a
position-indexed table and the dot product, both split by heads); the tool
checks all ten (`python tools/cli_mesh_check.py`), which takes about a
minute per variant on 2 cores.
"""

import importlib.util
import os

import numpy as np

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
