# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Smoke test of tools/benchmark.py: the quick path at tiny shapes.

Checks that every variant and baseline appears in the JSON with sane fields
(or says why it did not run), that the memory guard skips a model with its
analytic size, and that the targets evaluate met and missed correctly. It
makes no claim about speed (no timing assertions).
"""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from mtf_synthesizer import attentions
from workbench import benchmark_blocks
from workbench import benchmark_memory
from workbench import benchmark_report
from workbench import benchmarking

# mesh's SelfAttention, the reference ("V (mesh)"); "V" is the dot product
# inside SynthesizerAttention.
V = benchmarking.REFERENCE

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "tools", "benchmark.py")
GIB = 2 ** 30
QUICK_SHAPE = benchmarking.ModelShape(d_model=64, num_heads=2, d_kv=32,
                                      d_ff=128, num_layers=1)


def _variant(name):
  return {v.name: v for v in benchmarking.all_variants()}[name]


@pytest.mark.slow  # runs the script, building every model: not in test-fast
def test_quick_benchmark_writes_every_variant(tmp_path):
  out = str(tmp_path)
  # The script as users run it (conftest.py puts the working tree on
  # PYTHONPATH).
  assert subprocess.run([sys.executable, SCRIPT, "--quick", "--lengths", "",
                         "--no_enc_dec", "--no_encoder", "--no_plot",
                         "--output_dir", out], check=False).returncode == 0
  with open(os.path.join(out, "benchmark.json")) as f:
    report = json.load(f)
  assert report["matmul_peak_flops"] > 0
  (block,) = report["blocks"].values()
  names = [v.name for v in benchmarking.all_variants()
           if v.name not in benchmarking.ALIASES and
           v.name not in benchmarking.SKIPPED]
  assert sorted(block["results"]) == sorted(names)
  assert {b.label for b in attentions.BASELINES} <= set(names)
  # Linformer cannot be causal: not built in the LM, and says why.
  linformer = block["results"]["Linformer"]
  assert linformer["skip_kind"] == "not causal", linformer
  assert "not causal" in linformer["skipped"]
  for name, entry in block["results"].items():
    if name == "Linformer":
      continue
    if "error" in entry:
      # Only the release's layer may fail (it hard-codes 512 positions).
      assert entry["family"] == "release", (name, entry["error"])
      continue
    assert "skipped" not in entry, (name, entry["skipped"])
    assert entry["step_s"] > 0 and entry["tokens_per_s"] > 0, name
    assert entry["speed_vs_v"] > 0, name
    # None when load noise exceeded the decoding time difference.
    assert (entry["decode_tokens_per_s"] is None or
            entry["decode_tokens_per_s"] > 0), name
    assert entry["params"] > 0 and entry["flops_per_step"] > 0, name
    assert entry["peak_step_bytes"] > 0 and entry["state_bytes"] > 0, name
    assert 0 < entry["mfu"] < 10, name
    assert entry["top_ops"], name
    assert entry["memory_estimate"]["largest_bytes"] > 0, name
  # The baselines that decode do (the causal ones: the convolutions, Local).
  for baseline in attentions.BASELINES:
    if baseline.causal:
      assert block["results"][baseline.label]["decodes"], baseline.label
  assert block["results"][V]["time_ratio"] == 1.0
  # Mesh's layer has the most parameters in the attention, R none of
  # its q/k: a sanity check of the parameter count, not of speed.
  assert block["results"][V]["params"] == block["results"]["V"][
      "params"]
  with open(os.path.join(out, "benchmark.md")) as f:
    table = f.read()
  assert "| R+V |" in table and "## Targets" in table
  assert "| LightConv |" in table and "| Linformer | not run: " in table
  assert "slowest models" in table


@pytest.mark.slow  # builds a model per name
def test_baselines_that_cannot_be_causal_run_in_the_encoder_only_model():
  names = [V] + [b.label for b in attentions.BASELINES if not b.causal]
  block = benchmark_blocks.Block(
      "encoder-only 16x2", dataclasses.replace(QUICK_SHAPE, causal=False),
      benchmarking.RunShape(16, 2), names, rounds=1, steps=1)
  results = benchmark_blocks.run_block(
      block, 1e10, benchmark_blocks.Log(quiet=True))["results"]
  for name in names:
    assert "skipped" not in results[name] and "error" not in results[name], (
        name, results[name])
    assert results[name]["step_s"] > 0, name


def test_memory_estimate_is_the_analytic_size():
  shape = benchmarking.ModelShape()
  run = benchmarking.RunShape(8192, 1)
  v = benchmark_memory.estimate_memory(_variant(V), shape, run)
  # V's attention logits: [batch 1, heads 8, 8192, 8192] float32.
  assert v.largest_bytes == 4 * 8 * 8192 * 8192 == 2 * GIB
  assert "[batch 1, heads 8, 8192, 8192] float32" in v.largest
  # R's tables are state ([heads, N, N] per layer, 2 layers).
  r = benchmark_memory.estimate_memory(_variant("R"), shape, run)
  assert r.state_bytes == 2 * 4 * 8 * 8192 * 8192
  # FD (its factors' outer product) holds fewer logits-sized tensors than
  # V; the convolutions none.
  fd = benchmark_memory.estimate_memory(_variant("FD"), shape, run)
  assert fd.step_bytes < v.step_bytes
  conv = benchmark_memory.estimate_memory(_variant("LightConv"), shape, run)
  assert conv.largest_bytes < v.largest_bytes / 10
  linformer = benchmark_memory.estimate_memory(_variant("Linformer"), shape,
                                               run)
  assert linformer.largest_bytes < v.largest_bytes / 10


def test_guard_reports_a_model_that_does_not_fit_with_its_size():
  shape = benchmarking.ModelShape()
  run = benchmarking.RunShape(8192, 1)
  estimate = benchmark_memory.estimate_memory(_variant(V), shape, run)
  reason = benchmark_memory.memory_skip_reason(estimate, budget=GIB)
  assert "largest tensor" in reason and "2.0 GiB" in reason, reason
  assert "budget 1.0 GiB" in reason, reason
  assert benchmark_memory.memory_skip_reason(estimate, budget=100 * GIB) is None
  total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  assert 0 < benchmark_memory.memory_budget_bytes(0.5) <= 0.5 * total
  # A scenario of the memory planner with known sizes (not a guarantee over
  # the variants): V, ours, the tables of R and Fix, D and FD, the release.
  names = [V, "V", "R", "Fix", "D", "FD", "release:random"]
  estimates = {n: benchmark_memory.estimate_memory(_variant(n), shape, run)
               for n in names}
  # A budget just above V's: the release's R (its tables beside a step as
  # large as V's) does not fit; the others fit alone but not beside V's
  # step, so each is timed apart.
  budget = estimates[V].total_bytes + GIB
  groups, apart, skipped = benchmark_blocks.memory_groups(estimates, budget)
  assert list(skipped) == ["release:random"], skipped
  assert "would not fit" in skipped["release:random"]
  # 2 GiB of logits x 4 live x 2 layers + activations, + 4 GiB of tables.
  assert "20.5 GiB" in skipped["release:random"], skipped
  assert not groups and apart == ["V", "R", "Fix", "D", "FD"]
  # At 2048 x 1 (MiB: V's step 1164, ours 908, R's tables 256), with room
  # for V and two of our steps and one table: first fit, the steps and
  # tables of a group counted in full.
  run = benchmarking.RunShape(2048, 1)
  estimates = {n: benchmark_memory.estimate_memory(_variant(n), shape, run)
               for n in names}
  mib = 2 ** 20
  assert [estimates[n].step_bytes // mib for n in (V, "D")] == [1164, 908]
  assert estimates["R"].state_bytes == 256 * mib
  budget = (1164 + 2 * 908 + 256 + 50) * mib
  groups, apart, skipped = benchmark_blocks.memory_groups(estimates, budget)
  assert not skipped and not apart
  assert groups == [["V", "R"], ["Fix", "D"], ["FD"],
                    ["release:random"]]


@pytest.mark.slow  # three processes, each building models
def test_models_timed_apart_run_in_their_own_process_with_ratios():
  block = benchmark_blocks.Block(
      "sweep 64x1", QUICK_SHAPE, benchmarking.RunShape(64, 1),
      # A scenario (not a guarantee over the variants): D fits beside V, R's
      # table does not.
      [V, "D", "R"], rounds=1, steps=1, decode=(1, 3), decode_rounds=1)
  estimates = {n: benchmark_memory.estimate_memory(_variant(n), QUICK_SHAPE,
                                               block.run)
               for n in block.variants}
  # D fits beside V; R (its table) does not, but alone it does.
  budget = estimates[V].total_bytes + estimates["D"].total_bytes
  assert benchmark_blocks.memory_groups(estimates, budget)[:2] == (
      [["D"]], ["R"])
  seen = []
  out = benchmark_blocks.run_block(
      block, 1e10, benchmark_blocks.Log(quiet=True), memory_budget=budget,
      on_progress=lambda info: seen.append(sorted(
          n for n, e in info["results"].items() if "step_s" in e)))
  # The report is updated after the group (V, D) and after R.
  assert seen == [["D", V], ["D", "R", V]]
  results = out["results"]
  assert results["R"]["timed_apart"] and "timed_apart" not in results["D"]
  assert results["D"]["group"] == 0
  for name in block.variants:
    assert results[name]["speed_vs_v"] > 0, (name, results[name])
    assert results[name]["peak_step_bytes"] > 0, name
    assert results[name]["top_ops"], name
  assert results[V]["speed_vs_v"] == 1.0
  # R, timed without V, is compared with V's median time over the block.
  v_step = results[V]["step_s"]
  assert results["R"]["speed_vs_v"] == pytest.approx(
      v_step / results["R"]["step_s"])


def test_a_process_that_dies_loses_only_its_models():
  value, died = benchmark_blocks.in_own_process(abs, ["X"], -3)
  assert (value, died) == (3, None)
  # os._exit ends the process as the OOM killer would, without a result.
  value, died = benchmark_blocks.in_own_process(os._exit, ["R", "Fix"], 9)
  assert value is None
  assert "R, Fix" in died and "ended abruptly" in died, died


def test_run_block_skips_what_does_not_fit_without_building():
  block = benchmark_blocks.Block(
      "sweep 64x1", QUICK_SHAPE, benchmarking.RunShape(64, 1),
      # A scenario: nothing fits, whatever the model.
      [V, "R", "Linformer"], rounds=1, steps=1, decode=(1, 3))
  # A 1 KiB budget: nothing fits, nothing is built, each row says why.
  out = benchmark_blocks.run_block(block, 1e10,
                                   benchmark_blocks.Log(quiet=True),
                                   memory_budget=1024)
  results = out["results"]
  assert results[V]["skip_kind"] == "memory"
  assert "would not fit" in results[V]["skipped"]
  assert "the reference V" in results["R"]["skipped"]
  assert results["Linformer"]["skip_kind"] == "not causal"
  blocks = {block.name: out}
  # A target on a model that did not run is missed, with the reason.
  targets = benchmark_report.check_targets(
      blocks, {"peak_ratio": [{"every_block": "sweep", "model": "R",
                               "max": 0.6}]})
  assert [c["met"] for c in targets] == [False]
  assert "would not fit" in targets[0]["detail"]
  report = {"machine": "m", "threads": 2, "tf_version": "t",
            "matmul_size": 8, "matmul_peak_flops": 1e10, "runtime_s": 1.0,
            "blocks": blocks, "targets": targets}
  text = benchmark_report.markdown(report)
  assert "| %s | not run: would not fit in memory" % V in text, text
  assert "| **no** | not run: " in text, text


def test_a_block_of_several_groups_gives_v_in_each_group():
  """Each ratio sits beside the figure it comes from: the reference's time
  in the model's own group, not its row."""
  block = {"groups": [["R"], ["D", "FD"]], "rounds": 2, "results": {
      V: {"step_s_rounds": [6.0, 7.0, 3.0, 3.0]}}}
  note = benchmark_report.groups_note(block)
  assert ("%s's median step time in each group: 6500 ms beside R; 3000 ms "
          "beside D, FD." % V) in note
  assert "not strictly comparable" in note
  assert benchmark_report.groups_note({"groups": [["R"]], "results": {}}) == ""


def _entry(**values):
  entry = {"family": "ours"}
  entry.update(values)
  return entry


def _blocks():
  """Hand-made results of three blocks."""
  def block(results, decode=True):
    return {"decode_steps": [1, 17] if decode else None, "results": results}
  return {
      "reference 512x4": block({
          V: _entry(family="mesh", speed_vs_v=1.0, decode_speed_vs_v=1.0,
                      peak_ratio=1.0, total_ratio=1.0),
          "R+V": _entry(speed_vs_v=1.2, decode_speed_vs_v=0.9),
          "D+V": _entry(speed_vs_v=1.0, decode_speed_vs_v=1.1),
          "FD": _entry(speed_vs_v=1.0, peak_ratio=1.2, total_ratio=1.2)}),
      "sweep 2048x1": block({
          "R": _entry(speed_vs_v=1.9, decode_speed_vs_v=1.3),
          "FD": _entry(peak_ratio=0.9, total_ratio=0.9)}),
      "sweep 8192x1": block({
          "R": _entry(speed_vs_v=2.6, decode_speed_vs_v=None,
                      peak_ratio=0.5, total_ratio=0.7),
          "Fix": _entry(speed_vs_v=4.0),
          "FD": _entry(skipped="would not fit in memory: ...",
                       skip_kind="memory")}),
      "encoder-only 512x4": block({"R": _entry(speed_vs_v=0.5)},
                                  decode=False),
  }


def test_target_kinds_evaluate_met_and_missed():
  targets = {
      "speed_vs_v": [{"block": "sweep 8192x1", "model": "R", "min": 2.5},
                     {"block": "sweep 8192x1", "model": "Fix", "min": 5.0},
                     {"block": "sweep 16384x1", "model": "R", "min": 1.0}],
      "decode_vs_v": [
          {"block": "reference", "models": ["R+V", "D+V"], "min": 1.0},
          {"every_block": "sweep", "models": ["R"], "min": 1.0},
          {"every_block": "encoder", "model": "R", "min": 1.0}],
      "peak_ratio": [{"block": "reference", "model": "FD", "max": 1.0},
                     {"every_block": "sweep", "model": "FD", "max": 1.0},
                     {"block": "sweep 8192x1", "model": "R", "max": 0.6}],
      "every_variant_runs": ["sweep 8192x1"],
  }
  checks = benchmark_report.check_targets(_blocks(), targets)
  verdicts = {(c["block"], c["target"].split()[0], c["target"].split()[1]):
              c for c in checks}
  met = {key: c["met"] for key, c in verdicts.items()}
  assert met == {
      ("sweep 8192x1", "R", "training"): True,       # 2.6 >= 2.5
      ("sweep 8192x1", "Fix", "training"): False,    # 4.0 < 5.0
      ("reference 512x4", "R+V", "decode"): False,   # 0.9 < 1.0
      ("reference 512x4", "D+V", "decode"): True,
      ("sweep 2048x1", "R", "decode"): True,
      ("sweep 8192x1", "R", "decode"): False,        # not measured
      ("reference 512x4", "FD", "step"): False,      # 1.2 > 1.0
      ("sweep 2048x1", "FD", "step"): True,
      ("sweep 8192x1", "FD", "step"): False,         # skipped for memory
      ("sweep 8192x1", "R", "step"): True,           # 0.5 <= 0.6
      ("sweep 8192x1", "every", "variant"): False,   # FD skipped
  }
  # Blocks that did not run, and blocks that do not decode, are left out.
  assert not any(c["block"] == "encoder-only 512x4" for c in checks)
  skipped = verdicts[("sweep 8192x1", "FD", "step")]
  assert "would not fit" in skipped["detail"]
  assert skipped["measure"] == "memory"
  assert "no measurement" in verdicts[("sweep 8192x1", "R", "decode")][
      "detail"]


def test_plot_draws_the_models_that_ran_in_the_sweep(tmp_path):
  def block(length, linformer_ran):
    results = {
        V: _entry(family="mesh", step_s=0.1 * length,
                    peak_step_bytes=length * 2 ** 20),
        "R": _entry(step_s=0.05 * length, peak_step_bytes=length * 2 ** 19),
        "Linformer": (_entry(step_s=0.01, peak_step_bytes=2 ** 20)
                      if linformer_ran else
                      _entry(skipped="not causal", skip_kind="not causal"))}
    return {"run": {"length": length}, "model": "LM", "results": results}
  report = {"machine": "m", "blocks": {
      "sweep 128x1": block(128, False), "sweep 256x1": block(256, False),
      "reference 512x4": block(512, True)}}
  path = str(tmp_path / "b.png")
  # Linformer ran only outside the sweep: not drawn, not in the legend.
  assert benchmark_report.plot(report, path) == [V, "R"]
  assert os.path.getsize(path) > 0


def test_targets_file_parses_and_names_known_kinds():
  with open(os.path.join(os.path.dirname(SCRIPT),
                         "benchmark_targets.json")) as f:
    targets = json.load(f)
  kinds = set(benchmark_report.RATIO_TARGETS) | {
      "description", "ours_vs_release", "every_variant_runs"}
  assert set(targets) <= kinds
  # Evaluating on no results leaves everything out, without errors.
  assert benchmark_report.check_targets({}, targets) == []


@pytest.mark.parametrize("optimizer", sorted(benchmarking.OPTIMIZERS))
def test_model_trains_with_either_optimizer(optimizer):
  # Length 128 makes R's [heads, 128, 128] table factored (mesh's
  # min_dim_size_to_factor), where the lean update subtracts in place.
  model = benchmarking.build_model(
      _variant("R"), QUICK_SHAPE, benchmarking.RunShape(128, 1),
      optimizer=benchmarking.OPTIMIZERS[optimizer])
  try:
    op_types = {op.type for op in model.session.graph.get_operations()}
    in_place = any(t.startswith("AssignSub") for t in op_types)
    assert in_place == (optimizer == "lean"), sorted(op_types)
    assert model.train(1) > 0
  finally:
    model.close()
