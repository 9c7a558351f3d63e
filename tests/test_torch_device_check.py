# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""tools/check_torch_device.py: fused against eager on a device (here CPU).

The check passes every variant of the table on the CPU, fails the variants
whose fused kernel's output is off, and its command answers with its table
and exit status.
"""

import json

import pytest
import torch

import conftest
from workbench.pytorch import benchmark
from workbench.pytorch import device_check

pytestmark = pytest.mark.usefixtures("one_thread")
LABELS = [label for label, _ in benchmark.variants()]


def test_every_variant_passes_on_cpu():
  results = device_check.check(torch.device("cpu"))
  assert [r.label for r in results] == LABELS
  failed = [(r.label, r.error, r.logits, r.gradients) for r in results
            if not r.passed]
  assert not failed


def test_a_kernel_off_by_a_little_fails(monkeypatch):
  kernel = torch.nn.functional.scaled_dot_product_attention
  monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                      lambda *args, **kwargs: kernel(*args, **kwargs) * 1.01)
  results = device_check.check(torch.device("cpu"), ["V", "D+V"])
  assert [r.label for r in results] == ["V", "D+V"]
  assert not any(r.passed for r in results)
  assert all(r.logits > device_check.TOLERANCE for r in results)


def test_documented_command_runs_without_a_gpu(tmp_path):
  """docs/pytorch_benchmark.md's command, GPUs hidden: every variant."""
  proc = conftest.run_documented_on_cpu(
      "docs/pytorch_benchmark.md", "check_torch_device.py",
      "runs/torch_device_check", tmp_path)
  assert "on CPU" in proc.stdout
  with open(tmp_path / "torch_device_check.json") as f:
    assert [r["label"] for r in json.load(f)] == LABELS
  with open(tmp_path / "torch_device_check.md") as f:
    assert f.read() == proc.stdout


def test_command_prints_its_table_and_writes_json(tmp_path, capsys):
  status = conftest.run_tool("check_torch_device.py", [
      "--device", "cpu", "--variants", "FD,R+V", "--output_dir",
      str(tmp_path)])
  text = capsys.readouterr().out
  assert status == 0, text
  rows = [line for line in text.splitlines() if line.startswith("|")][2:]
  assert [row.split("|")[1].strip() for row in rows] == ["FD", "R+V"]
  assert all(row.rstrip(" |").endswith("pass") for row in rows)
  with open(tmp_path / "torch_device_check.json") as f:
    assert [r["passed"] for r in json.load(f)] == [True, True]
  assert conftest.run_tool("check_torch_device.py",
                           ["--device", "cpu", "--variants", "nope"]) == 2
