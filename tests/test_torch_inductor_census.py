# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The inductor census counts what inductor wrote (a small function here:
compiling a model's step takes minutes, `tools/inductor_census.py`)."""

import pytest
import torch

from workbench.pytorch import inductor_census
from workbench.pytorch import models as bench_models

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_census_counts_kernels_calls_and_bytes():
  """relu(x W) * 2 summed, and backward: one fused kernel at least, the
  matmuls as external calls (forward and the gradients), bytes moved."""
  x = torch.randn(8, 16)
  w = torch.randn(16, 32, requires_grad=True)
  fn = torch.compile(lambda: (torch.relu(x @ w) * 2).sum())
  result = inductor_census.count("f", lambda: fn().backward())
  assert result.graphs == 2  # forward and backward
  assert result.kernels >= 2
  assert result.extern_calls >= 2  # x W, and x^T dy for W's gradient
  assert result.ir_nodes >= result.kernels
  # At least the output of the matmul, read by the fused relu (float32).
  assert result.bytes_accessed >= 8 * 32 * 4
  assert w.grad is not None


def test_the_table_gives_ratios_to_v():
  census = inductor_census.Census
  text = inductor_census.markdown(
      [census("V", 2, 10, 4, 20, 1000), census("D+V", 2, 15, 5, 30, 1500)],
      bench_models.PRESETS["cpu"], torch.device("cpu"))
  assert "| D+V | 2 (1.00x) | 15 (1.50x) | 5 (1.25x) | 30 (1.50x) | " \
         "1500 (1.50x) |" in text
