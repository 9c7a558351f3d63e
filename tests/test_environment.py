# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The pinned environment (requirements.lock) keeps what makes it fast."""

from google.protobuf.internal import api_implementation


def test_protobuf_is_the_compiled_implementation():
  # TensorFlow builds, serializes and saves graphs through protobuf; its
  # pure-Python implementation doubles a tiny stock-CLI run's CPU time.
  assert api_implementation.Type() != "python"
