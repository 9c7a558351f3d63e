# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The report of the speed and memory benchmark: JSON, Markdown, a plot.

Targets (a JSON file such as tools/benchmark_targets.json) only add
verdicts to the report (`check_targets`).
"""

import json
import os
import platform
import sys
import time
from typing import Dict, List, Optional

import tensorflow.compat.v1 as tf

from workbench import benchmark_memory
from workbench import benchmarking

V = benchmarking.REFERENCE


def _get(blocks: Dict, block_name: Optional[str], model: str, key: str):
  entry = blocks.get(block_name, {}).get("results", {}).get(model, {})
  return entry.get(key)


def _block_named(blocks: Dict, name: str) -> Optional[str]:
  """The block called `name`, or the first whose name starts with it."""
  if name in blocks:
    return name
  return next((k for k in blocks if k.startswith(name)), None)


# Target kinds that bound one measure of models at blocks: the measure's key
# in a result, ">=" (at least "min") or "<=" (at most "max"), what the report
# calls it, and "time" or "memory" (which breakdown explains a miss).
RATIO_TARGETS = {
    "speed_vs_v": ("speed_vs_v", "training speed", "time"),
    "decode_vs_v": ("decode_speed_vs_v", "decode speed", "time"),
    "peak_ratio": ("peak_ratio", "step peak memory", "memory"),
}


def _target_blocks(blocks: Dict, target: Dict) -> List[str]:
  """The blocks a target applies to, among those that ran.

  Args:
    blocks: the report's blocks.
    target: with "block" (a block's name, or a prefix: its first match) or
      "every_block" (a prefix: every block that starts with it).

  Returns:
    Block names (none when no such block ran).
  """
  if "every_block" in target:
    return [k for k in blocks if k.startswith(target["every_block"])]
  name = _block_named(blocks, target["block"])
  return [name] if name else []


def _ratio_checks(blocks: Dict, kind: str, target: Dict) -> List[Dict]:
  """Evaluates one target of a RATIO_TARGETS kind at each of its blocks."""
  key, what, measure = RATIO_TARGETS[kind]
  models = target.get("models") or [target["model"]]
  if "min" in target:
    bound, op, holds = target["min"], ">=", lambda x, b: x >= b
  else:
    bound, op, holds = target["max"], "<=", lambda x, b: x <= b
  out = []
  for block in _target_blocks(blocks, target):
    block_results = blocks[block]["results"]
    if kind == "decode_vs_v" and not blocks[block].get("decode_steps"):
      continue  # this block does not decode
    for model in models:
      entry = block_results.get(model)
      if entry is None:
        continue  # not part of this run (e.g. --variants)
      label = "%s %s %s %.2fx %s at %s" % (model, what, op, bound, V, block)
      value = entry.get(key)
      if value is not None:
        met = holds(value, bound)
        # Three digits where two would read as the bound itself.
        spec = "%.3f" if "%.2f" % value == "%.2f" % bound else "%.2f"
        detail = (spec + "x") % value
        if kind == "peak_ratio" and entry.get("total_ratio") is not None:
          detail = ("step peak " + spec + "x %s; with variables and slots "
                    "%.2fx %s") % (value, V, entry["total_ratio"], V)
      else:
        # A target that was not measured is not met: say why.
        met = False
        detail = ("not run: %s" % entry["skipped"] if "skipped" in entry
                  else "fails: %s" % entry["error"] if "error" in entry
                  else "decoding fails: %s" % entry["decode_error"]
                  if "decode_error" in entry
                  else "no measurement (load noise exceeded the difference)")
      out.append({"target": label, "met": met, "detail": detail,
                  "models": [model, V], "block": block,
                  "measure": measure})
  return out


def check_targets(blocks: Dict, targets: Dict) -> List[Dict]:
  """The targets, evaluated on this run's numbers.

  Target kinds (see tools/benchmark_targets.json): "ours_vs_release"
  ({"block"}), "every_variant_runs" ([block names]), and the kinds of
  RATIO_TARGETS, each a list of {"model" or "models", "block" or
  "every_block", "min" or "max"}. A ratio target at a block that ran is met
  only when measured: a model skipped, failed or unmeasured there misses it,
  with the reason as its detail.

  Args:
    blocks: the report's blocks (run_block's results by block name).
    targets: as in tools/benchmark_targets.json; targets at blocks that did
      not run are left out.

  Returns:
    One dict per target and block: "target", "met", "detail", "models"
    (those involved), "block" and "measure" ("time" or "memory").
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
          "ours (%s) %.2fx %s, release %.2fx %s" % (ours_name, ours, V,
                                                     theirs, V),
          ref, [ours_name, "release:" + mode])
  for target in targets.get("speed_vs_v", ()):
    checks.extend(_ratio_checks(blocks, "speed_vs_v", target))
  for block in targets.get("every_variant_runs", ()):
    if block in blocks:
      # Failures and memory skips count; the release's layer (hard-coded
      # lengths) and layers that cannot be causal in an LM do not.
      failed = [n for n, e in blocks[block]["results"].items()
                if e["family"] != "release" and (
                    "error" in e or e.get("skip_kind") == "memory")]
      add("every variant runs at %s" % block, not failed,
          "did not run: %s" % failed if failed else "all ran", block, failed)
  for kind in RATIO_TARGETS:
    if kind == "speed_vs_v":
      continue
    for target in targets.get(kind, ()):
      checks.extend(_ratio_checks(blocks, kind, target))
  return checks


def _fmt(value, spec="%.2f", none="-"):
  return none if value is None else spec % value


SLOWEST = 3
TOP_OPS_SHOWN = 6


def _slowest(block: Dict) -> List[str]:
  """Markdown: where the time goes in the block's SLOWEST slowest models."""
  timed = [(e["step_s"], name) for name, e in block["results"].items()
           if "step_s" in e and e.get("top_ops")]
  timed.sort(reverse=True)
  if not timed:
    return []
  lines = ["Where the time goes in the %d slowest models (top ops of one "
           "traced step, summed over all layers; %% of the time of all the "
           "step's ops, summed over threads):" %
           min(SLOWEST, len(timed)), ""]
  for step_s, name in timed[:SLOWEST]:
    e = block["results"][name]
    traced = e.get("traced_op_ms") or 1.0
    ops = ", ".join("`%s` %.0f ms (%.0f%%)" % (row["op"], row["ms"],
                                                100 * row["ms"] / traced)
                    for row in e["top_ops"][:TOP_OPS_SHOWN])
    lines.append("* **%s** (%.0f ms/step, MFU %.0f%%): %s" % (
        name, 1000 * step_s, 100 * e["mfu"], ops))
  return lines + [""]


def groups_note(block: Dict) -> str:
  """What a block timed in several memory groups compares each model with.

  The reference (V (mesh)) runs in every group's rounds; its row is the
  median over all of them, and each other model's ratios are to it in its
  own group's rounds. The note gives its median time in each group, the
  figure each ratio comes from, and says why the groups' figures differ.

  Args:
    block: a block of the results file, with `groups` and `rounds`.

  Returns:
    A paragraph; "" for a block of one group.
  """
  groups = block.get("groups") or []
  if len(groups) <= 1:
    return ""
  rounds = block.get("rounds") or 0
  v_rounds = block["results"].get(V, {}).get("step_s_rounds") or []
  per_group = ""
  if rounds and len(v_rounds) == rounds * len(groups):
    medians = []
    for index, group in enumerate(groups):
      times = sorted(v_rounds[index * rounds:(index + 1) * rounds])
      middle = len(times) // 2
      median = (times[middle] if len(times) % 2
                else (times[middle - 1] + times[middle]) / 2)
      medians.append("%.0f ms beside %s" % (1000 * median, ", ".join(group)))
    per_group = " %s's median step time in each group: %s." % (
        V, "; ".join(medians))
  return ("{v}'s row is its median over every group's rounds; each other "
          "model's ratios are to {v} in its own group's rounds and process, "
          "so a ratio need not be {v}'s ms/step over the model's. {v}'s "
          "step time differs between the groups' processes (what else a "
          "process holds changes TF's allocator pool), so ratios from "
          "different groups are not strictly comparable.".format(v=V)
          + per_group)


def _optimizer_label(name: str) -> str:
  """The optimizer class of a report (reports before the key: mesh's)."""
  optimizer = benchmarking.OPTIMIZERS[name]
  return "%s.%s" % (optimizer.__module__, optimizer.__name__)


def markdown(report: Dict) -> str:
  """The run as Markdown tables.

  Args:
    report: as written to benchmark.json.

  Returns:
    The Markdown text.
  """
  lines = ["# Benchmark results", "",
           "Code: %s. Optimizer: %s. Machine: %s, %s CPU threads; TF %s. "
           "Matmul peak (float32 %dx%d, same process): %.1f GFLOP/s. Total "
           "run time %.0f s." % (
               report.get("code", "not recorded"),
               _optimizer_label(report.get("optimizer", "mesh")),
               report["machine"],
               report["threads"], report["tf_version"],
               report["matmul_size"], report["matmul_size"],
               report["matmul_peak_flops"] / 1e9, report["runtime_s"]), "",
           "Ratios are medians over rounds of per-round ratios to the "
           "reference %s (mesh's SelfAttention; V is the dot-product "
           "variant, as on every page), in the same round, in the same "
           "process (models timed apart: to its median over the block). "
           "speed = its time / "
           "model time (>1 is faster). GFLOP/s = the step's matmul FLOPs / "
           "its time; MFU = GFLOP/s / the matmul peak (how far the model is "
           "from the peak). Step peak = live bytes allocated by one "
           "training step (activations, gradients, temporaries); state = "
           "variables + Adafactor slots." % V, ""]
  for block_name, block in report["blocks"].items():
    decode = bool(block["decode_steps"])
    lines += ["## %s (%s; %d tokens/step; %d rounds x %d step)" % (
        block_name, block["model"], block["tokens_per_step"],
        block["rounds"], block["steps_per_round"]), ""]
    groups = block.get("groups") or []
    budget = benchmark_memory.gib(block.get("memory_budget_bytes", 0))
    if len(groups) > 1:
      lines += ["Timed in %d memory groups, each in rounds with %s (memory "
                "budget %s): %s." % (
                    len(groups), V, budget,
                    "; ".join(", ".join(g) for g in groups)), "",
                groups_note(block), ""]
    if block.get("timed_apart"):
      lines += ["Timed apart from {v}, each in a process of its own after "
                "{v}'s groups (each fits in the memory budget, {b}, alone but "
                "not beside {v}): {names}. Their ratios are to {v}'s median "
                "time over the block, not to {v}'s time in the same round, so "
                "they are more exposed to changes of the machine's "
                "load.".format(v=V, b=budget,
                               names=", ".join(block["timed_apart"])), ""]
    header = ["model", "ms/step", "speed vs " + V, "tokens/s", "GFLOP/s",
              "MFU", "step peak MiB", "peak vs " + V, "state MiB", "params",
              "GFLOP/step"]
    if decode:
      header[4:4] = ["decode tok/s", "decode vs " + V]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    notes = []
    for name, e in block["results"].items():
      if "skipped" in e or "error" in e:
        text = ("not run: " + e["skipped"] if "skipped" in e
                else "fails: " + e["error"])
        short = text if len(text) <= 90 else text[:87] + "..."
        lines.append("| %s | %s |%s" % (name, short.replace("|", "/"),
                                         " |" * (len(header) - 2)))
        if len(text) > 90:
          notes.append("* %s: %s" % (name, text))
        continue
      if "step_s" not in e:
        continue
      row = [name, "%.0f" % (1000 * e["step_s"]), _fmt(e["speed_vs_v"]),
             "%.0f" % e["tokens_per_s"],
             "%.1f" % (e["flops_per_step"] / e["step_s"] / 1e9),
             "%.0f%%" % (100 * e["mfu"]),
             "%.0f" % (e["peak_step_bytes"] / 2 ** 20),
             _fmt(e["peak_ratio"]), "%.0f" % (e["state_bytes"] / 2 ** 20),
             "%.2fM" % (e["params"] / 1e6),
             "%.1f" % (e["flops_per_step"] / 1e9)]
      if decode:
        row[4:4] = [_fmt(e.get("decode_tokens_per_s"), "%.0f",
                         none="fails" if "decode_error" in e else "-"),
                    _fmt(e.get("decode_speed_vs_v"))]
      lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    if notes:
      lines += notes + [""]
    lines += _slowest(block)
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
        key, unit = (("top_allocations", "MiB") if c["measure"] == "memory"
                     else ("top_ops", "ms"))
        # Models that did not run have no breakdown: their row says why.
        if not e or key not in e or (block_name, name, key) in seen:
          continue
        seen.add((block_name, name, key))
        lines += ["### %s at %s (%s)" % (name, block_name, key), "",
                  "| op | %s | nodes |" % unit, "|---|---|---|"]
        for row in e[key]:
          lines.append("| `%s` | %s | %d |" % (row["op"], row[unit],
                                               row["count"]))
        lines.append("")
  return "\n".join(lines)


def plot(report: Dict, path: str) -> List[str]:
  """Plots time and step peak memory against length (the sweep blocks).

  Args:
    report: as written to benchmark.json.
    path: the PNG to write.

  Returns:
    The models drawn (those timed at one sweep length at least).
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
    return []
  lengths = sorted(sweep)
  names = list(sweep[lengths[0]]["results"])
  fig, axes = plt.subplots(1, 2, figsize=(13, 5))
  # One colour per model (tab20 has 20; the sweep has 19 models).
  colours = plt.get_cmap("tab20").colors
  drawn = []
  for index, name in enumerate(names):
    xs, times, mems = [], [], []
    for length in lengths:
      e = sweep[length]["results"].get(name, {})
      if "step_s" in e:
        xs.append(length)
        times.append(1000 * e["step_s"])
        mems.append(e["peak_step_bytes"] / 2 ** 20)
    if not xs:
      continue  # never ran in the sweep (Linformer): no legend entry
    drawn.append(name)
    style = dict(
        linestyle="--" if name.startswith("release") else
        (":" if name in benchmarking.baseline_names() else "-"),
        color="black" if name == V else colours[index % len(colours)],
        lw=2.5 if name == V else 1.2, marker="o", ms=3, label=name)
    axes[0].plot(xs, times, **style)
    axes[1].plot(xs, mems, **style)
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
  plt.close(fig)
  return drawn


def write(output_dir: str, results: Dict, peaks: List[float],
          matmul_size: int, start: float, final: bool, *, threads: int,
          quick: bool, targets: Dict, with_plot: bool = True,
          code: str = "not recorded",
          optimizer: str = benchmarking.DEFAULT_OPTIMIZER) -> Dict:
  """Writes the JSON, the Markdown and (with_plot) the plot.

  Args:
    output_dir: where benchmark.json, .md and .png go.
    results: run_block's results by block name.
    peaks: the matmul peak FLOP/s measured so far (MFU uses the best).
    matmul_size: the size of the matmul that measured them.
    start: time.monotonic() at the start of the run (Log.start).
    final: the run is complete.
    threads: the sessions' threads.
    quick: a quick run.
    targets: see check_targets ({} for no verdicts).
    with_plot: write benchmark.png.
    code: the version of the code measured (`workbench.checkout.commit`).
    optimizer: the blocks' optimizer (a key of benchmarking.OPTIMIZERS).

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
      "runtime_s": time.monotonic() - start,
      "command": " ".join(sys.argv),
      "code": code,
      "optimizer": optimizer,
  }
  with open(os.path.join(output_dir, "benchmark.json"), "w") as f:
    json.dump(report, f, indent=1)
  with open(os.path.join(output_dir, "benchmark.md"), "w") as f:
    f.write(markdown(report))
  if with_plot:
    plot(report, os.path.join(output_dir, "benchmark.png"))
  return report
