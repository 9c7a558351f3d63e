# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Runs of the speed and memory benchmark, block by block.

All models of one data shape (a `Block`) are built in this process (one graph
and session each), then timed in interleaved rounds: each round runs K
training steps of every model, in a rotated order, and each model's time is
divided by the reference's (mesh's SelfAttention) time of the same round.
Reported ratios are the medians over rounds of these per-round ratios.
`benchmarking` builds the models and says what is measured;
`benchmark_report` writes the report.
"""

from concurrent import futures
import dataclasses
import multiprocessing
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow.compat.v1 as tf

from workbench import benchmark_memory
from workbench import benchmark_trace
from workbench import benchmarking

V = benchmarking.REFERENCE
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


def memory_groups(estimates: Dict[str, benchmark_memory.MemoryEstimate],
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
  reason = benchmark_memory.memory_skip_reason(ref, budget)
  if reason:
    return [], [], {name: (reason if name == V else
                           "not run: the reference %s " % V + reason)
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
      reason = benchmark_memory.memory_skip_reason(estimate, budget)
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
          peak_step_bytes=benchmark_trace.peak_step_bytes(trace),
          top_ops=benchmark_trace.top_ops(trace),
          traced_op_ms=benchmark_trace.traced_op_ms(trace),
          top_allocations=benchmark_trace.top_allocations(trace))
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
  (benchmark_memory.estimate_memory) exceeds the budget. The others are timed
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
      benchmark_memory.memory_budget_bytes().
    on_progress: called with the block's entry after each group and each
      model timed apart (so that a report can be written as it goes).

  Returns:
    The block's entry of the report; "results" maps each variant to its
    numbers, its "error" or why it was "skipped".
  """
  if memory_budget is None:
    memory_budget = benchmark_memory.memory_budget_bytes()
  by_name = {v.name: v for v in benchmarking.all_variants()}
  results: Dict[str, Dict] = {}
  estimates = {}
  for name in [V] + [n for n in block.variants if n != V]:
    variant = by_name[name]
    estimate = benchmark_memory.estimate_memory(variant, block.shape, block.run)
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
        results[name]["error"] = "not run: the reference %s did not run" % V
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
      log("  the reference %s failed: %s" % (V, results[V]["error"]))
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


def run_all(blocks: Sequence[Block], log: Log, memory_budget: int,
            threads: int, quick: bool,
            on_progress: Callable[[Dict, List[float], int], None]
            ) -> Tuple[Dict, List[float], int]:
  """Runs every block, with the matmul peak measured before and after.

  Args:
    blocks: the blocks (`plan`).
    log: the log.
    memory_budget: bytes a memory group may take.
    threads: the sessions' threads.
    quick: a quick run (a smaller matmul for the peak).
    on_progress: called with (results by block name, peaks, matmul size)
      after every memory group and at the end of each block.

  Returns:
    (results by block name, matmul peaks in FLOP/s, the matmul's size).
  """
  matmul_size = 512 if quick else 2048
  peaks = [benchmark_trace.matmul_peak_flops(matmul_size, threads=threads)]
  log("matmul peak %.1f GFLOP/s; memory budget %s" % (
      peaks[0] / 1e9, benchmark_memory.gib(memory_budget)))
  results = {}
  for block in blocks:
    log("%s: %d models" % (block.name, len(block.variants)))

    def progress(info, name=block.name):
      results[name] = info
      on_progress(results, peaks, matmul_size)

    progress(run_block(block, peaks[0], log, memory_budget=memory_budget,
                       on_progress=progress))
  peaks.append(benchmark_trace.matmul_peak_flops(matmul_size, threads=threads))
  log("matmul peak at the end %.1f GFLOP/s" % (peaks[-1] / 1e9))
  return results, peaks, matmul_size
