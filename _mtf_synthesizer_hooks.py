# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Import-time fixes that the stock `t5_mesh_transformer` script needs.

This module is imported at interpreter start-up by `mtf_synthesizer.pth`
(installed next to it in site-packages), so that it acts before the stock CLI
imports mesh_tensorflow, which happens before `--module_import` is read. It
only registers an import hook: nothing heavy is imported until the modules it
guards are.

Why at start-up: `t5_mesh_transformer` imports `t5.models` and with it
mesh_tensorflow when its own module is imported, before it parses
`--module_import`; with TF 2.15 and mesh 0.1.21 that import fails without
the first fix below, and without torch `t5.models` fails without the second.
Nothing the package does after `--module_import` could act in time, so the
stock CLI needs this hook; every change it makes is listed in
docs/architecture.md ("What the package changes in other libraries").

Two fixes, each applied only when needed, and two entry points:
  * TensorFlow >= 2.13 moved `register_tensor_conversion_function` out of
    `tensorflow.python.framework.ops`; mesh_tensorflow 0.1.21 still calls it
    there. Before the first import of `mesh_tensorflow` the function is put
    back where mesh looks for it.
  * `t5.models` imports `t5.models.hf_model`, which imports torch (not a
    dependency of t5). When torch is not installed, and always in the stock
    CLI (which never uses it; importing torch and transformers there costs
    seconds and hundreds of MB per run), that one module is replaced by a
    stand-in whose `HfPyTorchModel` explains what is missing.
  * In the stock CLI only (the program is `t5_mesh_transformer`), once
    `--module_import=mtf_synthesizer` has imported the package,
    `mtf_synthesizer.stock_cli.entry.run()` checks the CLI's flags and applies
    `MTF_SYNTH_CPU_DEVICES`. Importing the package anywhere else has no
    side effect.
  * When `mesh_tensorflow.transformer` is imported after the package
    (`import mtf_synthesizer, t5.models`), `mtf_synthesizer.import_layers()`
    registers the package's mesh layers, as importing the package after
    mesh does (`mtf_synthesizer/__init__.py`). The package itself imports
    no TensorFlow, so that its PyTorch model (`mtf_synthesizer.hf_model`)
    loads without it.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

_HF_MODULE = "t5.models.hf_model"
_PACKAGE = "mtf_synthesizer"
# The module whose import brings the package's mesh layers, whichever of
# the two comes first (`mtf_synthesizer/__init__.py` reads it here).
LAYERS_WITH_MODULE = "mesh_tensorflow.transformer"
# How the stock CLI appears in sys.argv[0]: the console script, or t5's
# module run with `python -m`.
_STOCK_CLI = ("t5_mesh_transformer", "mesh_transformer_main.py")


def is_stock_cli() -> bool:
  """True when this interpreter runs the stock `t5_mesh_transformer`."""
  return bool(sys.argv) and os.path.basename(sys.argv[0]) in _STOCK_CLI


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
            "t5.models.HfPyTorchModel is not available here: it needs torch "
            "(pip install torch; this package installs from a checkout "
            "with pip install --no-deps ., since t5's declared dependencies "
            "would pull tensorflow-datasets beside tfds-nightly), and the "
            "stock CLI never loads it. mtf_synthesizer uses the Mesh TensorFlow model "
            "(MtfModel); tools/export_hf.py takes a trained model to "
            "PyTorch.")
    module.HfPyTorchModel = HfPyTorchModel


class _ThenRun(importlib.abc.Loader):
  """Loads a module with its own loader, then calls `after()`."""

  def __init__(self, loader: importlib.abc.Loader, after):
    self._loader = loader
    self._after = after

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module: types.ModuleType) -> None:
    self._loader.exec_module(module)
    self._after()

  def __getattr__(self, name):
    # get_data, get_source, get_resource_reader, ...: the real loader's.
    return getattr(self._loader, name)


def _run_cli_entry() -> None:
  importlib.import_module(_PACKAGE + ".stock_cli.entry").run()


def _import_package_layers() -> None:
  """The package's mesh layers, once mesh is imported after the package."""
  package = sys.modules.get(_PACKAGE)
  if package is not None and hasattr(package, "import_layers"):
    package.import_layers()


def _wrapped_spec(fullname, path, after):
  """`fullname`'s own spec, its loader calling `after()` once it has run."""
  spec = importlib.machinery.PathFinder.find_spec(fullname, path)
  if spec is not None and spec.loader is not None:
    spec.loader = _ThenRun(spec.loader, after)
  return spec


class _Finder(importlib.abc.MetaPathFinder):
  """Applies the fixes when the guarded modules are first imported."""

  def __init__(self):
    self._patched_tf = False

  def find_spec(self, fullname, path=None, target=None):
    del target
    if fullname == "mesh_tensorflow" and not self._patched_tf:
      self._patched_tf = True
      patch_tensorflow_for_mesh()
    elif fullname == _HF_MODULE and (
        is_stock_cli() or importlib.util.find_spec("torch") is None):
      return importlib.machinery.ModuleSpec(fullname, _HfModelStandIn())
    elif fullname == _PACKAGE and is_stock_cli():
      return _wrapped_spec(fullname, path, _run_cli_entry)
    elif fullname == LAYERS_WITH_MODULE and _PACKAGE in sys.modules:
      return _wrapped_spec(fullname, path, _import_package_layers)
    return None


def install() -> None:
  """Registers the import hook once per interpreter."""
  if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())


install()
