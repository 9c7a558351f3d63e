# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""transformers' own common tests, as a package its relative imports resolve in.

`make install` unpacks `tests/test_modeling_common.py` and
`tests/test_configuration_common.py` of transformers' pinned source
distribution (requirements-transformers-tests.lock), unmodified, into the
environment's `transformers-tests/` folder; this package adds that folder to
its path. The distribution holds only transformers' top-level test files, so
the three modules those two import relatively are this package's own:
`generation/test_utils.py`, `exporters/test_export.py` and
`utils/test_configuration_utils.py`.
"""

import os
import sys

UPSTREAM_DIR = os.path.join(sys.prefix, "transformers-tests")
UPSTREAM_FILES = ("test_modeling_common.py", "test_configuration_common.py")

_missing = [f for f in UPSTREAM_FILES
            if not os.path.isfile(os.path.join(UPSTREAM_DIR, f))]
if _missing:
  raise ImportError(
      "transformers' common tests (%s) are not in %s: run `make install` "
      "(it unpacks them from the source distribution that "
      "requirements-transformers-tests.lock pins)" % (
          ", ".join(_missing), UPSTREAM_DIR))
__path__.append(UPSTREAM_DIR)  # pylint: disable=undefined-variable
