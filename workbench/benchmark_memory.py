# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A benchmark model's memory, from its shapes alone, and the budget.

Before a model is built, `estimate_memory` computes from the shapes alone
its largest tensor and an estimate of its memory (variables that grow with
the length, and the training step's peak); `memory_skip_reason` says why a
model would not fit a memory budget (`memory_budget_bytes`), so that the
runner skips it with that figure instead of running out of memory. The
models are `benchmarking`'s.
"""

import dataclasses
import os
from typing import List, Optional, Tuple

from workbench import benchmarking

Candidate = benchmarking.Candidate
ModelShape = benchmarking.ModelShape
RunShape = benchmarking.RunShape


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
  """A model's memory, computed from its shapes before it is built.

  Attributes:
    largest: the largest tensor, e.g. "attention logits [batch 1, heads 8,
      8192, 8192] float32".
    largest_bytes: its size.
    state_bytes: the variables that grow with the length (R's tables), which
      stay allocated while the model is built.
    step_bytes: the training step's peak: the live logits-sized tensors of
      every attention layer (Candidate.live_logits) plus the per-token
      activations.
  """
  largest: str
  largest_bytes: int
  state_bytes: int
  step_bytes: int

  @property
  def total_bytes(self) -> int:
    """state_bytes + step_bytes: what the model needs while it steps."""
    return self.state_bytes + self.step_bytes


_FLOAT32 = 4


def _attention_stacks(variant: Candidate, shape: ModelShape, run: RunShape
                     ) -> List[Tuple[str, int, int, int, float, int]]:
  """(what, layers, queries, memory, live logits, tables) of each stack."""
  length = run.length
  target = run.target_length or run.length
  ours = ("attention logits", variant.memory_length, variant.live_logits,
          variant.position_tables)
  mesh = ("attention logits", None, benchmarking.LIVE_LOGITS_MESH, 0)

  def stack(kind, layers, queries, memory=None):
    what, own_memory, live, tables = kind
    return (what, layers, queries, memory or own_memory or queries, live,
            tables)

  if not shape.encoder_layers:
    return [stack(ours, shape.num_layers, length)]
  return [
      stack(ours, shape.encoder_layers, length),
      stack(mesh if variant.mesh_decoder else ours, shape.num_layers,
            target),
      stack(("encoder-decoder attention logits", None,
             benchmarking.LIVE_LOGITS_MESH, 0),
            shape.num_layers, target, length)]


def estimate_memory(variant: Candidate, shape: ModelShape,
                    run: RunShape) -> MemoryEstimate:
  """A model's largest tensor and memory, from its shapes (nothing is built).

  Every attention layer with logits holds Candidate.live_logits float32
  tensors of [batch, heads, queries, memory] at the step's peak; R's tables
  ([heads, N, N] per layer, N the longest sequence) are state. The
  per-token activations (feed-forward, projections, the softmax over the
  vocabulary) are added as 8 float32 tensors of [batch, length, d_model],
  2 of [batch, length, d_ff] and 3 of [batch, length, vocab] per layer.

  Args:
    variant: the attention variant.
    shape: the model.
    run: the data shape.

  Returns:
    A MemoryEstimate.
  """
  batch, heads = run.batch, shape.num_heads
  n = max(run.length, run.target_length or 0)
  candidates = []
  state = step = 0
  for what, layers, queries, memory, live, tables in _attention_stacks(
      variant, shape, run):
    logits = _FLOAT32 * batch * heads * queries * memory
    if live:
      candidates.append((logits, "%s [batch %d, heads %d, %d, %d] float32" % (
          what, batch, heads, queries, memory)))
      step += int(live * layers * logits)
    if tables:
      table = _FLOAT32 * heads * n * n
      candidates.append((table, "R [heads %d, %d, %d] float32" % (
          heads, n, n)))
      state += tables * layers * table
    per_token = _FLOAT32 * batch * queries * (
        8 * shape.d_model + 2 * shape.d_ff + 3 * shape.vocab)
    step += layers * per_token
    widest = max(shape.d_ff, shape.vocab)
    candidates.append((_FLOAT32 * batch * queries * widest,
                       "activations [batch %d, %d, %d] float32" % (
                           batch, queries, widest)))
  size, largest = max(candidates)
  return MemoryEstimate(largest=largest, largest_bytes=size,
                        state_bytes=state, step_bytes=step)


def available_memory_bytes() -> int:
  """Memory available for new allocations now (MemAvailable, else free)."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def memory_budget_bytes(fraction: float = 0.75) -> int:
  """A fraction of this machine's RAM, at most the memory available now.

  Other processes on a shared machine hold memory too: the budget is the
  smaller of `fraction` of the physical memory (os.sysconf) and what is
  available when it is called (the start of the run).

  Args:
    fraction: of the total RAM, in (0, 1].

  Returns:
    Bytes.
  """
  total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  return int(min(fraction * total, available_memory_bytes()))


def gib(size: float) -> str:
  """Bytes as "1.5 GiB" (or MiB below one GiB)."""
  if size >= 2 ** 30:
    return "%.1f GiB" % (size / 2.0 ** 30)
  return "%.0f MiB" % (size / 2.0 ** 20)


def memory_skip_reason(estimate: MemoryEstimate, budget: int,
                       resident: int = 0) -> Optional[str]:
  """Why a model would not fit the memory budget, or None if it fits.

  Args:
    estimate: the model's, from estimate_memory.
    budget: bytes the benchmark may use (memory_budget_bytes).
    resident: bytes that stay allocated beside it (the reference model's
      state).

  Returns:
    A sentence with the analytic sizes, or None.
  """
  need = estimate.total_bytes + resident
  if need <= budget:
    return None
  return ("would not fit in memory: largest tensor %s = %s; estimated %s "
          "(step peak %s + length-dependent variables %s%s) > budget %s" % (
              estimate.largest, gib(estimate.largest_bytes), gib(need),
              gib(estimate.step_bytes), gib(estimate.state_bytes),
              " + the reference's %s" % gib(resident) if resident else "",
              gib(budget)))
