# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The test suite's start-up file for the Python processes it starts.

conftest.py puts this folder on the PYTHONPATH of every process the tests
start. In the stock `t5_mesh_transformer` only, once its
`--module_import=t5_tasks` has loaded, the suite's speed switches apply:
`MTF_SYNTH_GRAPH_FILES=0` (`graph_files.py`: no graph files beside the
checkpoints) and `MTF_SYNTH_GRAPH_OPTIMIZER=0` (`graph_optimizer.py`: no
TF graph optimizer in the sessions). They make the suite's many tiny runs
faster and are not part of the package. In any process, and only when a
test sets `MTF_SYNTH_TEST_TPU_BUILD` or `MTF_SYNTH_TEST_DEV_DIR`: the
stand-in TPU build of TensorFlow and device folder (`tpu_build.py`).
Otherwise nothing is imported.
"""

import importlib.abc
import importlib.machinery
import os
import sys
import types

# How the stock CLI appears in sys.argv[0] (as _mtf_synthesizer_hooks.py).
_STOCK_CLI = ("t5_mesh_transformer", "mesh_transformer_main.py")
_TRIGGER = "t5_tasks"


def _install() -> None:
  # pylint: disable=g-import-not-at-top
  import graph_files
  import graph_optimizer
  graph_files.install_from_env()
  graph_optimizer.install_from_env()


class _ThenInstall(importlib.abc.Loader):
  """Loads a module with its own loader, then applies the switches."""

  def __init__(self, loader: importlib.abc.Loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module: types.ModuleType) -> None:
    self._loader.exec_module(module)
    _install()

  def __getattr__(self, name):
    return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
  """Waits for the stock CLI's import of t5_tasks."""

  def find_spec(self, fullname, path=None, target=None):
    del target
    if fullname != _TRIGGER or not sys.argv or (
        os.path.basename(sys.argv[0]) not in _STOCK_CLI):
      return None
    sys.meta_path.remove(self)
    spec = importlib.machinery.PathFinder.find_spec(fullname, path)
    if spec is not None and spec.loader is not None:
      spec.loader = _ThenInstall(spec.loader)
    return spec


sys.meta_path.insert(0, _Finder())

# Any process: the stand-in TPU build of TensorFlow, when a test asks for it
# (tpu_build.py).
if os.environ.get("MTF_SYNTH_TEST_TPU_BUILD") or os.environ.get(
    "MTF_SYNTH_TEST_DEV_DIR"):
  import tpu_build  # pylint: disable=g-import-not-at-top
  tpu_build.install_from_env()
