# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Entry points of the installed commands that start without TensorFlow.

Importing `mtf_synthesizer` imports no TensorFlow (its mesh layers come with
mesh-tensorflow: `mtf_synthesizer/__init__.py`), so these commands answer
at once: `mtf-synthesizer-from-t5` never needs mesh, and
`mtf-synthesizer-export-hf` answers --help and argument errors at once,
then calls `mtf_synthesizer.import_layers()` to export. setup.py points the
console scripts here; `tools/` and `python -m mtf_synthesizer.commands.<name>`
run the same `main`s.
"""

import importlib
from typing import Optional


def _main(module: str) -> Optional[int]:
  """Runs `<module>.main()`."""
  return importlib.import_module(module).main()


def export_hf() -> Optional[int]:
  """mtf-synthesizer-export-hf (`mtf_synthesizer.commands.export_hf`)."""
  return _main("mtf_synthesizer.commands.export_hf")


def from_t5() -> Optional[int]:
  """mtf-synthesizer-from-t5 (`mtf_synthesizer.commands.from_t5`)."""
  return _main("mtf_synthesizer.commands.from_t5")
