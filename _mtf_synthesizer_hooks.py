# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Import-time fixes that the stock `t5_mesh_transformer` script needs.

This module is imported at interpreter start-up by `mtf_synthesizer.pth`
(installed next to it in site-packages), so that it acts before the stock CLI
imports mesh_tensorflow, which happens before `--module_import` is read. It
only registers an import hook: nothing heavy is imported until the modules it
guards are.

Two fixes, each applied only when needed:
  * TensorFlow >= 2.13 moved `register_tensor_conversion_function` out of
    `tensorflow.python.framework.ops`; mesh_tensorflow 0.1.21 still calls it
    there. Before the first import of `mesh_tensorflow` the function is put
    back where mesh looks for it.
  * `t5.models` imports `t5.models.hf_model`, which imports torch (not a
    dependency of t5). When torch is not installed, that one module is
    replaced by a stand-in whose `HfPyTorchModel` explains what is missing.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

_HF_MODULE = "t5.models.hf_model"


def patch_tensorflow_for_mesh() -> None:
  """Restores `ops.register_tensor_conversion_function` on TF >= 2.13."""
  from tensorflow.python.framework import ops  # pylint: disable=g-import-not-at-top
  if not hasattr(ops, "register_tensor_conversion_function"):
    from tensorflow.python.framework import tensor_conversion_registry  # pylint: disable=g-import-not-at-top
    ops.register_tensor_conversion_function = (
        tensor_conversion_registry.register_tensor_conversion_function)


class _HfModelStandIn(importlib.abc.Loader):
  """Creates `t5.models.hf_model` without torch."""

  def create_module(self, spec):
    return None

  def exec_module(self, module: types.ModuleType) -> None:
    class HfPyTorchModel:  # pylint: disable=invalid-name
      def __init__(self, *args, **kwargs):
        del args, kwargs
        raise ImportError(
            "t5.models.HfPyTorchModel needs torch, which is not installed. "
            "mtf_synthesizer uses the Mesh TensorFlow model (MtfModel); "
            "install torch yourself if you need the Hugging Face model.")
    module.HfPyTorchModel = HfPyTorchModel


class _Finder(importlib.abc.MetaPathFinder):
  """Applies the fixes when the guarded modules are first imported."""

  def __init__(self):
    self._patched_tf = False

  def find_spec(self, fullname, path=None, target=None):
    del path, target
    if fullname == "mesh_tensorflow" and not self._patched_tf:
      self._patched_tf = True
      patch_tensorflow_for_mesh()
    elif (fullname == _HF_MODULE and
          importlib.util.find_spec("torch") is None):
      return importlib.machinery.ModuleSpec(fullname, _HfModelStandIn())
    return None


def install() -> None:
  """Registers the import hook once per interpreter."""
  if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())


install()
