# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""`pytest -k <function name>` selects the tests named by a variant's label.

Tests parametrized by the attention table are named by its labels ("FR+V");
conftest adds each one's synthesizing functions and name as keywords, so
`-k factorized_random` selects every test of a variant that has FR.
"""

import subprocess
import sys

import conftest
from mtf_synthesizer import attentions

MODULE = "tests/test_torch_fused.py"


def _selected(keyword):
  proc = subprocess.run(
      [sys.executable, "-m", "pytest", "--collect-only", "-q",
       "-p", "no:cacheprovider", "-k", keyword, MODULE],
      cwd=conftest.REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  return [line for line in proc.stdout.splitlines() if "::" in line]


def test_a_function_name_selects_every_variant_that_has_it():
  name = "factorized_random"
  selected = _selected(name)
  labels = [v.label for v in attentions.VARIANTS if name in v.components]
  assert labels == ["FR", "FR+V"]
  for label in labels:
    assert any("[%s]" % label in line or "[%s-" % label in line or
               "-%s]" % label in line for line in selected), label
  assert not any("[V]" in line or "-V]" in line or "[D+V" in line or
                 "-D+V]" in line for line in selected)
