# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Puts this checkout first on `sys.path`: each tool's `import _checkout`.

`python tools/<tool>.py` runs with `tools/` first on `sys.path`, so every
tool finds this module; importing it puts the checkout's root before
site-packages, and the tool then imports this working tree's
`mtf_synthesizer`, `t5_tasks` and `workbench`, not an installed copy (an edit
is live at once). It is the one place that knows where the checkout is
relative to the tools; `workbench/checkout.py` names the checkout (its root,
its commit) and passes it on to the processes a tool starts.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

sys.path[:] = [ROOT] + [p for p in sys.path if p and os.path.realpath(p)
                        != os.path.realpath(ROOT)]
