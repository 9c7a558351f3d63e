# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Entry points of the installed commands that start without TensorFlow.

Importing `mtf_synthesizer` imports its mesh layers, and with them
TensorFlow (seconds, and CUDA warnings), to register their gin names. These
commands import the package without them: `mtf-synthesizer-from-t5` never
needs mesh, and `mtf-synthesizer-export-hf` answers --help and argument
errors at once, then calls `mtf_synthesizer.import_layers()` to export.
setup.py points the console scripts here; `tools/` and
`python -m mtf_synthesizer.commands.<name>` run the same `main`s (with the
layers imported).
"""

import importlib
from typing import Optional

# Read by `mtf_synthesizer/__init__.py` when it is first imported.
LAYERS_ON_IMPORT = True


def _main(module: str) -> Optional[int]:
  """Runs `<module>.main()`, importing the package without its layers."""
  global LAYERS_ON_IMPORT
  LAYERS_ON_IMPORT = False
  return importlib.import_module(module).main()


def export_hf() -> Optional[int]:
  """mtf-synthesizer-export-hf (`mtf_synthesizer.commands.export_hf`)."""
  return _main("mtf_synthesizer.commands.export_hf")


def from_t5() -> Optional[int]:
  """mtf-synthesizer-from-t5 (`mtf_synthesizer.commands.from_t5`)."""
  return _main("mtf_synthesizer.commands.from_t5")
