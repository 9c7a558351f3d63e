# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Code shared by the scripts in tools/ and by the tests.

The scripts in tools/ parse their arguments and call into these modules; no
script imports another. Importing a module here imports `mtf_synthesizer`
(TensorFlow, mesh, gin: a few seconds) and has no other side effect. The
scripts import the installed package: run `make install` after an edit, or
put the working tree first with `PYTHONPATH=.`.
"""
