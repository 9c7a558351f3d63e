# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Where the package's gin files are, for gin's search path and the checks.

The files live in the repository's top-level `gin/` folder; `setup.py`
ships them inside the installed package as `mtf_synthesizer/gin/`. A source
checkout on `PYTHONPATH` finds them at the top, an installed copy inside.
"""

import os
from typing import List

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INSTALLED = os.path.join(_PACKAGE_DIR, "gin")
_SOURCE = os.path.join(os.path.dirname(_PACKAGE_DIR), "gin")

GIN_DIR = _INSTALLED if os.path.isdir(_INSTALLED) else _SOURCE
VARIANT_FOLDER = "synthesizer"


def gin_files(folder: str) -> List[str]:
  """The gin files of a folder under GIN_DIR, without shared includes.

  Args:
    folder: e.g. "synthesizer" or "experiments".

  Returns:
    Sorted stems (file names without `.gin`), leaving out the files whose
    name starts with an underscore (included by the others).
  """
  return sorted(f[:-len(".gin")]
                for f in os.listdir(os.path.join(GIN_DIR, folder))
                if f.endswith(".gin") and not f.startswith("_"))
