# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Speed and memory of the PyTorch Synthesizer against transformers' T5.

Every variant of the attention table (`mtf_synthesizer/attentions.py`:
V, R, Fix, FR, D, FD and the mixtures) as a
`MtfSynthesizerForConditionalGeneration`, and transformers' own
`T5ForConditionalGeneration` (label "T5") as the baseline, at the same dims
and attention implementation, side by side in one process. For each model:

  * training steps/s: forward, backward and AdamW step (fused where the
    device has it), the `labels=` loss, `use_cache=False`, dropout on; bf16
    autocast on CUDA, float32 on CPU;
  * greedy `generate()` new tokens/s with the cache (every row generates
    exactly `new_tokens` tokens);
  * peak memory of a training step: on CUDA `torch.cuda.max_memory_allocated`
    with only that model (its weights, gradients and optimizer state) on the
    device; on CPU torch keeps no allocator statistics, so none is given
    ("n/a"); the state (weights, buffers, optimizer moments) is given on
    every device;
  * saved activations, on every device: the bytes one training forward
    saves for its backward (`saved_activation_bytes`: the tensors autograd
    packs, counted once per storage, the model's own weights left out), the
    memory effect of an attention path without a GPU;
  * operator calls, on every device: the ATen operators one training
    forward and backward dispatch (`training_operator_calls`), and one
    greedy `generate()` per decoding step (`decode_operator_calls`), views
    included: the host's share of the work, what an eager step pays where
    its kernels are too small to hide the dispatch (a GPU's decoding steps;
    its training steps at T5-base dims), the same at every run on a kind
    of device (CUDA's and the CPU's paths differ where their kernels do);
  * model-FLOPs utilization (MFU), on every device: the FLOPs of a
    training step's matmuls counted from the dims (`training_flops`) per
    second of the median step, over the device's matmul peak that the same
    run measures (`matmul_peak`: a square matmul, bf16 on CUDA, float32 on
    a CPU);
  * optionally (`Settings.profile_dir`) where one training step's and one
    `generate()`'s time goes: `torch.profiler`'s table of operators (and
    CUDA kernels) per model, with the count of what they launched.

The models take turns in rounds (each round: every model's timed training
steps, then its timed `generate()` calls), so a change of the machine's load
falls on all of them; a figure is the median over the rounds' timings, and
ratios are to T5 and to V (the dot product inside the Synthesizer's
attention, T5's math in the export's layout).

The model code is loaded from the checkout by its path, without importing
the `mtf_synthesizer` package (which imports TensorFlow): this module needs
only torch and transformers, and runs on a machine without TensorFlow.

The work is split by job, each a module of `workbench/pytorch/`: `models`
(the dims, presets and settings, the variants, `build_model`), `measure`
(a training step, a `generate()`, memory, saved activations, operator
counts, the matmul peak), `flops` (a training step's FLOPs), `profiling`
(`torch.profiler`'s tables) and `report` (the report and its markdown);
this module runs the rounds (`run`) and is the entry that
tools/benchmark_torch.py and the tests use: the public names below are
theirs.
"""

import contextlib
import statistics
from typing import (Any, Callable, ContextManager, Dict, List, Optional,
                    Sequence)

import torch

from workbench.pytorch import flops
from workbench.pytorch import measure
from workbench.pytorch import models as bench_models
from workbench.pytorch import profiling
from workbench.pytorch import report as reporting

# The benchmark's public names, where tools and tests find them.
T5 = bench_models.T5
V = bench_models.V
ATTN_IMPLEMENTATIONS = bench_models.ATTN_IMPLEMENTATIONS
Dims = bench_models.Dims
PRESETS = bench_models.PRESETS
Settings = bench_models.Settings
load_model_code = bench_models.load_model_code
variants = bench_models.variants
model_labels = bench_models.model_labels
build_model = bench_models.build_model
resolve_device = measure.resolve_device
device_name = measure.device_name
saved_activation_bytes = measure.saved_activation_bytes
OperatorCount = measure.OperatorCount
training_operator_calls = measure.training_operator_calls
decode_operator_calls = measure.decode_operator_calls
matmul_peak = measure.matmul_peak
training_flops = flops.training_flops
profile_path = profiling.profile_path
write_profile = profiling.write_profile
markdown = reporting.markdown
MIB = reporting.MIB


def _split(total: int, parts: int) -> List[int]:
  """`total` as `parts` near-equal counts (the first ones larger)."""
  return [total // parts + (i < total % parts) for i in range(parts)]


# Graphs torch.compile may make of one model in a run with `compile`: its
# training forward, its decoding step (static cache), and their
# recompilations; compiled block by block, the encoder's and the decoder's
# blocks (the first with its relative table), in training and in
# inference, and, in transformers' T5, each layer of its cache, all
# through one code object (transformers' GradientCheckpointingLayer
# .__call__) that every model shares.
COMPILED_GRAPHS_PER_MODEL = 16


def _graph_room(settings: Settings, models: int) -> ContextManager[Any]:
  """Room in dynamo's cache for every model's graphs, when compiling.

  The models share their classes' code, and dynamo keeps at most
  `recompile_limit` (8) graphs per code object, a limit meant for one
  model's recompilations: past it, the later models would run eagerly.

  Args:
    settings: `compile` says whether anything is compiled.
    models: how many models the run measures.

  Returns:
    A context manager.
  """
  if not settings.compile:
    return contextlib.nullcontext()
  dynamo_config = torch._dynamo.config  # pylint: disable=protected-access
  return dynamo_config.patch(
      recompile_limit=max(dynamo_config.recompile_limit,
                          COMPILED_GRAPHS_PER_MODEL * models))


def run(dims: Dims, settings: Settings,
        models: Optional[Sequence[str]] = None,
        command: Optional[str] = None,
        log: Any = None,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None
        ) -> Dict[str, Any]:
  """Measures the models side by side; returns the report.

  A model that fails (out of memory, say) is reported with its error and
  what it measured before; the others go on.

  Args:
    dims: the sizes, the same for every model.
    settings: what to measure and how.
    models: labels ("T5", "V", "R", "D+V", ...; default every model). T5
      and V are always measured (the ratios' references).
    command: the command line, recorded in the report.
    log: a file for progress lines (e.g. sys.stderr), or None.
    progress: called with the report so far after each round (so that a
      run stopped later keeps what it measured).

  Returns:
    A JSON-serializable dict: "device", "torch", "transformers", "date",
    "commit" (of the checkout), "dims", "settings", "command",
    "matmul_peak" (`matmul_peak`'s, the faster of its two runs), and
    "results", one dict per model in order: label, components, params,
    step_s, train_steps_per_s, generate_tokens_per_s, peak_bytes (None on
    CPU), saved_bytes, state_bytes, train_ops, decode_ops_per_step,
    train_flops (per step) and train_flops_terms (`training_flops`), mfu
    (train_flops / step_s / the matmul peak), loss (first and last), error
    (None, or why the model stopped), and the ratios *_vs_t5 and *_vs_v.
  """
  if settings.attn_implementation not in ATTN_IMPLEMENTATIONS:
    raise ValueError("attn_implementation must be one of %s, got %r" % (
        ATTN_IMPLEMENTATIONS, settings.attn_implementation))
  if settings.steps < 1 or settings.rounds < 1:
    raise ValueError("steps and rounds must be at least 1")
  known = model_labels()
  wanted = list(known) if not models else list(models)
  unknown = [m for m in wanted if m not in known]
  if unknown:
    raise ValueError("unknown models %s (known: %s)" % (
        unknown, ", ".join(known)))
  labels = [m for m in known if m in set(wanted) | {T5, V}]
  components = dict(variants())
  device = resolve_device(settings.device)
  if settings.threads:
    torch.set_num_threads(settings.threads)
  # On CUDA only the model being measured is on the device: its peak is its
  # own, and models that do not fit side by side still run.
  offload = device.type == "cuda"
  rounds = min(settings.rounds, settings.steps)
  # The denominator of the model-FLOPs utilization, before any model is on
  # the device (and again after the rounds: the faster of the two).
  peak = measure.matmul_peak(device)

  def say(message):
    if log is not None:
      print(message, file=log, flush=True)

  generator = torch.Generator().manual_seed(settings.seed)
  ids = lambda length: torch.randint(  # pylint: disable=g-long-lambda
      2, dims.vocab_size, (dims.batch, length), generator=generator)
  batch = {"input_ids": ids(dims.input_length),
           "attention_mask": torch.ones(dims.batch, dims.input_length,
                                        dtype=torch.long),
           "labels": ids(dims.target_length)}
  batch = {k: v.to(device) for k, v in batch.items()}
  inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}

  with _graph_room(settings, len(labels)):
    entries = []
    for label in labels:
      say("building %s" % label)
      model = build_model(label, dims, settings.attn_implementation,
                          settings.seed, settings.dropout_rate,
                          settings.relative_bias)
      if not offload:
        model.to(device)
      optimizer = measure.make_optimizer(model, settings.learning_rate)
      forward = model
      if settings.compile and settings.compile_scope == "model":
        forward = torch.compile(model)
      elif settings.compile:
        measure.compile_blocks(model)
      entry = measure.Entry(label, components.get(label, ()), model,
                            optimizer, forward)
      entry.train_flops = flops.training_flops(dims, entry.components,
                                               model.config)
      entries.append(entry)

    step_counts = _split(settings.steps, rounds)
    generate_counts = _split(settings.generate_repeats, rounds)
    for r in range(rounds):
      for entry in entries:
        if entry.error is None:
          try:
            _measure_round(entry, r, settings, step_counts[r],
                           generate_counts[r], batch, inputs, dims, device,
                           offload)
          except (RuntimeError, torch.OutOfMemoryError) as e:
            entry.error = "round %d: %s" % (r + 1, str(e).splitlines()[0][:300])
            entry.optimizer.zero_grad(set_to_none=True)
            if offload:
              measure.move(entry.model, entry.optimizer, torch.device("cpu"))
              torch.cuda.empty_cache()
        say("round %d/%d %-5s %s" % (
            r + 1, rounds, entry.label,
            "failed: %s" % entry.error if entry.error else
            "step %.4f s (median so far)" % statistics.median(entry.step_s)))
      if progress is not None:
        progress(reporting.make_report(entries, dims, settings, rounds,
                                       device, command, peak))
    again = measure.matmul_peak(device)
    if again["flops_per_s"] > peak["flops_per_s"]:
      peak = again
    return reporting.make_report(entries, dims, settings, rounds, device,
                                 command, peak)


def _measure_round(entry: measure.Entry, r: int, settings: Settings,
                   steps: int, generate_calls: int,
                   batch: Dict[str, torch.Tensor],
                   inputs: Dict[str, torch.Tensor], dims: Dims,
                   device: torch.device, offload: bool) -> None:
  """One model's turn in round r: its steps and generate() calls."""
  if offload:
    measure.sync(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    measure.move(entry.model, entry.optimizer, device)
  if r == 0:
    # Counted on the eager model (compiled blocks would hide the operators
    # and saved tensors, and compile inside the count).
    with torch.compiler.set_stance("force_eager"):
      entry.saved_bytes = measure.saved_activation_bytes(entry.model, batch,
                                                         device)
      entry.train_ops = measure.training_operator_calls(entry.model, batch,
                                                        device)
  # Untimed: the warmup before the first round; after a move, one step.
  warm = settings.warmup if r == 0 else int(offload)
  for _ in range(warm):
    measure.train_step(entry, batch, device)
  for _ in range(steps):
    entry.step_s.append(measure.train_step(entry, batch, device))
  if offload:
    measure.sync(device)
    peak = torch.cuda.max_memory_allocated(device) - base
    entry.peak_bytes = max(entry.peak_bytes or 0, peak)
  if settings.generate_repeats and r == 0:
    seconds, _ = measure.generate(  # warmup (and compilation)
        entry.model, inputs, dims, device, settings.cache_implementation,
        compiled=settings.compiles_generate)
    entry.first_generate_s = seconds
    with torch.compiler.set_stance("force_eager"):
      entry.decode_ops_per_step = measure.decode_operator_calls(
          entry.model, inputs, dims, device)
  for _ in range(generate_calls):
    seconds, tokens = measure.generate(entry.model, inputs, dims, device,
                                       settings.cache_implementation,
                                       compiled=settings.compiles_generate)
    entry.generate_s.append(seconds)
    entry.generated = tokens
  if settings.profile_dir and r == 0:
    profiling.write_profile(entry, batch, inputs, dims, device, settings)
  if offload:
    measure.move(entry.model, entry.optimizer, torch.device("cpu"))
    torch.cuda.empty_cache()
