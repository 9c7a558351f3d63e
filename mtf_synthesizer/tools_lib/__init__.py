# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Code shared by the scripts in tools/ and by the tests.

The scripts in tools/ parse their arguments and call into these modules; no
script imports another. Importing this package is cheap and has no side
effects: each module imports what it needs when it is imported itself.
"""
