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

Each pair is checked to compute the same function, then timed in turns
(`timed_pairs`). The attention plan's decisions are timed the same way by
`route_choices`; `choices` runs either.

Needs torch and transformers only (the model code is loaded by path).
"""

import contextlib
from typing import Callable, List, Tuple
from unittest import mock

import torch

from workbench.pytorch import measure
from workbench.pytorch import models as bench_models
from workbench.pytorch import timed_pairs

CHOICES = ("b2", "rms_norm", "fd_flex")
Dims = timed_pairs.Dims
Comparison = timed_pairs.Comparison


def compare_b2(dims: Dims, device: torch.device, functions: Tuple[str, ...],
               rounds: int, repeats: int) -> Comparison:
  """D's b2 in the bias (the model) or as a key column, one layer.

  Args:
    dims: the sizes.
    device: where.
    functions: the layer's synthesizing functions (D's among them).
    rounds: `timed_pairs.time_pair`'s.
    repeats: `timed_pairs.time_pair`'s.

  Returns:
    The Comparison.
  """
  attention = bench_models.load_model_code("attention")
  functions_module = bench_models.load_model_code("functions")
  case = "+".join({"dense": "D", "dot_product": "V"}[f] for f in functions)
  torch.manual_seed(0)
  layer = timed_pairs.initialized_layer(
      timed_pairs.layer_config(dims, functions), functions, device)
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
  timed_pairs.compare_values(result, run(True, False), run(False, False),
                             weights, cotangent)
  for p in weights:
    p.grad = None
  timed_pairs.compare_times(result, lambda: run(False, True),
                            lambda: run(True, True), cotangent, device,
                            rounds, repeats)
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
  timed_pairs.compare_values(result, functional(), composed(), [x, weight],
                             cotangent)
  timed_pairs.compare_times(result, lambda: composed(True),
                            lambda: functional(True), cotangent, device,
                            rounds, repeats)
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
    timed_pairs.compare_values(result, flex_core(False), reference, inputs,
                               cotangent)
    timed_pairs.compare_times(result, lambda: model_core(rel, True),
                              lambda: flex_core(True), cotangent, device,
                              rounds, repeats)
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
    choices: among CHOICES.
    rounds: rounds of turns of each pair.
    repeats: calls of each in a turn.
    say: progress.

  Returns:
    The Comparisons, b2's for D and D+V.

  Raises:
    ValueError: a choice not among CHOICES.
  """
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
    else:
      raise ValueError("unknown choice %r (known: %s)" %
                       (choice, ", ".join(CHOICES)))
  return out
