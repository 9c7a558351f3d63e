# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Two ways of computing the same thing, checked equal and timed in turns.

The harness of `cuda_choices` (the fused path's open choices) and
`route_choices` (the attention plan's decisions): the sizes of a
comparison (`Dims`), its outcome (`Comparison`), one attention layer at
mesh's initial weights (`layer_config`, `initialized_layer`), the check
that a pair computes one function (`compare_values`: the outputs and every
gradient in float32, the largest difference relative to the largest
value), and the timing (`time_pair`, `compare_times`): the two take turns
in rounds (one round: `repeats` calls of each, the order alternating
between rounds) and the figure is the median of a call's time over the
rounds, measured with the host's clock around a synchronized region, so
an eager step pays the host's dispatch too. `markdown` tabulates the
outcomes.

Needs torch and transformers only (the model code is loaded by path).
"""

import dataclasses
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from workbench.pytorch import measure
from workbench.pytorch import models as bench_models


@dataclasses.dataclass
class Dims:
  """The sizes of a comparison.

  Attributes:
    batch: examples.
    length: t = s = N.
    d_model: the residual stream's width.
    num_heads: heads.
    d_kv: head width.
    fd_factors: FD's (a, b), a * b >= length.
    buckets: the relative bias' buckets.
  """
  batch: int = 32
  length: int = 512
  d_model: int = 768
  num_heads: int = 12
  d_kv: int = 64
  fd_factors: Tuple[int, int] = (16, 32)
  buckets: int = 32


@dataclasses.dataclass
class Comparison:
  """One pair's outcome.

  Attributes:
    choice: the choice's name (`cuda_choices.CHOICES`,
      `route_choices.CHOICES`).
    case: what ran (the variant, the situation).
    model_ms: the model's way, median milliseconds of a call.
    alternative_ms: the alternative's.
    difference: largest relative difference of outputs and gradients
      (float32).
    error: why the alternative failed, or None.
  """
  choice: str
  case: str
  model_ms: Optional[float] = None
  alternative_ms: Optional[float] = None
  difference: Optional[float] = None
  error: Optional[str] = None

  @property
  def speedup(self) -> Optional[float]:
    """The model's time over the alternative's (> 1: alternative faster)."""
    if self.model_ms is None or self.alternative_ms is None:
      return None
    return self.model_ms / self.alternative_ms


def time_pair(calls: Dict[str, Callable[[], Any]], device: torch.device,
              rounds: int, repeats: int) -> Dict[str, float]:
  """Median seconds of a call of each, taking turns.

  Args:
    calls: name -> a call that runs forward and backward.
    device: where they run.
    rounds: rounds of turns (the order alternates).
    repeats: calls of each in one turn.

  Returns:
    name -> median seconds of one call.
  """
  for call in calls.values():  # compilation, autotuning, the allocator
    call()
    call()
  times = {name: [] for name in calls}
  names = list(calls)
  for r in range(rounds):
    for name in (names if r % 2 == 0 else names[::-1]):
      measure.sync(device)
      start = time.perf_counter()
      for _ in range(repeats):
        calls[name]()
      measure.sync(device)
      times[name].append((time.perf_counter() - start) / repeats)
  return {name: statistics.median(t) for name, t in times.items()}


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
  """The largest difference of two tensors over the largest of the second.

  Args:
    a: a tensor.
    b: the reference, of a's shape.

  Returns:
    max |a - b| / max |b|, in float64.
  """
  a, b = a.detach().double(), b.detach().double()
  return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def difference(first: List[torch.Tensor],
               second: List[torch.Tensor]) -> float:
  """The largest relative difference of paired tensors.

  Args:
    first: tensors.
    second: the references, one per tensor of `first`.

  Returns:
    The largest `relative_difference` of a pair.
  """
  return max(relative_difference(a, b) for a, b in zip(first, second))


def _grads(output: torch.Tensor, inputs: List[torch.Tensor],
           cotangent: torch.Tensor) -> List[torch.Tensor]:
  return list(torch.autograd.grad(output, inputs, cotangent,
                                  allow_unused=False))


def compare_values(result: Comparison, alternative: torch.Tensor,
                   reference: torch.Tensor, inputs: List[torch.Tensor],
                   cotangent: torch.Tensor) -> None:
  """Sets result.difference: the outputs' and every input gradient's.

  Args:
    result: the comparison to fill.
    alternative: the alternative's output (in the graph of `inputs`).
    reference: the model's output.
    inputs: the tensors whose gradients are compared.
    cotangent: the gradient of the output.
  """
  result.difference = difference(
      [alternative] + _grads(alternative, inputs, cotangent),
      [reference] + _grads(reference, inputs, cotangent))


def compare_times(result: Comparison, model: Callable[[], torch.Tensor],
                  alternative: Callable[[], torch.Tensor],
                  cotangent: torch.Tensor, device: torch.device,
                  rounds: int, repeats: int) -> None:
  """Sets result's times: each forward and its backward, in turns.

  Args:
    result: the comparison to fill.
    model: the model's forward.
    alternative: the alternative's forward.
    cotangent: the gradient of the output.
    device: where they run.
    rounds: `time_pair`'s.
    repeats: `time_pair`'s.
  """
  def step(forward):
    return lambda: forward().backward(cotangent)

  times = time_pair({"model": step(model),
                     "alternative": step(alternative)},
                    device, rounds, repeats)
  result.model_ms = 1e3 * times["model"]
  result.alternative_ms = 1e3 * times["alternative"]


def layer_config(dims: Dims, functions: Tuple[str, ...]) -> Any:
  """The configuration of one attention layer at the dims, sdpa's.

  Args:
    dims: the sizes.
    functions: the layer's synthesizing functions.

  Returns:
    The model code's `MtfSynthesizerConfig`.
  """
  modeling = bench_models.load_model_code()
  config = modeling.MtfSynthesizerConfig(
      d_model=dims.d_model, num_heads=dims.num_heads, d_kv=dims.d_kv,
      d_ff=4 * dims.d_model, num_layers=1, vocab_size=64,
      synthesizer_max_length=dims.length, dropout_rate=0.0,
      factorized_dense_factors=dims.fd_factors,
      relative_attention_num_buckets=dims.buckets,
      encoder_synthesizers=functions, decoder_synthesizers=functions)
  config._attn_implementation = "sdpa"  # pylint: disable=protected-access
  return config


def initialized_layer(config: Any, functions: Tuple[str, ...],
                      device: torch.device) -> torch.nn.Module:
  """An attention layer with mesh's initial weights, none of them zero.

  The model's initializer (`_init_weights`) draws each weight; those it
  starts at zero (D's b2, FD's biases, the mixture logits) are drawn from
  N(0, 0.5) instead, so that a comparison sees what they contribute.

  Args:
    config: the model's configuration.
    functions: the layer's synthesizing functions.
    device: where.

  Returns:
    The `MtfSynthesizerAttention`, on `device`.
  """
  attention = bench_models.load_model_code("attention")
  modeling = bench_models.load_model_code()
  layer = attention.MtfSynthesizerAttention(config, functions)
  # A model of no modules, for its `_init_weights`.
  holder = modeling.MtfSynthesizerPreTrainedModel(config)
  with torch.no_grad():
    for module in layer.modules():
      holder._init_weights(module)  # pylint: disable=protected-access
    for p in layer.parameters():
      if not p.any():
        torch.nn.init.normal_(p, std=0.5)
  return layer.to(device)


def markdown(results: List[Comparison], device: torch.device,
             dims: Dims) -> str:
  """The comparisons as a markdown table, with the device and dims.

  Args:
    results: the comparisons.
    device: where they ran.
    dims: their sizes.

  Returns:
    The table's markdown.
  """
  lines = ["Device: %s; %s" % (measure.device_name(device), dims), "",
           "| choice | case | model ms | alternative ms | model / "
           "alternative | difference |",
           "| --- | --- | ---: | ---: | ---: | ---: |"]

  def number(x, fmt):
    return "n/a" if x is None else fmt % x

  for r in results:
    lines.append("| %s | %s | %s | %s | %s | %s |" % (
        r.choice, r.case, number(r.model_ms, "%.3f"),
        number(r.alternative_ms, "%.3f"), number(r.speedup, "%.2f"),
        number(r.difference, "%.1e") if r.error is None else r.error))
  return "\n".join(lines) + "\n"
