# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Choices of the fused attention path, each pair timed side by side.

Three places where the PyTorch model could compute the same numbers
another way, each measured as the way the model took when the choice was
open ("model") against the alternative, at the `gpu` preset's dims by
default (batch 32 x 512, d_model 768, 12 heads x 64, N = 512), forward and
backward, bf16 autocast on CUDA (float32 on a CPU):

- **b2**: D's bias per key (b2) in the kernel's additive bias, as the
  model adds it on CUDA beside T5's relative bias, or as one more key
  column against a column of ones in the queries (the head 64 + 1 wide
  for D, 129 for D+V, rounded up to the kernel's multiple of 8). One
  attention layer (`MtfSynthesizerAttention`, sdpa), with a relative bias
  that needs a gradient, for D and for D+V.
- **rms_norm**: the norm composed of operators (float32 mean of squares,
  rsqrt: the model's before 2026-11-27, and still a bf16 model's) or
  `torch.nn.functional.rms_norm` (since then the model's in float32), on
  the residual stream [batch, t, d_model] in float32.
- **fd_flex**: FD's attention core, its logits C_ij = A_i[j mod a] B_i[j //
  a] (eq. 5-6) plus T5's relative bias written as sdpa's bias (the model's
  route: zero queries and keys, the memory-efficient kernel), or computed
  inside FlexAttention's `score_mod` from A, B and the relative bias'
  bucket table (nothing [batch, heads, t, s] written); compiled on CUDA.

Each pair is first checked to compute the same function: the outputs and
every gradient in float32, the largest difference relative to the
largest value. Then the two take turns in rounds (one round: `repeats`
calls of each, the order alternating between rounds) and the figure is
the median of a call's time over the rounds, measured with the host's
clock around a synchronized region: an eager step pays the host's
dispatch too.

Needs torch and transformers only (the model code is loaded by path).
"""

import contextlib
import dataclasses
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple
from unittest import mock

import torch

from workbench import torch_benchmark_measure as measure
from workbench import torch_benchmark_models as bench_models

CHOICES = ("b2", "rms_norm", "fd_flex")
# The attention plan's decisions (`workbench.torch_route_choices`), each
# against its other outcome, for every variant and situation: named, not
# run by default.
ROUTE_CHOICES = ("routes", "b2_rule", "shared_softmax", "values_apart")
KNOWN_CHOICES = CHOICES + ROUTE_CHOICES


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
    choice: "b2", "rms_norm" or "fd_flex".
    case: what ran (the variant for b2).
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


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
  a, b = a.detach().double(), b.detach().double()
  return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _difference(first: List[torch.Tensor],
                second: List[torch.Tensor]) -> float:
  """The largest relative difference of paired tensors."""
  return max(_relative(a, b) for a, b in zip(first, second))


def _grads(output: torch.Tensor, inputs: List[torch.Tensor],
           cotangent: torch.Tensor) -> List[torch.Tensor]:
  return list(torch.autograd.grad(output, inputs, cotangent,
                                  allow_unused=False))


def _compare_values(result: Comparison, alternative: torch.Tensor,
                    reference: torch.Tensor, inputs: List[torch.Tensor],
                    cotangent: torch.Tensor) -> None:
  """Sets result.difference: the outputs' and every input gradient's."""
  result.difference = _difference(
      [alternative] + _grads(alternative, inputs, cotangent),
      [reference] + _grads(reference, inputs, cotangent))


def _compare_times(result: Comparison, model: Callable[[], torch.Tensor],
                   alternative: Callable[[], torch.Tensor],
                   cotangent: torch.Tensor, device: torch.device,
                   rounds: int, repeats: int) -> None:
  """Sets result's times: each forward and its backward, in turns."""
  def step(forward):
    return lambda: forward().backward(cotangent)

  times = time_pair({"model": step(model),
                     "alternative": step(alternative)},
                    device, rounds, repeats)
  result.model_ms = 1e3 * times["model"]
  result.alternative_ms = 1e3 * times["alternative"]


def _config(dims: Dims, functions: Tuple[str, ...]):
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
  holder = type("Initializer", (), {"config": config})()
  with torch.no_grad():
    for module in layer.modules():
      # pylint: disable-next=protected-access
      modeling.MtfSynthesizerPreTrainedModel._init_weights(holder, module)
    for p in layer.parameters():
      if not p.any():
        torch.nn.init.normal_(p, std=0.5)
  return layer.to(device)


def compare_b2(dims: Dims, device: torch.device, functions: Tuple[str, ...],
               rounds: int, repeats: int) -> Comparison:
  """D's b2 in the bias (the model) or as a key column, one layer.

  Args:
    dims: the sizes.
    device: where.
    functions: the layer's synthesizing functions (D's among them).
    rounds: `time_pair`'s.
    repeats: `time_pair`'s.

  Returns:
    The Comparison.
  """
  attention = bench_models.load_model_code("attention")
  functions_module = bench_models.load_model_code("functions")
  case = "+".join({"dense": "D", "dot_product": "V"}[f] for f in functions)
  torch.manual_seed(0)
  layer = initialized_layer(_config(dims, functions), functions, device)
  positions = functions_module.Positions(start=0, length=dims.length,
                                         memory_length=dims.length)
  shape = (dims.batch, dims.length, dims.d_model)
  hidden = torch.randn(shape, device=device, requires_grad=True)
  bias = torch.randn(1, dims.num_heads, dims.length, dims.length,
                     device=device, requires_grad=True)
  cotangent = torch.randn(shape, device=device)
  weights = [hidden, bias] + list(layer.parameters())
  as_column = mock.patch.object(attention, "key_bias_as_column",
                                lambda *args, **kwargs: True)

  def run(column: bool, autocast: bool):
    context = as_column if column else contextlib.nullcontext()
    amp = measure.autocast(device) if autocast else contextlib.nullcontext()
    with context, amp:
      out, _ = layer(hidden, bias, positions)
    return out

  result = Comparison("b2", case)
  _compare_values(result, run(True, False), run(False, False), weights,
                  cotangent)
  for p in weights:
    p.grad = None
  _compare_times(result, lambda: run(False, True), lambda: run(True, True),
                 cotangent, device, rounds, repeats)
  return result


def compare_rms_norm(dims: Dims, device: torch.device, rounds: int,
                     repeats: int) -> Comparison:
  """The norm composed of operators or `torch.nn.functional.rms_norm`."""
  modeling = bench_models.load_model_code()
  torch.manual_seed(0)
  norm = modeling.MtfSynthesizerRMSNorm(dims.d_model, 1e-6).to(device)
  with torch.no_grad():
    norm.weight.normal_(1.0, 0.1)
  weight = norm.weight
  shape = (dims.batch, dims.length, dims.d_model)
  x = torch.randn(shape, device=device, requires_grad=True)
  cotangent = torch.randn(shape, device=device)
  epsilon = norm.variance_epsilon

  def composed(autocast=False):
    # T5's norm, which the model computes where it does not fuse.
    with measure.autocast(device) if autocast else contextlib.nullcontext():
      return modeling.T5LayerNorm.forward(norm, x)

  def functional(autocast=False):
    with measure.autocast(device) if autocast else contextlib.nullcontext():
      return torch.nn.functional.rms_norm(x, (dims.d_model,), weight,
                                          eps=epsilon)

  result = Comparison("rms_norm", "[%d, %d, %d] float32" % shape)
  _compare_values(result, functional(), composed(), [x, weight], cotangent)
  _compare_times(result, lambda: composed(True), lambda: functional(True),
                 cotangent, device, rounds, repeats)
  return result


def _fd_bias(fa, fb, a, length):
  """C [b, h, t, s] from A [b, h, t, a], B [b, h, t, b]: column j*a + i."""
  return (fb[..., :, None] * fa[..., None, :]).flatten(-2)[..., :length]


def compare_fd_flex(dims: Dims, device: torch.device, rounds: int,
                    repeats: int) -> Comparison:
  """FD's core: its logits as sdpa's bias (the model) or in score_mod."""
  # pylint: disable-next=g-import-not-at-top
  from torch.nn.attention import flex_attention as flex
  attention = bench_models.load_model_code("attention")
  modeling = bench_models.load_model_code()
  a, b_ = dims.fd_factors
  n, h, bsz = dims.length, dims.num_heads, dims.batch
  result = Comparison("fd_flex", "FD core, %d x %d, factors %s" % (
      bsz, n, dims.fd_factors))
  torch.manual_seed(0)
  fa = torch.randn(bsz, h, n, a, device=device, requires_grad=True)
  fb = torch.randn(bsz, h, n, b_, device=device, requires_grad=True)
  values = torch.randn(bsz, h, n, dims.d_kv, device=device,
                       requires_grad=True)
  table = torch.randn(dims.buckets, h, device=device, requires_grad=True)
  position = torch.arange(n, device=device)
  # pylint: disable-next=protected-access
  buckets = modeling.T5Attention._relative_position_bucket(
      position[None, :] - position[:, None], bidirectional=True,
      num_buckets=dims.buckets, max_distance=128).to(device)
  cotangent = torch.randn(bsz, h, n, dims.d_kv, device=device)
  width = attention.KERNEL_WIDTH_MULTIPLE
  zero_q = values.new_zeros(1, h, n, width).expand(bsz, h, n, width)
  backends = attention.NARROW_VALUE_BACKENDS

  def relative(tab):
    return tab[buckets].permute(2, 0, 1)[None]  # [1, h, t, s]

  def model_core(rel, autocast):
    amp = measure.autocast(device) if autocast else contextlib.nullcontext()
    with amp:
      dtype = torch.bfloat16 if (autocast and device.type == "cuda") else (
          torch.float32)
      bias = rel.to(dtype) + _fd_bias(fa.to(dtype), fb.to(dtype), a, n)
      with torch.nn.attention.sdpa_kernel(backends):
        return torch.nn.functional.scaled_dot_product_attention(
            zero_q.to(dtype), zero_q.to(dtype), values.to(dtype),
            attn_mask=bias, scale=1.0)

  def score_mod(score, bi, hi, qi, ki):
    return (score + fa[bi, hi, qi, ki % a] * fb[bi, hi, qi, ki // a] +
            table[buckets[qi, ki], hi])

  kernel = flex.flex_attention
  if device.type == "cuda":
    kernel = torch.compile(flex.flex_attention, dynamic=False)

  def flex_core(autocast):
    amp = measure.autocast(device) if autocast else contextlib.nullcontext()
    with amp:
      dtype = torch.bfloat16 if (autocast and device.type == "cuda") else (
          torch.float32)
      # FlexAttention's kernels take query widths of 16 and more.
      q = values.new_zeros(1, h, n, 16, dtype=dtype).expand(bsz, h, n, 16)
      return kernel(q, q, values.to(dtype), score_mod=score_mod, scale=1.0)

  inputs = [fa, fb, values, table]
  reference = model_core(relative(table), False)
  rel = relative(table).detach().requires_grad_()  # once per stack
  try:
    _compare_values(result, flex_core(False), reference, inputs, cotangent)
    _compare_times(result, lambda: model_core(rel, True),
                   lambda: flex_core(True), cotangent, device, rounds,
                   repeats)
  except Exception as e:  # pylint: disable=broad-except
    result.error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
  return result


def compare(dims: Dims, device: torch.device,
            choices: Tuple[str, ...] = CHOICES, rounds: int = 10,
            repeats: int = 5,
            say: Callable[[str], None] = lambda _: None) -> List[Comparison]:
  """Every requested choice's comparison.

  Args:
    dims: the sizes.
    device: where.
    choices: among KNOWN_CHOICES.
    rounds: rounds of turns of each pair.
    repeats: calls of each in a turn.
    say: progress.

  Returns:
    The Comparisons, b2's for D and D+V, a route choice's for each variant
    and situation where it is open.
  """
  # pylint: disable-next=g-import-not-at-top
  from workbench import torch_route_choices
  out = []
  for choice in choices:
    say("comparing %s" % choice)
    if choice == "b2":
      for functions in (("dense",), ("dense", "dot_product")):
        out.append(compare_b2(dims, device, functions, rounds, repeats))
    elif choice == "rms_norm":
      out.append(compare_rms_norm(dims, device, rounds, repeats))
    elif choice == "fd_flex":
      out.append(compare_fd_flex(dims, device, rounds, repeats))
    elif choice in ROUTE_CHOICES:
      out.extend(torch_route_choices.compare(choice, dims, device, rounds,
                                             repeats))
    else:
      raise ValueError("unknown choice %r (known: %s)" %
                       (choice, ", ".join(KNOWN_CHOICES)))
  return out


def markdown(results: List[Comparison], device: torch.device,
             dims: Dims) -> str:
  """The comparisons as a markdown table, with the device and dims."""
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
