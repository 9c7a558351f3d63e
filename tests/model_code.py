# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch model's code, loaded as `transformers` loads an export's.

`load()` copies the modules of `mtf_synthesizer/hf_model/` but its
`__init__.py` (those an export writes beside its weights) into a package
of their own in a temporary folder and imports its modeling module: the
model then runs as `from_pretrained(..., trust_remote_code=True)` runs
it, without this package, mesh or TensorFlow. It imports only the
standard library, so the TF-free side scripts (run by
`conftest.pytorch_python`) use it too: they put their own folder, tests/,
first on `sys.path`.
"""

import importlib
import os
import shutil
import sys
import tempfile
import types

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_CODE_DIR = os.path.join(REPO, "mtf_synthesizer", "hf_model")
# The package name of the copy (one per process).
PACKAGE = "exported_model_code"


def load(module: str = "modeling") -> types.ModuleType:
  """A module of a copy of the model code (copied once).

  Args:
    module: the file's job: "modeling", "attention", "functions",
      "configuration", "loss", "checks".

  Returns:
    `<PACKAGE>.<module>_mtf_synthesizer` (the modeling module's
    `MtfSynthesizerConfig` is the configuration module's).
  """
  name = PACKAGE + ".%s_mtf_synthesizer" % module
  if name in sys.modules:
    return sys.modules[name]
  if PACKAGE in sys.modules:
    return importlib.import_module(name)
  root = tempfile.mkdtemp(prefix="model_code_")
  package = os.path.join(root, PACKAGE)
  os.makedirs(package)
  for file in sorted(os.listdir(MODEL_CODE_DIR)):
    if file.endswith(".py") and file != "__init__.py":
      shutil.copy(os.path.join(MODEL_CODE_DIR, file), package)
  open(os.path.join(package, "__init__.py"), "w").close()
  sys.path.insert(0, root)
  try:
    return importlib.import_module(name)
  finally:
    sys.path.remove(root)
