# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Synthesizing functions from outside the package, loaded and carried.

A function defined in a project of its own is a module named
`<something>_mtf_synthesizer.py` that imports the model code relatively
and declares itself (`register_function` in the model's configuration;
docs/architecture.md, "How to add a synthesizing function").
`load_extension(path)` imports it as a module of the model code, and
`write_extensions(directory, names)` copies the modules a model uses beside
its code, listed in that folder's `extensions_mtf_synthesizer.py`, so that
the folder loads with `trust_remote_code=True` without this package.

Only the standard library is imported at first: the export, which needs
no torch, writes the extensions too (`load_extension` imports the model
code, and with it torch).
"""

import importlib
import importlib.util
import os
import shutil
import sys
import types
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

# The package of the model code that extensions join by default.
MODEL_PACKAGE = "mtf_synthesizer.hf_model"
# The file of a saved model's code that imports its extensions.
EXTENSIONS_FILE = "extensions_mtf_synthesizer.py"
# The source file of each function loaded by `load_extension`, by name.
EXTENSION_FILES: Dict[str, str] = {}


def load_extension(path: str,
                   package: str = MODEL_PACKAGE) -> types.ModuleType:
  """Imports a synthesizing function's module as a module of the model code.

  The file's relative imports (`from .functions_mtf_synthesizer import
  MtfSynthesizerFunction`) then name the package's modules, and defining
  its class registers it: configurations and models built afterwards may
  name the function. The functions whose classes it defines are
  remembered with the file (`EXTENSION_FILES`), which `write_extensions`
  copies.

  Args:
    path: the module's file, named `<something>_mtf_synthesizer.py` by
      convention.
    package: the model code's package: this package's
      (`mtf_synthesizer.hf_model`), or a copy of it loaded by path.

  Returns:
    The module (the one imported before, on a second call).
  """
  functions = importlib.import_module(package + ".functions_mtf_synthesizer")
  stem = os.path.splitext(os.path.basename(path))[0]
  name = "%s.%s" % (package, stem)
  module = sys.modules.get(name)
  if module is None:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
      spec.loader.exec_module(module)
    except BaseException:
      del sys.modules[name]
      raise
  for function, cls in functions.FUNCTIONS.items():
    if cls.__module__ == name:  # a class the module defines
      EXTENSION_FILES[function] = os.path.abspath(path)
  return module


def model_extension_files(model: Any) -> Dict[str, str]:
  """The source file of each function from outside the package a model has.

  Read from the model's own code: the module of each synthesizing
  function's class that is not the model code's functions module (for a
  model loaded with `trust_remote_code`, the copy beside its code).

  Args:
    model: a PyTorch Synthesizer.

  Returns:
    Function name -> its module's file.
  """
  package = type(model).__module__.rpartition(".")[0]
  functions = importlib.import_module(package + ".functions_mtf_synthesizer")
  found = {}
  for name, cls in functions.FUNCTIONS.items():
    module = sys.modules.get(cls.__module__)
    if module is not functions and getattr(module, "__file__", None):
      found[name] = os.path.abspath(module.__file__)
  return found


def write_extensions(directory: str, names: Sequence[str],
                     sources: Optional[Mapping[str, str]] = None
                    ) -> Tuple[str, ...]:
  """Copies the modules of the extensions among `names` beside a model.

  Writes `directory`'s extensions_mtf_synthesizer.py with a relative import
  of each, so that the configuration imports them where the model loads.
  Nothing is written when `names` has none.

  Args:
    directory: a saved or exported model's folder (its model code there).
    names: the synthesizing functions the model uses.
    sources: function name -> its module's file (`model_extension_files`);
      default those `load_extension` loaded (`EXTENSION_FILES`).

  Returns:
    The modules written, file names without ".py".
  """
  sources = EXTENSION_FILES if sources is None else sources
  files = sorted({sources[n] for n in names if n in sources})
  modules = tuple(os.path.splitext(os.path.basename(f))[0] for f in files)
  if not files:
    return modules
  for path in files:
    shutil.copyfile(path, os.path.join(directory, os.path.basename(path)))
  lines = ['"""This model\'s synthesizing functions from outside the '
           'package."""', ""]
  lines += ["from .%s import *  # pylint: disable=wildcard-import" % m
            for m in modules]
  lines += ["", "EXTENSIONS = %r" % (modules,), ""]
  with open(os.path.join(directory, EXTENSIONS_FILE), "w") as f:
    f.write("\n".join(lines))
  return modules
