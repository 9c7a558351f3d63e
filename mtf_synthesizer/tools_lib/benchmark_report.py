# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Runs of the speed and memory benchmark, and their report.

All models of one data shape (a `Block`) are built in this process (one graph
and session each), then timed in interleaved rounds: each round runs K
training steps of every model, in a rotated order, and each model's time is
divided by the vanilla model's time of the same round. Reported ratios are
the medians over rounds of these per-round ratios. `benchmarking` builds
the models and says what is measured.

The report is a JSON file, Markdown tables and a plot. Targets (a JSON file
such as tools/benchmark_targets.json) only add verdicts to the report.
"""

import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

import tensorflow.compat.v1 as tf

from mtf_synthesizer.tools_lib import benchmarking

V = benchmarking.VANILLA
ModelShape = benchmarking.ModelShape
RunShape = benchmarking.RunShape


def sweep_variants() -> List[str]:
  """The variants timed in the length sweep (the table's, some release's)."""
  return benchmarking.table_names() + [
      "release:" + m for m in benchmarking.SWEEP_RELEASE_MODES]


def enc_dec_variants() -> List[str]:
  """The variants timed at the encoder-decoder shape: the table's."""
  return benchmarking.table_names()


@dataclasses.dataclass(frozen=True)
class Block:
  """One data shape and how to measure it.

  Attributes:
    name: the block's key in the results.
    shape: the Transformer's sizes.
    run: the data shape.
    variants: the names of the variants to run.
    rounds: timing rounds.
    steps: training steps per model per round.
    decode: (short, long) decoding steps, or None for no decoding.
    decode_rounds: decoding rounds.
  """
  name: str
  shape: benchmarking.ModelShape
  run: benchmarking.RunShape
  variants: Sequence[str]
  rounds: int
  steps: int
  decode: Optional[Sequence[int]] = None
  decode_rounds: int = 3


def plan(quick: bool, lengths: Optional[Sequence[int]],
         enc_dec: bool) -> List[Block]:
  """The blocks of a full or quick run.

  Args:
    quick: tiny shapes, 1-2 rounds.
    lengths: the sweep's lengths; None for the default ones.
    enc_dec: add the encoder-decoder block.

  Returns:
    The blocks, in the order to run them.
  """
  everything = [v.name for v in benchmarking.all_variants()
                if v.name not in benchmarking.ALIASES and
                v.name not in benchmarking.SKIPPED]
  if quick:
    shape = benchmarking.ModelShape(d_model=64, num_heads=2, d_kv=32, d_ff=128,
                                 num_layers=1)
    blocks = [Block("reference 64x2", shape, benchmarking.RunShape(64, 2),
                    everything, rounds=2, steps=1, decode=(1, 3),
                    decode_rounds=1)]
    for length in (lengths if lengths is not None else (32, 128)):
      blocks.append(Block("sweep %dx1" % length, shape,
                          benchmarking.RunShape(length, 1), sweep_variants(),
                          rounds=2, steps=1))
    if enc_dec:
      blocks.append(Block(
          "enc-dec 32x1->16", dataclasses.replace(shape, encoder_layers=1),
          benchmarking.RunShape(32, 1, target_length=16), enc_dec_variants(),
          rounds=1, steps=1))
    return blocks
  shape = benchmarking.ModelShape()
  blocks = [Block("reference 512x4", shape, benchmarking.RunShape(512, 4),
                  everything, rounds=3, steps=1, decode=(1, 17),
                  decode_rounds=2)]
  # Longest first (the memory target is at the longest); results are written
  # after each block, so an interrupted run keeps what it measured.
  for length in sorted(lengths if lengths is not None else
                       (128, 256, 512, 1024, 2048, 4096), reverse=True):
    blocks.append(Block("sweep %dx1" % length, shape,
                        benchmarking.RunShape(length, 1), sweep_variants(),
                        rounds=2 if length >= 2048 else 3,
                        steps=1 if length > 256 else 2))
  if enc_dec:
    t5_small = dataclasses.replace(shape, num_layers=6, encoder_layers=6)
    blocks.append(Block("T5-small enc-dec 512x2->128", t5_small,
                        benchmarking.RunShape(512, 2, target_length=128),
                        enc_dec_variants(), rounds=2, steps=1))
  return blocks


def _median(values: Sequence[float]) -> Optional[float]:
  values = [v for v in values if v is not None]
  return statistics.median(values) if values else None


def run_block(block: Block, peak_flops: float,
              log: Callable[[str], None]) -> Dict:
  """Builds, times and traces every model of one block.

  Args:
    block: what to run.
    peak_flops: the machine's matmul FLOP/s, for MFU.
    log: prints a progress line.

  Returns:
    The block's entry of the report; "results" maps each variant to its
    numbers (or its "error").
  """
  by_name = {v.name: v for v in benchmarking.all_variants()}
  models: Dict[str, benchmarking.BuiltModel] = {}
  results: Dict[str, Dict] = {}
  for name in block.variants:
    variant = by_name[name]
    entry = {"family": variant.family, "mode": variant.mode}
    results[name] = entry
    start = time.perf_counter()
    try:
      model = benchmarking.build_model(variant, block.shape, block.run,
                                    decode=bool(block.decode))
      model.train(1)  # warm-up; also fails here if the layer cannot run
      if block.decode:
        for steps in block.decode:
          model.decode(steps)
    except Exception as e:  # pylint: disable=broad-except
      message = str(e).strip().splitlines()
      entry["error"] = "%s: %s" % (type(e).__name__,
                                   message[0][:300] if message else "")
      log("  %-26s FAILS (%s)" % (name, entry["error"][:120]))
      continue
    models[name] = model
    entry.update(params=model.num_params, flops_per_step=model.flops,
                 state_bytes=model.state_bytes,
                 build_s=round(time.perf_counter() - start, 2))
    log("  %-26s built in %.1fs" % (name, entry["build_s"]))
  if V not in models:
    raise RuntimeError("vanilla failed at %s" % block.name)

  names = list(models)
  train_times = {n: [] for n in names}
  decode_times = {n: [] for n in names}
  for r in range(block.rounds):
    order = names[r % len(names):] + names[:r % len(names)]
    for name in order:
      train_times[name].append(models[name].train(block.steps))
    log("  round %d/%d: V %.3fs/step" % (r + 1, block.rounds,
                                        train_times[V][-1]))
  if block.decode:
    short, long_ = block.decode
    for r in range(block.decode_rounds):
      order = names[r % len(names):] + names[:r % len(names)]
      for name in order:
        t_long = models[name].decode(long_)
        t_short = models[name].decode(short)
        # Under heavy load the difference can be <= 0: not a measurement.
        diff = t_long - t_short
        decode_times[name].append(diff if diff > 0 else None)
    log("  decoding: %d rounds done" % block.decode_rounds)

  traces = {}
  for name in names:
    traces[name] = models[name].trace_train()
  tokens = block.run.tokens
  for name in names:
    entry = results[name]
    times = train_times[name]
    ratios = [t / tv for t, tv in zip(times, train_times[V])]
    step_s = _median(times)
    entry.update(
        step_s=step_s, step_s_rounds=times,
        steps_per_s=1.0 / step_s, tokens_per_s=tokens / step_s,
        time_ratio=_median(ratios),
        speed_vs_v=_median([1.0 / x for x in ratios]),
        mfu=entry["flops_per_step"] / step_s / peak_flops,
        peak_step_bytes=benchmarking.peak_step_bytes(traces[name]),
        top_ops=benchmarking.top_ops(traces[name]),
        top_allocations=benchmarking.top_allocations(traces[name]))
    if block.decode:
      steps = block.decode[1] - block.decode[0]
      per_token = _median([t / steps for t in decode_times[name] if t])
      entry.update(
          decode_tokens_per_s=block.run.batch / per_token if per_token
          else None,
          decode_speed_vs_v=_median(
              [tv / t for t, tv in zip(decode_times[name], decode_times[V])
               if t and tv]))
  peak_v = results[V]["peak_step_bytes"]
  for name in names:
    entry = results[name]
    entry["peak_ratio"] = (entry["peak_step_bytes"] / peak_v
                           if peak_v > 0 else None)
    entry["total_bytes"] = entry["peak_step_bytes"] + entry["state_bytes"]
    entry["total_ratio"] = entry["total_bytes"] / results[V]["total_bytes"]
  for model in models.values():
    model.close()
  return {"shape": dataclasses.asdict(block.shape),
          "model": block.shape.label, "run": dataclasses.asdict(block.run),
          "tokens_per_step": tokens, "rounds": block.rounds,
          "steps_per_round": block.steps,
          "decode_steps": list(block.decode) if block.decode else None,
          "results": results}


def _get(blocks: Dict, block_name: Optional[str], model: str, key: str):
  entry = blocks.get(block_name, {}).get("results", {}).get(model, {})
  return entry.get(key)


def _block_named(blocks: Dict, name: str) -> Optional[str]:
  """The block called `name`, or the first whose name starts with it."""
  if name in blocks:
    return name
  return next((k for k in blocks if k.startswith(name)), None)


def check_targets(blocks: Dict, targets: Dict) -> List[Dict]:
  """The targets, evaluated on this run's numbers.

  Args:
    blocks: the report's blocks (run_block's results by block name).
    targets: as in tools/benchmark_targets.json; targets at blocks that did
      not run are left out.

  Returns:
    One dict per target: "target", "met", "detail", "models" (those
    involved), "block" and "measure" ("time" or "memory").
  """
  checks = []

  def add(target, met, detail, block, models, measure="time"):
    checks.append({"target": target, "met": met, "detail": detail,
                   "models": list(models), "block": block,
                   "measure": measure})

  if "ours_vs_release" in targets:
    ref = _block_named(blocks, targets["ours_vs_release"]["block"])
    for mode in benchmarking.RELEASE_MODES:
      ours_name = benchmarking.ALIASES.get("ours:" + mode, "ours:" + mode)
      ours = _get(blocks, ref, ours_name, "speed_vs_v")
      theirs = _get(blocks, ref, "release:" + mode, "speed_vs_v")
      if ours is None or theirs is None:
        continue
      add("%s: ours >= release (%s)" % (mode, ref), ours >= theirs,
          "ours (%s) %.2fx V, release %.2fx V" % (ours_name, ours, theirs),
          ref, [ours_name, "release:" + mode])
  for target in targets.get("speed_vs_v", ()):
    block = _block_named(blocks, target["block"])
    speed = _get(blocks, block, target["model"], "speed_vs_v")
    if speed is not None:
      add("%s >= %.2fx V (%s)" % (target["model"], target["min"], block),
          speed >= target["min"], "%.2fx" % speed, block,
          [target["model"], V])
  for block in targets.get("every_variant_runs", ()):
    if block in blocks:
      failed = [n for n, e in blocks[block]["results"].items()
                if "error" in e and e["family"] != "release"]
      add("every variant runs at %s" % block, not failed,
          "failed: %s" % failed if failed else "all ran", block, failed)
  for target in targets.get("peak_ratio", ()):
    block = _block_named(blocks, target["block"])
    ratio = _get(blocks, block, target["model"], "peak_ratio")
    total = _get(blocks, block, target["model"], "total_ratio")
    if ratio is not None:
      add("%s peak memory <= %.2fx V at %s" % (target["model"], target["max"],
                                             block), ratio <= target["max"],
          "step peak %.2fx V; with variables and slots %.2fx V" % (
              ratio, total), block, [target["model"], V], "memory")
  return checks


def _fmt(value, spec="%.2f", none="-"):
  return none if value is None else spec % value


def markdown(report: Dict) -> str:
  """The run as Markdown tables.

  Args:
    report: as written to benchmark.json.

  Returns:
    The Markdown text.
  """
  lines = ["# Benchmark results", "",
           "Machine: %s, %s CPU threads; TF %s. Matmul peak (float32 "
           "%dx%d, same process): %.1f GFLOP/s. Total run time %.0f s." % (
               report["machine"], report["threads"], report["tf_version"],
               report["matmul_size"], report["matmul_size"],
               report["matmul_peak_flops"] / 1e9, report["runtime_s"]), "",
           "Ratios are medians over rounds of per-round ratios to V (mesh's "
           "SelfAttention) in the same process. speed = V time / model "
           "time (>1 is faster). Step peak = live bytes allocated by one "
           "training step (activations, gradients, temporaries); state = "
           "variables + Adafactor slots.", ""]
  for block_name, block in report["blocks"].items():
    decode = bool(block["decode_steps"])
    lines += ["## %s (%s; %d tokens/step; %d rounds x %d step)" % (
        block_name, block["model"], block["tokens_per_step"],
        block["rounds"], block["steps_per_round"]), ""]
    header = ["model", "ms/step", "speed vs V", "tokens/s", "MFU",
              "step peak MiB", "peak vs V", "state MiB", "params",
              "GFLOP/step"]
    if decode:
      header[4:4] = ["decode tok/s", "decode vs V"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for name, e in block["results"].items():
      if "error" in e:
        lines.append("| %s | fails: %s |%s" % (
            name, e["error"][:90].replace("|", "/"),
            " |" * (len(header) - 2)))
        continue
      row = [name, "%.0f" % (1000 * e["step_s"]), _fmt(e["speed_vs_v"]),
             "%.0f" % e["tokens_per_s"], "%.0f%%" % (100 * e["mfu"]),
             "%.0f" % (e["peak_step_bytes"] / 2 ** 20),
             _fmt(e["peak_ratio"]), "%.0f" % (e["state_bytes"] / 2 ** 20),
             "%.2fM" % (e["params"] / 1e6),
             "%.1f" % (e["flops_per_step"] / 1e9)]
      if decode:
        row[4:4] = [_fmt(e["decode_tokens_per_s"], "%.0f"),
                    _fmt(e["decode_speed_vs_v"])]
      lines.append("| " + " | ".join(row) + " |")
    lines.append("")
  lines += ["## Targets", "", "| target | met | measured |", "|---|---|---|"]
  for c in report["targets"]:
    lines.append("| %s | %s | %s |" % (c["target"], "yes" if c["met"]
                                       else "**no**", c["detail"]))
  lines.append("")
  missed = [c for c in report["targets"] if not c["met"]]
  if missed:
    lines += ["## Why targets are missed: top ops of one traced step", ""]
    seen = set()
    for c in missed:
      block_name = c["block"]
      for name in c["models"]:
        e = report["blocks"].get(block_name, {}).get("results", {}).get(name)
        if not e or "error" in e or (block_name, name) in seen:
          continue
        seen.add((block_name, name))
        key, unit = (("top_allocations", "MiB") if c["measure"] == "memory"
                     else ("top_ops", "ms"))
        lines += ["### %s at %s (%s)" % (name, block_name, key), "",
                  "| op | %s | nodes |" % unit, "|---|---|---|"]
        for row in e[key]:
          lines.append("| `%s` | %s | %d |" % (row["op"], row[unit],
                                               row["count"]))
        lines.append("")
  return "\n".join(lines)


def plot(report: Dict, path: str) -> None:
  """Plots time and step peak memory against length (the sweep blocks).

  Args:
    report: as written to benchmark.json.
    path: the PNG to write.
  """
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise SystemExit("The plot needs matplotlib (not installed: %s); "
                     "rerun with --no_plot or install it." % e)
  sweep = {b["run"]["length"]: b for k, b in report["blocks"].items()
           if k.startswith("sweep")}
  if not sweep:
    return
  lengths = sorted(sweep)
  names = list(sweep[lengths[0]]["results"])
  fig, axes = plt.subplots(1, 2, figsize=(13, 5))
  for name in names:
    xs, times, mems = [], [], []
    for length in lengths:
      e = sweep[length]["results"].get(name, {})
      if "step_s" in e:
        xs.append(length)
        times.append(1000 * e["step_s"])
        mems.append(e["peak_step_bytes"] / 2 ** 20)
    style = "-" if not name.startswith("release") else "--"
    width = 2.5 if name == V else 1.2
    axes[0].plot(xs, times, style, marker="o", lw=width, ms=3, label=name)
    axes[1].plot(xs, mems, style, marker="o", lw=width, ms=3, label=name)
  for ax, label in ((axes[0], "training step time (ms)"),
                    (axes[1], "training step peak memory (MiB)")):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length (batch 1)")
    ax.set_ylabel(label)
    ax.grid(True, which="both", alpha=0.3)
  axes[1].legend(fontsize=7, ncol=2)
  fig.suptitle("%s, %s" % (next(iter(sweep.values()))["model"],
                           report["machine"]))
  fig.tight_layout()
  fig.savefig(path, dpi=110)


def write(output_dir: str, results: Dict, peaks: List[float],
          matmul_size: int, start: float, final: bool, *, threads: int,
          quick: bool, targets: Dict, with_plot: bool = True) -> Dict:
  """Writes the JSON, the Markdown and (with_plot) the plot.

  Args:
    output_dir: where benchmark.json, .md and .png go.
    results: run_block's results by block name.
    peaks: the matmul peak FLOP/s measured so far (MFU uses the best).
    matmul_size: the size of the matmul that measured them.
    start: time.perf_counter() at the start of the run.
    final: the run is complete.
    threads: the sessions' threads.
    quick: a quick run.
    targets: see check_targets ({} for no verdicts).
    with_plot: write benchmark.png.

  Returns:
    The report written to benchmark.json.
  """
  peak = max(peaks)
  for block in results.values():  # MFU against the best measured peak
    for e in block["results"].values():
      if "mfu" in e:
        e["mfu"] = e["flops_per_step"] / e["step_s"] / peak
  report = {
      "machine": "%s, %s" % (platform.machine(), platform.processor() or
                             platform.platform()),
      "threads": threads, "tf_version": tf.__version__,
      "quick": quick, "complete": final, "matmul_size": matmul_size,
      "matmul_peak_flops": peak, "matmul_peak_flops_runs": peaks,
      "aliases": benchmarking.ALIASES, "blocks": results,
      "targets": check_targets(results, targets),
      "runtime_s": time.perf_counter() - start,
      "command": " ".join(sys.argv),
  }
  with open(os.path.join(output_dir, "benchmark.json"), "w") as f:
    json.dump(report, f, indent=1)
  with open(os.path.join(output_dir, "benchmark.md"), "w") as f:
    f.write(markdown(report))
  if with_plot:
    plot(report, os.path.join(output_dir, "benchmark.png"))
  return report
