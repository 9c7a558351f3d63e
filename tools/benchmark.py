# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Speed and memory of every Synthesizer variant against vanilla attention.

All models of one data shape are built in this process (one graph and
session each), then timed in interleaved rounds: each round runs K training
steps of every model, in a rotated order, and each model's time is divided by
the vanilla model's time of the same round. Reported ratios are the medians
over rounds of these per-round ratios. See docs/benchmark.md and
`bench_lib.py` for what is measured and how.

Full run (about 20 minutes on 2 CPU cores):
  PYTHONPATH=. .venv/bin/python tools/benchmark.py

Smoke test at tiny shapes (about 1-2 minutes):
  PYTHONPATH=. .venv/bin/python tools/benchmark.py --quick \
      --output_dir /tmp/bench_quick
"""

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_lib  # pylint: disable=g-import-not-at-top
import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top

V = bench_lib.VANILLA
# The variants timed in the length sweep and at the encoder-decoder shape.
SWEEP_VARIANTS = ("V", "V(ours)", "R", "Fix", "FR", "D", "FD", "R+V", "D+V",
                  "R+D", "FR+V", "release:random", "release:dense_minus",
                  "release:random_plus_alpha", "release:dense_plus_alpha")
# Our modes that are the same composition as a paper variant are not built
# twice: `random` is R, and `random_plus_alpha` is R+V (the same two terms
# with learned weights, in the other order).
ALIASES = {"ours:random": "R", "ours:random_plus_alpha": "R+V"}
# The release's `factorized` mode is degenerate (one attention row for every
# query, see docs): it is left out to save time.
SKIPPED = ("ours:factorized", "release:factorized")
ENC_DEC_VARIANTS = ("V", "V(ours)", "R", "Fix", "FR", "D", "FD", "R+V", "D+V",
                    "R+D", "FR+V")


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
  shape: bench_lib.ModelShape
  run: bench_lib.RunShape
  variants: Sequence[str]
  rounds: int
  steps: int
  decode: Optional[Sequence[int]] = None
  decode_rounds: int = 3


def plan(quick: bool, lengths: Optional[Sequence[int]],
         enc_dec: bool) -> List[Block]:
  """The blocks of a full or quick run."""
  everything = [v.name for v in bench_lib.all_variants()
                if v.name not in ALIASES and v.name not in SKIPPED]
  if quick:
    shape = bench_lib.ModelShape(d_model=64, num_heads=2, d_kv=32, d_ff=128,
                                 num_layers=1)
    blocks = [Block("reference 64x2", shape, bench_lib.RunShape(64, 2),
                    everything, rounds=2, steps=1, decode=(1, 3),
                    decode_rounds=1)]
    for length in (lengths if lengths is not None else (32, 128)):
      blocks.append(Block("sweep %dx1" % length, shape,
                          bench_lib.RunShape(length, 1), SWEEP_VARIANTS,
                          rounds=2, steps=1))
    if enc_dec:
      blocks.append(Block(
          "enc-dec 32x1->16", dataclasses.replace(shape, encoder_layers=1),
          bench_lib.RunShape(32, 1, target_length=16), ENC_DEC_VARIANTS,
          rounds=1, steps=1))
    return blocks
  shape = bench_lib.ModelShape()
  blocks = [Block("reference 512x4", shape, bench_lib.RunShape(512, 4),
                  everything, rounds=3, steps=1, decode=(1, 17),
                  decode_rounds=2)]
  # Longest first: they carry the targets; results are written after each
  # block, so an interrupted run keeps what it measured.
  for length in sorted(lengths if lengths is not None else
                       (128, 256, 512, 1024, 2048, 4096), reverse=True):
    blocks.append(Block("sweep %dx1" % length, shape,
                        bench_lib.RunShape(length, 1), SWEEP_VARIANTS,
                        rounds=2 if length >= 2048 else 3,
                        steps=1 if length > 256 else 2))
  if enc_dec:
    t5_small = dataclasses.replace(shape, num_layers=6, encoder_layers=6)
    blocks.append(Block("T5-small enc-dec 512x2->128", t5_small,
                        bench_lib.RunShape(512, 2, target_length=128),
                        ENC_DEC_VARIANTS, rounds=2, steps=1))
  return blocks


def _median(values: Sequence[float]) -> Optional[float]:
  values = [v for v in values if v is not None]
  return statistics.median(values) if values else None


def run_block(block: Block, peak_flops: float, log) -> Dict:
  """Builds, times and traces every model of one block."""
  by_name = {v.name: v for v in bench_lib.all_variants()}
  models: Dict[str, bench_lib.BuiltModel] = {}
  results: Dict[str, Dict] = {}
  for name in block.variants:
    variant = by_name[name]
    entry = {"family": variant.family, "mode": variant.mode}
    results[name] = entry
    start = time.perf_counter()
    try:
      model = bench_lib.build_model(variant, block.shape, block.run,
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
        peak_step_bytes=bench_lib.peak_step_bytes(traces[name]),
        top_ops=bench_lib.top_ops(traces[name]),
        top_allocations=bench_lib.top_allocations(traces[name]))
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


def _get(blocks: Dict, block_name: str, model: str, key: str):
  entry = blocks.get(block_name, {}).get("results", {}).get(model, {})
  return entry.get(key)


def check_targets(blocks: Dict) -> List[Dict]:
  """The issue's targets, evaluated on this run's numbers."""
  ref = next((k for k in blocks if k.startswith("reference")), None)
  checks = []

  def add(target, met, detail, models=()):
    checks.append({"target": target, "met": met, "detail": detail,
                   "models": list(models)})

  if ref:
    for mode in bench_lib.RELEASE_MODES:
      ours_name = ALIASES.get("ours:" + mode, "ours:" + mode)
      ours = _get(blocks, ref, ours_name, "speed_vs_v")
      theirs = _get(blocks, ref, "release:" + mode, "speed_vs_v")
      if ours is None or theirs is None:
        continue
      add("%s: ours >= release (%s)" % (mode, ref), ours >= theirs,
          "ours (%s) %.2fx V, release %.2fx V" % (ours_name, ours, theirs),
          [ours_name, "release:" + mode])
    for name, bound in (("R+V", 0.95), ("D+V", 0.90)):
      speed = _get(blocks, ref, name, "speed_vs_v")
      if speed is not None:
        add("%s >= %.2fx V (%s)" % (name, bound, ref), speed >= bound,
            "%.2fx" % speed, [name, V])
  for block_name in blocks:
    if block_name.startswith("sweep") and (
        block_name.endswith("2048x1") or block_name.endswith("4096x1")):
      failed = [n for n, e in blocks[block_name]["results"].items()
                if "error" in e and e["family"] != "release"]
      add("every variant runs at %s" % block_name, not failed,
          "failed: %s" % failed if failed else "all ran", failed)
  if "sweep 4096x1" in blocks:
    ratio = _get(blocks, "sweep 4096x1", "R", "peak_ratio")
    total = _get(blocks, "sweep 4096x1", "R", "total_ratio")
    if ratio is not None:
      add("R peak memory <= 0.75x V at 4096", ratio <= 0.75,
          "step peak %.2fx V; with variables and slots %.2fx V" % (
              ratio, total), ["R", V])
  return checks


def _fmt(value, spec="%.2f", none="-"):
  return none if value is None else spec % value


def markdown(report: Dict) -> str:
  """The run as Markdown tables."""
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
      block_name = next((b for b in report["blocks"] if b in c["target"]),
                        None) or next(iter(report["blocks"]))
      if "4096" in c["target"]:
        block_name = "sweep 4096x1"
      for name in c["models"]:
        e = report["blocks"].get(block_name, {}).get("results", {}).get(name)
        if not e or "error" in e or (block_name, name) in seen:
          continue
        seen.add((block_name, name))
        key, unit = (("top_allocations", "MiB") if "memory" in c["target"]
                     else ("top_ops", "ms"))
        lines += ["### %s at %s (%s)" % (name, block_name, key), "",
                  "| op | %s | nodes |" % unit, "|---|---|---|"]
        for row in e[key]:
          lines.append("| `%s` | %s | %d |" % (row["op"], row[unit],
                                               row["count"]))
        lines.append("")
  return "\n".join(lines)


def plot(report: Dict, path: str) -> None:
  """Time and step peak memory against length (the sweep blocks)."""
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


def write(args, results: Dict, peaks: List[float], matmul_size: int,
          start: float, final: bool) -> None:
  """Writes the JSON, the Markdown and (if final) the plot."""
  peak = max(peaks)
  for block in results.values():  # MFU against the best measured peak
    for e in block["results"].values():
      if "mfu" in e:
        e["mfu"] = e["flops_per_step"] / e["step_s"] / peak
  report = {
      "machine": "%s, %s" % (platform.machine(), platform.processor() or
                             platform.platform()),
      "threads": args.threads, "tf_version": tf.__version__,
      "quick": args.quick, "complete": final, "matmul_size": matmul_size,
      "matmul_peak_flops": peak, "matmul_peak_flops_runs": peaks,
      "aliases": ALIASES, "blocks": results,
      "targets": check_targets(results),
      "runtime_s": time.perf_counter() - start,
      "command": " ".join(sys.argv),
  }
  with open(os.path.join(args.output_dir, "benchmark.json"), "w") as f:
    json.dump(report, f, indent=1)
  with open(os.path.join(args.output_dir, "benchmark.md"), "w") as f:
    f.write(markdown(report))
  if not args.no_plot:
    plot(report, os.path.join(args.output_dir, "benchmark.png"))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="tiny model, short lengths, 1-2 rounds")
  parser.add_argument("--output_dir", default="runs/benchmark")
  parser.add_argument("--lengths", default=None,
                      help="comma-separated sweep lengths ('' for none)")
  parser.add_argument("--no_enc_dec", action="store_true",
                      help="skip the encoder-decoder block")
  parser.add_argument("--no_reference", action="store_true",
                      help="skip the reference block (all variants)")
  parser.add_argument("--variants", default=None,
                      help="comma-separated subset of the sweep variants")
  parser.add_argument("--no_plot", action="store_true")
  parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
  args = parser.parse_args(argv)
  tf.logging.set_verbosity(tf.logging.ERROR)
  lengths = None
  if args.lengths is not None:
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
  blocks = plan(args.quick, lengths, not args.no_enc_dec)
  if args.no_reference:
    blocks = [b for b in blocks if not b.name.startswith("reference")]
  if args.variants:
    subset = args.variants.split(",")
    blocks = [dataclasses.replace(b, variants=[
        v for v in b.variants if v in subset or v == V]) for b in blocks]
  os.makedirs(args.output_dir, exist_ok=True)
  start = time.perf_counter()

  def log(message):
    print("[%6.0fs] %s" % (time.perf_counter() - start, message), flush=True)

  matmul_size = 512 if args.quick else 2048
  peaks = [bench_lib.matmul_peak_flops(matmul_size, threads=args.threads)]
  log("matmul peak %.1f GFLOP/s" % (peaks[0] / 1e9))
  results = {}
  for block in blocks:
    log("%s: %d models" % (block.name, len(block.variants)))
    results[block.name] = run_block(block, peaks[0], log)
    write(args, results, peaks, matmul_size, start, final=False)
  peaks.append(bench_lib.matmul_peak_flops(matmul_size, threads=args.threads))
  log("matmul peak at the end %.1f GFLOP/s" % (peaks[-1] / 1e9))
  write(args, results, peaks, matmul_size, start, final=True)
  log("wrote %s" % args.output_dir)
  return 0


if __name__ == "__main__":
  # TF1 graph semantics for the whole run, as the stock CLI uses. Not done at
  # import: the tests import this module beside eager-mode tests.
  bench_lib.tf.disable_v2_behavior()
  sys.exit(main())
