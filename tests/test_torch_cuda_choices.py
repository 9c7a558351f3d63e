# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""tools/compare_cuda_choices.py: each pair computes one function (here CPU).

The documented command runs without a GPU and finds each alternative equal
to the model's way; an alternative off by a little is reported as off; the
pairs take turns in alternating order.
"""

import json

import pytest
import torch

import conftest
from workbench import torch_cuda_choices

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = torch_cuda_choices.Dims(batch=2, length=32, d_model=64, num_heads=4,
                               d_kv=16, fd_factors=(4, 8))


def test_documented_command_runs_without_a_gpu(tmp_path):
  proc = conftest.run_documented_on_cpu(
      "docs/pytorch_benchmark.md", "compare_cuda_choices.py --device cpu",
      "runs/cuda_choices", tmp_path)
  with open(tmp_path / "cuda_choices.json") as f:
    results = json.load(f)["results"]
  assert [(r["choice"], r["case"]) for r in results] == [
      ("b2", "D"), ("b2", "D+V"), ("rms_norm", "[2, 32, 64] float32"),
      ("fd_flex", "FD core, 2 x 32, factors (4, 8)")]
  for r in results:
    if r["choice"] == "fd_flex" and r["error"]:
      # torch has no FlexAttention backward on a CPU.
      assert "backward on CPU" in r["error"]
      continue
    assert r["error"] is None
    assert r["difference"] < 1e-5, r
    assert r["model_ms"] > 0 and r["alternative_ms"] > 0
  with open(tmp_path / "cuda_choices.md") as f:
    assert f.read() == proc.stdout


def test_the_composed_norm_is_the_models_bf16_norm():
  """The comparison's first way is the norm a bf16 model computes."""
  modeling = torch_cuda_choices.bench_models.load_model_code()
  norm = modeling.MtfSynthesizerRMSNorm(16, 1e-6).to(torch.bfloat16)
  torch.nn.init.normal_(norm.weight, 1.0, 0.1)
  x = torch.randn(3, 5, 16, dtype=torch.bfloat16)
  torch.testing.assert_close(
      modeling.T5LayerNorm.forward(norm, x), norm(x),
      rtol=0, atol=0)


def test_an_alternative_off_by_a_little_is_seen(monkeypatch):
  rms_norm = torch.nn.functional.rms_norm
  monkeypatch.setattr(torch.nn.functional, "rms_norm",
                      lambda *args, **kwargs: rms_norm(*args, **kwargs) * 1.01)
  result = torch_cuda_choices.compare_rms_norm(
      TINY, torch.device("cpu"), rounds=1, repeats=1)
  assert result.difference > 5e-3


def test_the_fd_core_matches_the_model_layout():
  """The model's route of the comparison builds FD's logits as the model."""
  functions = torch_cuda_choices.bench_models.load_model_code("functions")
  torch.manual_seed(0)
  # pylint: disable-next=protected-access
  config = torch_cuda_choices._config(TINY, ("factorized_dense",))
  fd = functions.MtfSynthesizerFactorizedDense(config)
  for p in fd.parameters():
    torch.nn.init.normal_(p)
  hidden = torch.randn(TINY.batch, 20, TINY.d_model)
  positions = functions.Positions(start=0, length=20, memory_length=20)
  logits = fd(hidden, None, positions)
  rows = fd.hidden_rows(hidden)
  fa = (torch.bmm(rows, fd.wa) + fd.ba[:, None]).view(
      TINY.num_heads, TINY.batch, 20, -1).transpose(0, 1)
  fb = (torch.bmm(rows, fd.wb) + fd.bb[:, None]).view(
      TINY.num_heads, TINY.batch, 20, -1).transpose(0, 1)
  # pylint: disable-next=protected-access
  built = torch_cuda_choices._fd_bias(fa, fb, TINY.fd_factors[0], 20)
  # One sum in another order (baddbmm against bmm and an add).
  torch.testing.assert_close(built, logits, rtol=0,
                             atol=1e-5 * float(logits.abs().max()))


def test_pairs_take_turns_in_alternating_order():
  calls = []
  torch_cuda_choices.time_pair(
      {"model": lambda: calls.append("m"),
       "alternative": lambda: calls.append("a")},
      torch.device("cpu"), rounds=3, repeats=2)
  assert "".join(calls) == "mmaa" + "mmaa" + "aamm" + "mmaa"
