# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The export mixin that transformers' `ModelTesterMixin` derives from.

transformers' own export tests are all `@slow` (exporting to ONNX and
ExecuTorch); the Synthesizer's ONNX export is tested in
tests/test_onnx.py. This mixin holds no test.
"""


class ExportTesterMixin:
  """No export test here: see the module's docstring."""
