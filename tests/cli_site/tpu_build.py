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


class _Wrapped(importlib.abc.Loader):
  """A module's own loader, with something run before and after it."""

  def __init__(self, loader, before, after):
    self._loader = loader
    self._before = before
    self._after = after

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module: types.ModuleType) -> None:
    self._before()
    self._loader.exec_module(module)
    self._after(module)

  def __getattr__(self, name):
    return getattr(self._loader, name)


class _OnImport(importlib.abc.MetaPathFinder):
  """Wraps the first import of one module (see `_Wrapped`)."""

  def __init__(self, fullname, before=lambda: None,
               after=lambda module: None):
    self._fullname = fullname
    self._before = before
    self._after = after

  def find_spec(self, fullname, path=None, target=None):
    del target
    if fullname != self._fullname:
      return None
    sys.meta_path.remove(self)
    spec = importlib.machinery.PathFinder.find_spec(fullname, path)
    if spec is not None and spec.loader is not None:
      spec.loader = _Wrapped(spec.loader, self._before, self._after)
    return spec


def _read_dev_dir(module: types.ModuleType) -> None:
  """Points the preflight's device folder at DEV_DIR_ENV's."""
  original = module.on_tpu_vm
  module.on_tpu_vm = lambda dev_dir="/dev": original(os.environ[DEV_DIR_ENV])


def install_from_env() -> None:
  """Installs what the environment asks for (see the module doc)."""
  if os.environ.get(ENV_VAR):
    lock_path = os.environ[ENV_VAR]
    sys.meta_path.insert(0, _OnImport(
        "tensorflow", before=lambda: _take_the_tpu(lock_path),
        after=lambda module: _register_tpu_kernels()))
  if os.environ.get(DEV_DIR_ENV):
    sys.meta_path.insert(0, _OnImport("mtf_synthesizer.stock_cli.tpu_checks",
                                      after=_read_dev_dir))
