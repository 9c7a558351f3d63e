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

from concurrent import futures
import dataclasses
import json
import multiprocessing
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow.compat.v1 as tf

from workbench import benchmarking

V = benchmarking.VANILLA
ModelShape = benchmarking.ModelShape
RunShape = benchmarking.RunShape


def sweep_variants() -> List[str]:
  """The length sweep's variants: the table's, some release's, baselines."""
  return (benchmarking.table_names() +
          ["release:" + m for m in benchmarking.SWEEP_RELEASE_MODES] +
          benchmarking.baseline_names())


def enc_dec_variants() -> List[str]:
  """The variants timed at the encoder(-decoder) shapes: table, baselines."""
  return benchmarking.table_names() + benchmarking.baseline_names()


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
    optimizer: the training step's optimizer, a key of
      benchmarking.OPTIMIZERS (every model of the block uses it).
  """
  name: str
  shape: benchmarking.ModelShape
  run: benchmarking.RunShape
  variants: Sequence[str]
  rounds: int
  steps: int
  decode: Optional[Sequence[int]] = None
  decode_rounds: int = 3
  optimizer: str = benchmarking.DEFAULT_OPTIMIZER


# The sweep's lengths; LONG_LENGTH is added by plan(long=True).
SWEEP_LENGTHS = (128, 256, 512, 1024, 2048, 4096)
LONG_LENGTH = 8192


def plan(quick: bool, lengths: Optional[Sequence[int]], enc_dec: bool,
         encoder: bool = True, long: bool = False) -> List[Block]:
  """The blocks of a full or quick run.

  Args:
    quick: tiny shapes, 1-2 rounds.
    lengths: the sweep's lengths; None for the default ones.
    enc_dec: add the encoder-decoder block.
    encoder: add the encoder-only blocks (where Linformer runs).
    long: add LONG_LENGTH to the sweep (its own block; slow: a training
      step of V takes tens of seconds there).

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
                          rounds=2, steps=1, decode=(1, 3), decode_rounds=1))
    if encoder:
      blocks.append(Block(
          "encoder-only 64x2", dataclasses.replace(shape, causal=False),
          benchmarking.RunShape(64, 2), enc_dec_variants(), rounds=1,
          steps=1))
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
  lengths = list(lengths if lengths is not None else SWEEP_LENGTHS)
  if long and LONG_LENGTH not in lengths:
    lengths.append(LONG_LENGTH)
  # Longest first (the memory targets are at the longest); results are
  # written after each block, so an interrupted run keeps what it measured.
  for length in sorted(lengths, reverse=True):
    # At LONG_LENGTH each decode's first pass over the sequence takes as
    # long as a training step: decoding is timed up to the sweep's end.
    blocks.append(Block("sweep %dx1" % length, shape,
                        benchmarking.RunShape(length, 1), sweep_variants(),
                        # 3 rounds at LONG_LENGTH: there the first round
                        # of a model alone can be slower by half (its
                        # allocator's pool still growing); the median
                        # leaves it out.
                        rounds=2 if 2048 <= length < LONG_LENGTH else 3,
                        steps=1 if length > 256 else 2,
                        decode=(1, 17) if length < LONG_LENGTH else None,
                        decode_rounds=2 if length >= 2048 else 3))
  if encoder:
    encoder_only = dataclasses.replace(shape, causal=False)
    blocks.append(Block("encoder-only 512x4", encoder_only,
                        benchmarking.RunShape(512, 4), enc_dec_variants(),
                        rounds=2, steps=1))
    blocks.append(Block("encoder-only 2048x1", encoder_only,
                        benchmarking.RunShape(2048, 1), enc_dec_variants(),
                        rounds=2, steps=1))
  if enc_dec:
    t5_small = dataclasses.replace(shape, num_layers=6, encoder_layers=6)
    blocks.append(Block("T5-small enc-dec 512x2->128", t5_small,
                        benchmarking.RunShape(512, 2, target_length=128),
                        enc_dec_variants(), rounds=2, steps=1))
  return blocks


def _median(values: Sequence[float]) -> Optional[float]:
  values = [v for v in values if v is not None]
  return statistics.median(values) if values else None


def _first_message(e: Exception) -> str:
  message = str(e).strip().splitlines()
  return "%s: %s" % (type(e).__name__, message[0][:300] if message else "")


def memory_groups(estimates: Dict[str, benchmarking.MemoryEstimate],
                  budget: int
                  ) -> Tuple[List[List[str]], List[str], Dict[str, str]]:
  """Splits a block's models into groups that fit in memory beside V.

  Each group is built with V in a process of its own and timed in rounds
  with V. A group fits when V's and its models' length-dependent variables
  plus all their step peaks are within the budget: the steps run one at a
  time, but TF's CPU allocator keeps a pool that does not reliably reuse
  one model's freed step memory for another's (an 8192 x 1 group whose
  largest step was estimated at 16.5 GiB was killed at 24 GB), so the
  steps are counted in full. First fit, in the block's order. A model that
  fits alone but not beside V is timed apart, in a process of its own; one
  that does not fit even alone is skipped.

  Args:
    estimates: the models' MemoryEstimates by name, V's included.
    budget: bytes.

  Returns:
    (groups of names without V, names timed apart from V, {name: why it is
    skipped}).
  """
  ref = estimates[V]
  reason = benchmarking.memory_skip_reason(ref, budget)
  if reason:
    return [], [], {name: (reason if name == V else
                           "not run: the reference V " + reason)
                    for name in estimates}

  def fits(members):
    members = members + [ref]
    return sum(e.total_bytes for e in members) <= budget

  groups: List[List[str]] = []
  apart: List[str] = []
  skipped = {}
  for name, estimate in estimates.items():
    if name == V:
      continue
    if not fits([estimate]):
      reason = benchmarking.memory_skip_reason(estimate, budget)
      if reason:
        skipped[name] = reason
      else:
        apart.append(name)
      continue
    for group in groups:
      if fits([estimates[n] for n in group] + [estimate]):
        group.append(name)
        break
    else:
      groups.append([name])
  return groups, apart, skipped


def _build(variant: benchmarking.Candidate, block: Block, entry: Dict,
           log: Callable[[str], None]
           ) -> Optional[benchmarking.BuiltModel]:
  """Builds and warms up one model; records its error, returns None."""
  start = time.perf_counter()
  decode = bool(block.decode)
  optimizer = benchmarking.OPTIMIZERS[block.optimizer]
  try:
    try:
      model = benchmarking.build_model(
          variant, block.shape, block.run, decode=decode,
          optimizer=optimizer)
    except Exception as e:  # pylint: disable=broad-except
      if not decode:
        raise
      # It may train without decoding: time the training step alone.
      entry["decode_error"] = _first_message(e)
      decode = False
      model = benchmarking.build_model(variant, block.shape, block.run,
                                       optimizer=optimizer)
    model.train(1)  # warm-up; also fails here if the layer cannot run
  except Exception as e:  # pylint: disable=broad-except
    entry["error"] = _first_message(e)
    log("  %-26s FAILS (%s)" % (variant.name, entry["error"][:120]))
    return None
  if decode:
    try:
      for steps in block.decode:
        model.decode(steps)
    except Exception as e:  # pylint: disable=broad-except
      entry["decode_error"] = _first_message(e)
      decode = False
  entry["decodes"] = decode
  entry.update(params=model.num_params, flops_per_step=model.flops,
               state_bytes=model.state_bytes,
               build_s=round(time.perf_counter() - start, 2))
  log("  %-26s built in %.1fs%s" % (
      variant.name, entry["build_s"],
      "" if decode or not block.decode else " (decoding fails: %s)" %
      entry.get("decode_error", "")[:80]))
  return model


def _time_group(block: Block, models: Dict[str, benchmarking.BuiltModel],
                entries: Dict[str, Dict], times: Dict[str, List],
                log: Callable[[str], None]) -> None:
  """Interleaved training (and decoding) rounds of V and one group.

  Appends (model time, V's time in the same round) pairs to
  times[name]["train"] and ["decode"]; V's time is None for a model timed
  apart from V (models without V).
  """
  names = list(models)
  for r in range(block.rounds):
    order = names[r % len(names):] + names[:r % len(names)]
    measured = {name: models[name].train(block.steps) for name in order}
    for name in names:
      times[name]["train"].append((measured[name], measured.get(V)))
    log("  round %d/%d: %s %.3fs/step" % (r + 1, block.rounds, names[0],
                                         measured[names[0]]))
  if not block.decode:
    return
  short, long_ = block.decode
  decoding = [n for n in names if entries[n].get("decodes")]
  if not decoding or (V in models and V not in decoding):
    return  # nothing to decode, or no reference to compare with
  for r in range(block.decode_rounds):
    order = decoding[r % len(decoding):] + decoding[:r % len(decoding)]
    measured = {}
    for name in order:
      t_long = models[name].decode(long_)
      t_short = models[name].decode(short)
      # Under heavy load the difference can be <= 0: not a measurement.
      diff = t_long - t_short
      measured[name] = diff if diff > 0 else None
    for name in decoding:
      times[name]["decode"].append((measured[name], measured.get(V)))
  log("  decoding: %d rounds done" % block.decode_rounds)


class Log:
  """Prints progress lines stamped with the seconds since `start`.

  Picklable, so that the processes that time the models (run_block) print
  on the same clock as the tool.
  """

  def __init__(self, start: Optional[float] = None, quiet: bool = False):
    self.start = time.monotonic() if start is None else start
    self.quiet = quiet

  def __call__(self, message: str) -> None:
    if not self.quiet:
      print("[%6.0fs] %s" % (time.monotonic() - self.start, message),
            flush=True)


def _run_phase(block: Block, names: Sequence[str], with_reference: bool,
               log: Log) -> Tuple[Dict[str, Dict], Dict[str, Dict]]:
  """Builds, times in rounds and traces V (if asked) and `names` together.

  Runs in a process of its own (run_block), so that the memory of the
  models is returned when it ends.

  Returns:
    ({name: entry fields}, {name: {"train": [(time, V's time in the same
    round or None)], "decode": [...]}}) for the models that were built.
  """
  tf.disable_v2_behavior()
  tf.logging.set_verbosity(tf.logging.ERROR)
  by_name = {v.name: v for v in benchmarking.all_variants()}
  order = ([V] if with_reference else []) + list(names)
  entries = {name: {} for name in order}
  models = {}
  for name in order:
    model = _build(by_name[name], block, entries[name], log)
    if model is None and name == V:
      break  # nothing to compare with
    if model is not None:
      models[name] = model
  times = {name: {"train": [], "decode": []} for name in models}
  if models and (V in models or not with_reference):
    _time_group(block, models, entries, times, log)
    for name, model in models.items():
      trace = model.trace_train()
      entries[name].update(
          peak_step_bytes=benchmarking.peak_step_bytes(trace),
          top_ops=benchmarking.top_ops(trace),
          traced_op_ms=benchmarking.traced_op_ms(trace),
          top_allocations=benchmarking.top_allocations(trace))
  for model in models.values():
    model.close()
  return entries, times


def in_own_process(function: Callable, names: Sequence[str], *args
                   ) -> Tuple[object, Optional[str]]:
  """function(*args) in a new process (spawned: no state of this one).

  Args:
    function: picklable (a module-level function).
    names: the models it builds, for the message if it dies.
    *args: picklable arguments.

  Returns:
    (function's result, None), or (None, why) if the process died (killed
    by the OS when out of memory, or unable to import what it runs): only
    its own models are lost.
  """
  context = multiprocessing.get_context("spawn")
  try:
    with futures.ProcessPoolExecutor(1, mp_context=context) as pool:
      return pool.submit(function, *args).result(), None
  except futures.process.BrokenProcessPool:
    return None, ("the process that built %s ended abruptly (killed by the "
                  "OS, most likely out of memory, or it failed to start: "
                  "see the tool's output)" % ", ".join(names))


def _finalize(entry: Dict, times: Dict[str, List], block: Block,
              peak_flops: float, v_train: float, v_decode: Optional[float]
              ) -> None:
  """Adds a timed model's speeds and ratios to V to its entry.

  Ratios are medians over rounds of the per-round ratios; a model timed
  apart from V is compared with V's median over the block.
  """
  pairs = times["train"]
  ratios = [t / (tv or v_train) for t, tv in pairs]
  step_s = _median([t for t, _ in pairs])
  entry.update(
      step_s=step_s, step_s_rounds=[t for t, _ in pairs],
      steps_per_s=1.0 / step_s, tokens_per_s=block.run.tokens / step_s,
      time_ratio=_median(ratios),
      speed_vs_v=_median([1.0 / x for x in ratios]),
      flops_per_s=entry["flops_per_step"] / step_s,
      mfu=entry["flops_per_step"] / step_s / peak_flops)
  if block.decode:
    steps = block.decode[1] - block.decode[0]
    pairs = times["decode"]
    per_token = _median([t / steps for t, _ in pairs if t])
    entry.update(
        decode_tokens_per_s=block.run.batch / per_token if per_token
        else None,
        decode_speed_vs_v=_median([(tv or v_decode) / t for t, tv in pairs
                                   if t and (tv or v_decode)]))


def run_block(block: Block, peak_flops: float, log: Log,
              memory_budget: Optional[int] = None,
              on_progress: Optional[Callable[[Dict], None]] = None) -> Dict:
  """Builds, times and traces every model of one block.

  Models that cannot run in this block are not built and say why: a
  non-causal layer in a decoder-only LM, or a model whose estimated memory
  (benchmarking.estimate_memory) exceeds the budget. The others are timed
  in groups that fit in memory beside V (memory_groups; one group unless R's
  tables are large), each in interleaved rounds with V; models that fit
  only without V are timed apart, one at a time ("timed_apart": their
  ratios are to V's median time over the block, not to V's time in the
  same round). Each group, and each model timed apart, runs in a process
  of its own: TF's CPU allocator keeps its pool for the life of a process,
  so one process would hold the largest step of every model it built. A
  process killed by the OS costs only its own models, which say so.

  Args:
    block: what to run.
    peak_flops: the machine's matmul FLOP/s, for MFU.
    log: prints a progress line.
    memory_budget: bytes the models may use; None for
      benchmarking.memory_budget_bytes().
    on_progress: called with the block's entry after each group and each
      model timed apart (so that a report can be written as it goes).

  Returns:
    The block's entry of the report; "results" maps each variant to its
    numbers, its "error" or why it was "skipped".
  """
  if memory_budget is None:
    memory_budget = benchmarking.memory_budget_bytes()
  by_name = {v.name: v for v in benchmarking.all_variants()}
  results: Dict[str, Dict] = {}
  estimates = {}
  for name in [V] + [n for n in block.variants if n != V]:
    variant = by_name[name]
    estimate = benchmarking.estimate_memory(variant, block.shape, block.run)
    results[name] = {"family": variant.family, "mode": variant.mode,
                     "memory_estimate": dataclasses.asdict(estimate)}
    reason = benchmarking.not_causal_reason(variant, block.shape)
    if reason:
      results[name].update(skipped=reason, skip_kind="not causal")
      log("  %-26s skipped: %s" % (name, reason[:100]))
    else:
      estimates[name] = estimate
  groups, apart, too_big = memory_groups(estimates, memory_budget)
  for name, reason in too_big.items():
    results[name].update(skipped=reason, skip_kind="memory")
    log("  %-26s skipped: %s" % (name, reason))
  block_info = {"shape": dataclasses.asdict(block.shape),
                "model": block.shape.label,
                "run": dataclasses.asdict(block.run),
                "tokens_per_step": block.run.tokens, "rounds": block.rounds,
                "steps_per_round": block.steps,
                "decode_steps": list(block.decode) if block.decode else None,
                "memory_budget_bytes": memory_budget, "groups": groups,
                "timed_apart": apart, "results": results}
  if V in too_big:
    return block_info
  if len(groups) > 1:
    log("  %d memory groups: %s" % (len(groups), groups))
  phases = [(group, True) for group in groups or [[]]]
  phases += [([name], False) for name in apart]
  times = {name: {"train": [], "decode": []} for name in results}
  for index, (names, with_reference) in enumerate(phases):
    if not with_reference and names == apart[:1]:
      log("  timed apart from V, one process each: %s" % apart)
    if "step_s" not in results[V] and index:
      for name in names:
        results[name]["error"] = "not run: the reference V did not run"
      continue
    phase, died = in_own_process(_run_phase, names, block, names,
                                 with_reference, log)
    if phase is None:
      log("  " + died)
      for name in names + ([V] if with_reference and index == 0 else []):
        results[name]["error"] = died
      continue
    entries, phase_times = phase
    for name, fields in entries.items():
      if name == V and "step_s" in results[V]:
        fields = {k: v for k, v in fields.items() if k not in results[V]}
      results[name].update(fields)
    for name, measured in phase_times.items():
      times[name]["train"] += measured["train"]
      times[name]["decode"] += measured["decode"]
      if with_reference and name != V:
        results[name]["group"] = index
      if not with_reference:
        results[name]["timed_apart"] = True
    if index == 0 and V not in phase_times:
      if "error" not in results[V]:
        results[V]["error"] = "not timed"
      log("  the reference V failed: %s" % results[V]["error"])
      continue
    v_train = _median([t for t, _ in times[V]["train"]])
    v_decode = _median([t for t, _ in times[V]["decode"]])
    for name in [V] + [n for n in phase_times if n != V]:
      _finalize(results[name], times[name], block, peak_flops, v_train,
                v_decode)
      v_entry = results[V]
      results[name]["peak_ratio"] = (
          results[name]["peak_step_bytes"] / v_entry["peak_step_bytes"]
          if v_entry["peak_step_bytes"] > 0 else None)
      results[name]["total_bytes"] = (results[name]["peak_step_bytes"] +
                                      results[name]["state_bytes"])
      results[name]["total_ratio"] = (results[name]["total_bytes"] /
                                      v_entry["total_bytes"])
    if on_progress is not None:
      on_progress(block_info)
  return block_info


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
      label = "%s %s %s %.2fx V at %s" % (model, what, op, bound, block)
      value = entry.get(key)
      if value is not None:
        met = holds(value, bound)
        # Three digits where two would read as the bound itself.
        spec = "%.3f" if "%.2f" % value == "%.2f" % bound else "%.2f"
        detail = (spec + "x") % value
        if kind == "peak_ratio" and entry.get("total_ratio") is not None:
          detail = ("step peak " + spec + "x V; with variables and slots "
                    "%.2fx V") % (value, entry["total_ratio"])
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
          "ours (%s) %.2fx V, release %.2fx V" % (ours_name, ours, theirs),
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
           "Ratios are medians over rounds of per-round ratios to V (mesh's "
           "SelfAttention) in the same round, in the same process (models "
           "timed apart: to V's median over the block). speed = V time / model "
           "time (>1 is faster). GFLOP/s = the step's matmul FLOPs / its "
           "time; MFU = GFLOP/s / the matmul peak (how far the model is "
           "from the peak). Step peak = live bytes allocated by one "
           "training step (activations, gradients, temporaries); state = "
           "variables + Adafactor slots.", ""]
  for block_name, block in report["blocks"].items():
    decode = bool(block["decode_steps"])
    lines += ["## %s (%s; %d tokens/step; %d rounds x %d step)" % (
        block_name, block["model"], block["tokens_per_step"],
        block["rounds"], block["steps_per_round"]), ""]
    groups = block.get("groups") or []
    budget = benchmarking.gib(block.get("memory_budget_bytes", 0))
    if len(groups) > 1:
      lines += ["Timed in %d memory groups, each in rounds with V (memory "
                "budget %s): %s." % (
                    len(groups), budget,
                    "; ".join(", ".join(g) for g in groups)), ""]
    if block.get("timed_apart"):
      lines += ["Timed apart from V, each in a process of its own after "
                "V's groups (each fits in the memory budget, %s, alone but "
                "not beside V): %s. Their "
                "ratios are to V's median time over the block, not to V's "
                "time in the same round, so they are more exposed to "
                "changes of the machine's load." % (
                    budget, ", ".join(block["timed_apart"])), ""]
    header = ["model", "ms/step", "speed vs V", "tokens/s", "GFLOP/s",
              "MFU", "step peak MiB", "peak vs V", "state MiB", "params",
              "GFLOP/step"]
    if decode:
      header[4:4] = ["decode tok/s", "decode vs V"]
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
