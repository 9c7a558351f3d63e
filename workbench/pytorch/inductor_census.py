# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What inductor generates for one training step, model by model.

Each model of the PyTorch benchmark (transformers' T5, V, any variant) is
built at the given dims, compiled whole with inductor, and one training
step runs (forward with the loss, backward). Over every graph compiled for
it (dynamo's forward graphs and AOT autograd's backward ones) the census
counts what inductor wrote: its own kernels (the fused elementwise and
reduction work: `metrics.generated_kernel_count`), the calls of external
kernels in the generated code (matmuls and sdpa, which it does not fuse),
the IR nodes before fusion, and the bytes inductor estimates its own
kernels read and write (`GraphLowering.count_bytes`, what it logs as
"num_bytes_accessed"). Ratios to V show what a mixture adds beyond its own
matmuls: more kernels, more bytes moved, or more external calls.

The counts are the generated code's, not timings: they are the same on any
machine with the same torch, and a CPU's counts stand for a GPU's where
the two fuse alike (inductor fuses the same graph for both; a GPU's matmul
templates aside).
"""

import contextlib
import dataclasses
import logging
import re
from typing import Callable, Iterator, List, Optional, Sequence

import torch

from workbench.pytorch import models as bench_models

# Calls of kernels inductor does not generate, in its generated code.
_EXTERN_CALL = re.compile(
    r"\b(?:extern_kernels\.\w+|torch\.ops\.aten\.\w+\.\w+)\(")


@dataclasses.dataclass
class Census:
  """One model's compiled training step.

  Attributes:
    model: the label ("T5", "V", "D+V", ...).
    graphs: the compiled graphs (forward and backward).
    kernels: the kernels inductor generated.
    extern_calls: the calls of other kernels in the generated code.
    ir_nodes: inductor's IR nodes before fusion.
    bytes_accessed: the bytes its kernels read and write, as it estimates.
  """
  model: str
  graphs: int
  kernels: int
  extern_calls: int
  ir_nodes: int
  bytes_accessed: int


@contextlib.contextmanager
def _inductor_metrics() -> Iterator[None]:
  """Inductor's metrics on (its byte count runs only with them logged)."""
  # pylint: disable=protected-access
  logger = torch._logging.getArtifactLogger("torch._inductor.compile_fx",
                                            "inductor_metrics")
  level, propagate = logger.level, logger.propagate
  logger.setLevel(logging.INFO)
  logger.propagate = False  # counted, not printed
  try:
    yield
  finally:
    logger.setLevel(level)
    logger.propagate = propagate


def count(label: str, step: Callable[[], None]) -> Census:
  """Runs a step that compiles with inductor and counts what it wrote.

  Args:
    label: the name of what the step runs.
    step: a call of a `torch.compile`d function or model (and backward);
      compiled afresh (dynamo's caches are reset first).

  Returns:
    The Census of every graph compiled.
  """
  # pylint: disable-next=g-import-not-at-top
  from torch._inductor import metrics
  # pylint: disable-next=g-import-not-at-top
  from torch._inductor.utils import run_and_get_code

  torch._dynamo.reset()  # pylint: disable=protected-access
  metrics.reset()
  with _inductor_metrics():
    _, codes = run_and_get_code(step)
  return Census(
      model=label, graphs=len(codes),
      kernels=metrics.generated_kernel_count,
      extern_calls=sum(len(_EXTERN_CALL.findall(code)) for code in codes),
      ir_nodes=metrics.ir_nodes_pre_fusion,
      bytes_accessed=int(metrics.num_bytes_accessed))


def census(label: str, dims: bench_models.Dims,
           device: torch.device) -> Census:
  """Compiles one model's training step and counts what inductor wrote.

  Args:
    label: "T5" or a variant's label.
    dims: the sizes (`bench_models.Dims`).
    device: where it runs.

  Returns:
    The Census.
  """
  model = bench_models.build_model(label, dims, "sdpa").to(device)
  generator = torch.Generator().manual_seed(0)
  input_ids = torch.randint(2, dims.vocab_size,
                            (dims.batch, dims.input_length),
                            generator=generator).to(device)
  labels = torch.randint(2, dims.vocab_size, (dims.batch, dims.target_length),
                         generator=generator).to(device)
  compiled = torch.compile(model, backend="inductor")

  def step():
    compiled(input_ids=input_ids, labels=labels).loss.backward()

  return count(label, step)


def run(labels: Sequence[str], dims: bench_models.Dims, device: torch.device,
        say: Optional[Callable[[str], None]] = None) -> List[Census]:
  """The census of each model, in order.

  Args:
    labels: the models.
    dims: the sizes.
    device: where they run.
    say: progress messages, or None.

  Returns:
    One Census each.
  """
  results = []
  for label in labels:
    if say:
      say("compiling %s" % label)
    results.append(census(label, dims, device))
  return results


def markdown(results: Sequence[Census], dims: bench_models.Dims,
             device: torch.device) -> str:
  """The census as a table, each count also as its ratio to V's.

  Args:
    results: `run`'s.
    dims: the sizes they ran at.
    device: where.

  Returns:
    Markdown text.
  """
  reference = next((r for r in results if r.model == bench_models.V), None)
  fields = ("graphs", "kernels", "extern_calls", "ir_nodes",
            "bytes_accessed")

  def cell(result, field):
    value = getattr(result, field)
    if reference is None or not getattr(reference, field):
      return "%d" % value
    return "%d (%.2fx)" % (value, value / getattr(reference, field))

  lines = ["Inductor's code for one training step (forward with the loss, "
           "backward), %s; %s; torch %s." % (device.type, dims.describe(),
                                             torch.__version__), "",
           "| model | " + " | ".join(fields) + " |",
           "| --- |" + " ---: |" * len(fields)]
  for result in results:
    lines.append("| %s | %s |" % (result.model, " | ".join(
        cell(result, field) for field in fields)))
  return "\n".join(lines) + "\n"
