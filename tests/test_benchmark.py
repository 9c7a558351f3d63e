# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Smoke test of tools/benchmark.py: the quick path at tiny shapes.

Checks that every variant appears in the JSON with sane fields. It makes no
claim about speed (no timing assertions).
"""

import json
import os
import subprocess
import sys

import pytest

from mtf_synthesizer.tools_lib import benchmarking

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "tools", "benchmark.py")


def test_quick_benchmark_writes_every_variant(tmp_path):
  out = str(tmp_path)
  # The script as users run it (conftest.py puts the working tree on
  # PYTHONPATH).
  assert subprocess.run([sys.executable, SCRIPT, "--quick", "--lengths", "",
                         "--no_enc_dec", "--no_plot", "--output_dir", out],
                        check=False).returncode == 0
  with open(os.path.join(out, "benchmark.json")) as f:
    report = json.load(f)
  assert report["matmul_peak_flops"] > 0
  (block,) = report["blocks"].values()
  names = [v.name for v in benchmarking.all_variants()
           if v.name not in benchmarking.ALIASES and
           v.name not in benchmarking.SKIPPED]
  assert sorted(block["results"]) == sorted(names)
  for name, entry in block["results"].items():
    if "error" in entry:
      # Only the release's layer may fail (it hard-codes 512 positions).
      assert entry["family"] == "release", (name, entry["error"])
      continue
    assert entry["step_s"] > 0 and entry["tokens_per_s"] > 0, name
    assert entry["speed_vs_v"] > 0, name
    # None when load noise exceeded the decoding time difference.
    assert (entry["decode_tokens_per_s"] is None or
            entry["decode_tokens_per_s"] > 0), name
    assert entry["params"] > 0 and entry["flops_per_step"] > 0, name
    assert entry["peak_step_bytes"] > 0 and entry["state_bytes"] > 0, name
    assert 0 < entry["mfu"] < 10, name
    assert entry["top_ops"], name
  assert block["results"]["V"]["time_ratio"] == 1.0
  # The vanilla layer has the most parameters in the attention, R none of
  # its q/k: a sanity check of the parameter count, not of speed.
  assert block["results"]["V"]["params"] == block["results"]["V(ours)"][
      "params"]
  with open(os.path.join(out, "benchmark.md")) as f:
    table = f.read()
  assert "| R+V |" in table and "## Targets" in table
