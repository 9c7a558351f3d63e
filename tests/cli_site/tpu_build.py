# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A stand-in for a TPU VM's TensorFlow, for the processes the tests start.

A TPU build of TensorFlow runs `FindAndInitializeTpuLibrary()` as a static
initializer when it is imported: it takes `/tmp/libtpu_lockfile` and keeps
it until the process exits, and a second process that imports TensorFlow
meanwhile logs "The TPU is already in use by process with pid ..." and
gets no TPU. PyPI's TensorFlow does neither, so nothing on a CPU machine
would show a tool that holds the TPU its commands need.

With the environment variable `MTF_SYNTH_TEST_TPU_BUILD=<lock file>`
(`sitecustomize.py` here installs it in every process), importing
TensorFlow also
  * takes an exclusive lock on that file, held until the process exits,
    or, when another process holds it, prints TensorFlow's message and
    exits the process with status 3 (the run would die later, inside
    TPUEstimator);
  * registers the TPU system ops' kernels as a TPU build does, as far as
    `tensorflow.python.framework.kernels` tells them.
`MTF_SYNTH_TEST_DEV_DIR=<folder>` makes the preflight read that folder as
the machine's device files (`accel*` there: a TPU VM).
"""

import fcntl
import importlib.abc
import importlib.machinery
import os
import sys
import types

ENV_VAR = "MTF_SYNTH_TEST_TPU_BUILD"
DEV_DIR_ENV = "MTF_SYNTH_TEST_DEV_DIR"
_held = []


def _take_the_tpu(lock_path: str) -> None:
  lock = open(lock_path, "a+")  # pylint: disable=consider-using-with
  try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    lock.seek(0)
    print("The TPU is already in use by process with pid %s. Not "
          "attempting to load libtpu.so in this process." %
          (lock.read().strip() or "?"), file=sys.stderr, flush=True)
    os._exit(3)  # pylint: disable=protected-access
  lock.truncate(0)
  lock.write(str(os.getpid()))
  lock.flush()
  _held.append(lock)


def _register_tpu_kernels() -> None:
  # pylint: disable=g-import-not-at-top
  from tensorflow.python.framework import kernels
  original = kernels.get_registered_kernels_for_op

  class _Registered:
    kernel = ("TPU",)

  def registered(name):
    if name in ("ConfigureDistributedTPU", "TPUCompile", "TPUExecute"):
      return _Registered()
    return original(name)
  kernels.get_registered_kernels_for_op = registered


class _ThenTakeTheTpu(importlib.abc.Loader):
  """Loads tensorflow with its own loader, then acts as a TPU build."""

  def __init__(self, loader, lock_path):
    self._loader = loader
    self._lock_path = lock_path

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module: types.ModuleType) -> None:
    _take_the_tpu(self._lock_path)
    self._loader.exec_module(module)
    _register_tpu_kernels()

  def __getattr__(self, name):
    return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
  """Waits for the first import of tensorflow."""

  def __init__(self, lock_path):
    self._lock_path = lock_path

  def find_spec(self, fullname, path=None, target=None):
    del target
    if fullname != "tensorflow":
      return None
    sys.meta_path.remove(self)
    spec = importlib.machinery.PathFinder.find_spec(fullname, path)
    if spec is not None and spec.loader is not None:
      spec.loader = _ThenTakeTheTpu(spec.loader, self._lock_path)
    return spec


class _DevDir(importlib.abc.MetaPathFinder):
  """Points the preflight's device folder at DEV_DIR_ENV's."""

  _MODULE = "mtf_synthesizer.stock_cli.tpu_checks"

  def find_spec(self, fullname, path=None, target=None):
    del target
    if fullname != self._MODULE:
      return None
    sys.meta_path.remove(self)
    spec = importlib.machinery.PathFinder.find_spec(fullname, path)
    if spec is not None and spec.loader is not None:
      spec.loader = _ThenSetDevDir(spec.loader)
    return spec


class _ThenSetDevDir(importlib.abc.Loader):

  def __init__(self, loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module: types.ModuleType) -> None:
    self._loader.exec_module(module)
    original = module.on_tpu_vm
    module.on_tpu_vm = lambda dev_dir="/dev": original(
        os.environ[DEV_DIR_ENV])

  def __getattr__(self, name):
    return getattr(self._loader, name)


def install_from_env() -> None:
  """Installs what the environment asks for (see the module doc)."""
  if os.environ.get(ENV_VAR):
    sys.meta_path.insert(0, _Finder(os.environ[ENV_VAR]))
  if os.environ.get(DEV_DIR_ENV):
    sys.meta_path.insert(0, _DevDir())
