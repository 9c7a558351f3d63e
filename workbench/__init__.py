# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The workbench: what measures, draws and studies the product.

Never installed: the scripts in `tools/` and the tests run it from the
checkout, with the checkout's `mtf_synthesizer` (see `checkout`). A script
parses its arguments and calls one of these modules; no script imports
another. Importing a module here has no side effect.
"""
