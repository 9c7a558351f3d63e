# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Smoke test of tools/benchmark_jax.py at tiny dims, one round.

Runs the tool as users run it (the JAX environment's Python as its
worker) and checks that the report has every variant and the three
frameworks, with positive figures and ratios, the machine facts and the
markdown table. It makes no claim about speed (no timing assertions).
Skipped where the JAX environment (.venv-jax) is missing.
"""

import json
import os
import subprocess
import sys

import pytest

from workbench import jax_bench_worker
from workbench import jax_benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tools", "benchmark_jax.py")

needs_jax_env = pytest.mark.skipif(
    not os.path.exists(jax_benchmark.JAX_PYTHON),
    reason="no JAX environment at .venv-jax (docs/jax.md makes it)")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  out = tmp_path_factory.mktemp("jax_bench")
  result = subprocess.run(
      [sys.executable, SCRIPT, "--tiny", "--rounds", "1", "--steps", "1",
       "--output_dir", str(out)], capture_output=True, text=True,
      check=False, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(out / "jax_benchmark.json") as f:
    report = json.load(f)
  return report, (out / "jax_benchmark.md").read_text(), result.stdout


@needs_jax_env
def test_report_has_every_variant_and_framework(tiny_run):
  report, _, _ = tiny_run
  assert [r["label"] for r in report["results"]] == list(
      jax_benchmark.VARIANTS)
  for r in report["results"]:
    for framework in jax_benchmark.FRAMEWORKS:
      assert r["step_s"][framework] > 0, (r["label"], framework)
      assert len(r["rounds_s"][framework]) == 1, (r["label"], framework)
      assert r["params"][framework] > 0, (r["label"], framework)
    assert r["flax_vs_mesh"] > 0 and r["flax_vs_pytorch"] > 0
    # The same model in PyTorch and Flax (mesh adds positions and an
    # untied softmax).
    assert r["params"]["PyTorch"] == r["params"]["Flax"], r["label"]
  target = report["target"]
  assert target["limit"] == jax_benchmark.TARGET
  assert target["met"] == (target["ratio"] <= target["limit"])


@needs_jax_env
def test_report_states_the_machine_and_the_threads(tiny_run):
  report, _, _ = tiny_run
  assert report["threads"] == 1 and len(report["cpus"]) == 1
  assert "--xla_cpu_multi_thread_eigen=false" in report["xla_flags"]
  assert report["cpu"] and report["date"] and report["command"]
  assert {"tensorflow", "mesh_tensorflow", "torch", "jax"} <= set(
      report["versions"])
  assert set(report["optimizers"]) == set(jax_benchmark.FRAMEWORKS)


@needs_jax_env
def test_markdown_table_has_a_row_per_variant(tiny_run):
  report, text, stdout = tiny_run
  assert text == stdout
  assert text == jax_benchmark.markdown(report)
  header = [line for line in text.splitlines() if line.startswith("| variant")]
  assert len(header) == 1
  for framework in jax_benchmark.FRAMEWORKS:
    assert framework in header[0]
  rows = {line.split("|")[1].strip() for line in text.splitlines()
          if line.startswith("| ") and not line.startswith("| variant")}
  assert rows == set(jax_benchmark.VARIANTS)
  assert "Flax V / min(mesh V, PyTorch V)" in text


def test_unknown_variant_is_refused():
  with pytest.raises(ValueError, match="unknown variants"):
    jax_benchmark.run(jax_benchmark.TINY, jax_benchmark.Settings(),
                      variants=["V", "nope"])


def test_xla_flags_pin_eigen_and_keep_the_environments():
  assert jax_bench_worker.xla_flags(1) == (
      "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
  assert jax_bench_worker.xla_flags(2, "--foo").startswith("--foo ")
  assert "=true" in jax_bench_worker.xla_flags(2)


def test_pinned_cpus_are_allowed_ones():
  cpus = jax_bench_worker.pinned_cpus(1)
  assert len(cpus) == 1
  if hasattr(os, "sched_getaffinity"):
    assert set(cpus) <= os.sched_getaffinity(0)
  with pytest.raises(ValueError):
    jax_bench_worker.pinned_cpus(10**6)
