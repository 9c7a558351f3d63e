# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention plan's decisions, each timed against its other outcome.

`plan_attention` and its helpers choose, per call, how a layer computes
the same attention; the choices that exist for speed are measured here,
one attention layer (`MtfSynthesizerAttention`, sdpa) at a time, for
every variant of the table (`mtf_synthesizer/attentions.py`) in each
situation a T5 meets (`SITUATIONS`). The model's way is the plan's; the
alternative patches one function of the attention module so that it
returns its other outcome, nothing else:

- **routes** (`plan_attention`): a call the plan gives `columns` takes
  its weight-keyed functions' logits instead (`logits`, or
  `softmax_of_bias` where no columns remain); a call that takes logits
  (`logits`, or `softmax_of_bias` with logits) takes columns; a layer
  without columns (`softmax_of_bias`) gives the kernel zero columns
  (`zero_columns`), and the reverse.
- **b2_rule** (`key_bias_as_column`): D's bias per key a key column
  where the plan adds it to the bias, and the reverse (only where the
  call has a bias to add it to).
- **shared_softmax** (`synthesized_attention_forward`): a bias the batch
  shares (R, Fix unpadded) has its softmax taken once for the batch, or,
  as the alternative, once per example (the bias expanded over the batch).
- **values_apart** (`_kernel_layout`, CUDA only): the values keep their
  own width beside wider (or narrower) queries and keys, or are padded to
  theirs; without it no call takes `zero_columns`. No case on a CPU, whose
  kernels take one width.

A case where the alternative changes nothing (V has no other route) is
left out. Each pair is first checked to compute the same function in
float32 (outputs, and every gradient where the situation trains), then
timed in turns (`timed_pairs`), as `cuda_choices` times its pairs: a
training situation's call is a forward and its backward, an inference
situation's a forward under `torch.no_grad()`, both timed in float32 on
any device (no autocast). A decoding step is one query against `length`
positions, `length - 1` of them cached.

Needs torch and transformers only (the model code is loaded by path).
"""

import dataclasses
from typing import Any, Callable, List, NamedTuple, Optional, Tuple
from unittest import mock

import torch

from workbench.pytorch import models as bench_models
from workbench.pytorch import timed_pairs

# The attention module's function each choice patches.
TARGETS = {"routes": "plan_attention", "b2_rule": "key_bias_as_column",
           "shared_softmax": "synthesized_attention_forward",
           "values_apart": "_kernel_layout"}
# The choices, each against its other outcome for every variant and
# situation (named, not run by default: `choices.DEFAULT`).
CHOICES = tuple(TARGETS)
# A padded position's additive mask.
MASKED = -1e9


class Situation(NamedTuple):
  """A call a T5 makes (docs/pytorch.md's table's columns, on a device).

  Attributes:
    label: its name.
    training: a forward and backward (else a forward under no_grad).
    relative: T5's relative bias is there; it trains where `training`.
    padded: a padded batch (a mask per example).
    one_query: a decoding step: one query against cached positions.
  """
  label: str
  training: bool
  relative: bool
  padded: bool
  one_query: bool


SITUATIONS = (
    Situation("training", True, True, True, False),
    Situation("training, no relative bias", True, False, True, False),
    Situation("inference", False, True, False, False),
    Situation("a decoding step", False, True, False, True),
)


class _Cached:
  """A cache holding `length - 1` positions that it never extends.

  `update` returns the stored keys and values with the new ones appended
  (as `DynamicCache` does), so that every timed decoding step reads the
  same memory length.

  Args:
    cached: the positions held.
    seed: the stored tensors' generator seed.
  """

  def __init__(self, cached: int, seed: int = 1):
    self._cached = cached
    self._seed = seed
    self._stored = None

  def update(self, keys: torch.Tensor, values: torch.Tensor,
             layer_idx: Optional[int]) -> Tuple[torch.Tensor, torch.Tensor]:
    """(stored keys ++ keys, stored values ++ values) along positions."""
    del layer_idx
    if self._stored is None:
      generator = torch.Generator().manual_seed(self._seed)
      self._stored = [
          torch.randn(x.shape[:2] + (self._cached,) + x.shape[3:],
                      generator=generator).to(x)
          for x in (keys, values)]
    return tuple(torch.cat([s, x], dim=2)
                 for s, x in zip(self._stored, (keys, values)))


class _Alternative:
  """One function of the attention module, returning its other outcome.

  Args:
    attention: the attention module.
    choice: a key of TARGETS.
  """

  def __init__(self, attention: Any, choice: str):
    self.attention = attention
    self.name = TARGETS[choice]
    self.choice = choice
    self.original = getattr(attention, self.name)
    self.ways: Optional[Tuple[str, str]] = None  # (model's, alternative's)

  def patch(self) -> Any:
    """The context in which the module's function is this one."""
    return mock.patch.object(self.attention, self.name, self)

  def __call__(self, *args, **kwargs):
    if self.choice == "routes":
      return self._route(*args, **kwargs)
    if self.choice == "values_apart":
      layout = self.original(*args, **kwargs)
      if not layout.values_apart:
        return layout
      self.ways = ("values apart", "values as wide as the keys")
      return layout._replace(values_apart=False)
    if self.choice == "b2_rule":
      column = self.original(*args, **kwargs)
      if not kwargs["has_bias"]:
        return column  # nothing to add it to: a column
      ways = ("a key column", "in the bias")
      self.ways = ways if column else ways[::-1]
      return not column
    return self._softmax(*args, **kwargs)

  def _route(self, functions, in_bias, layout, **call):
    plan = self.original(functions, in_bias, layout, **call)
    other = other_route(self.attention, plan, functions, in_bias)
    if other is None:
      return plan
    self.ways = (_route_name(plan), _route_name(other))
    return other

  def _softmax(self, module, values, bias, dropout=0.0):
    if bias.shape[0] == 1 < values.shape[0]:
      self.ways = ("once for the batch", "once per example")
      bias = bias.expand(values.shape[0], *bias.shape[1:])
    return self.original(module, values, bias, dropout)


def _route_name(plan: Any) -> str:
  return plan.route.value + (" (with logits)" if plan.logits and
                             plan.route.value == "softmax_of_bias" else "")


def other_route(attention: Any, plan: Any, functions: List[Any],
                in_bias: frozenset) -> Optional[Any]:
  """The plan a call would take where the plan's decision went the other way.

  Args:
    attention: the attention module (its `Plan` and `Route`).
    plan: the plan's `Plan`.
    functions: the layer's functions.
    in_bias: those whose logits joined the bias first.

  Returns:
    The other `Plan`: columns for logits, logits for columns (where a
    function not in the bias could give them), zero columns for the bias's
    softmax and the reverse; None where there is no other.
  """
  route = attention.Route
  if plan.route is route.COLUMNS:
    movable = frozenset(f.name for f in functions
                        if f.name not in in_bias and not f.needs_keys)
    if not movable:
      return None
    rest = any(f.name not in in_bias | movable for f in functions)
    return attention.Plan(route.LOGITS if rest else route.SOFTMAX_OF_BIAS,
                          movable)
  if plan.logits:
    return attention.Plan(route.COLUMNS, frozenset())
  if plan.route is route.SOFTMAX_OF_BIAS:
    return attention.Plan(route.ZERO_COLUMNS, frozenset())
  return attention.Plan(route.SOFTMAX_OF_BIAS, frozenset())


@dataclasses.dataclass
class _Call:
  """One situation's layer and inputs."""
  layer: torch.nn.Module
  hidden: torch.Tensor
  bias: torch.Tensor
  positions: Any
  cache: Optional[_Cached]
  training: bool

  def __call__(self) -> torch.Tensor:
    grad = torch.enable_grad() if self.training else torch.no_grad()
    with grad:
      out, _ = self.layer(self.hidden, self.bias, self.positions,
                          past_key_values=self.cache)
    return out

  def inputs(self) -> List[torch.Tensor]:
    """What the call's gradients are taken with respect to."""
    return [x for x in [self.hidden, self.bias] + list(
        self.layer.parameters()) if x.requires_grad]


def _make_call(dims: timed_pairs.Dims, device: torch.device,
               functions: Tuple[str, ...], situation: Situation) -> _Call:
  """A layer of `functions` and the inputs `situation` gives it."""
  functions_module = bench_models.load_model_code("functions")
  torch.manual_seed(0)
  layer = timed_pairs.initialized_layer(
      timed_pairs.layer_config(dims, functions), functions, device)
  layer.train(situation.training)
  s = dims.length
  t = 1 if situation.one_query else s
  hidden = torch.randn(dims.batch, t, dims.d_model, device=device,
                       requires_grad=situation.training)
  bias = None
  if situation.relative:
    bias = torch.randn(1, dims.num_heads, t, s, device=device)
  if situation.padded:
    mask = torch.zeros(dims.batch, 1, 1, s, device=device)
    mask[1::2, ..., s - s // 4:] = MASKED  # every other example padded
    bias = mask if bias is None else bias + mask
  if situation.training and situation.relative:
    bias.requires_grad_()
  positions = functions_module.Positions(start=s - t, length=t,
                                         memory_length=s)
  cache = _Cached(s - 1) if situation.one_query else None
  return _Call(layer, hidden, bias, positions, cache, situation.training)


def _grads(out: torch.Tensor, inputs: List[torch.Tensor],
           cotangent: torch.Tensor) -> List[torch.Tensor]:
  grads = torch.autograd.grad(out, inputs, cotangent, allow_unused=True)
  return [torch.zeros_like(x) if g is None else g
          for x, g in zip(inputs, grads)]


def compare_case(choice: str, dims: timed_pairs.Dims, device: torch.device,
                 label: str, functions: Tuple[str, ...],
                 situation: Situation, rounds: int,
                 repeats: int) -> Optional[timed_pairs.Comparison]:
  """One variant's call in one situation: the model's way and the other.

  Args:
    choice: a key of TARGETS.
    dims: the sizes (t = s = length; one query against length).
    device: where.
    label: the variant's label.
    functions: its synthesizing functions.
    situation: the call.
    rounds: `timed_pairs.time_pair`'s.
    repeats: `timed_pairs.time_pair`'s.

  Returns:
    The Comparison (its case: "variant, situation: the model's way vs the
    alternative"), or None where the alternative changes nothing.
  """
  attention = bench_models.load_model_code("attention")
  difference = timed_pairs.difference
  alternative = _Alternative(attention, choice)
  call = _make_call(dims, device, functions, situation)

  def alternative_call():
    with alternative.patch():
      return call()

  other = alternative_call()
  if alternative.ways is None:
    return None
  result = timed_pairs.Comparison(choice, "%s, %s: %s vs %s" % (
      (label, situation.label) + alternative.ways))
  model = call()
  if situation.training:
    inputs = call.inputs()
    cotangent = torch.randn_like(model)
    result.difference = difference(
        [other] + _grads(other, inputs, cotangent),
        [model] + _grads(model, inputs, cotangent))

    def step(forward: Callable[[], torch.Tensor]) -> Callable[[], None]:
      return lambda: forward().backward(cotangent)
    calls = {"model": step(call), "alternative": step(alternative_call)}
  else:
    result.difference = difference([other], [model])
    calls = {"model": call, "alternative": alternative_call}
  times = timed_pairs.time_pair(calls, device, rounds, repeats)
  for x in call.inputs():
    x.grad = None
  result.model_ms = 1e3 * times["model"]
  result.alternative_ms = 1e3 * times["alternative"]
  return result


def compare(choice: str, dims: timed_pairs.Dims, device: torch.device,
            rounds: int, repeats: int,
            variants: Optional[List[Tuple[str, Tuple[str, ...]]]] = None,
            situations: Tuple[Situation, ...] = SITUATIONS
            ) -> List[timed_pairs.Comparison]:
  """Every variant's and situation's comparison where the choice is open.

  Args:
    choice: a key of TARGETS.
    dims: the sizes.
    device: where.
    rounds: `timed_pairs.time_pair`'s.
    repeats: `timed_pairs.time_pair`'s.
    variants: [(label, functions)]; default: the attention table's.
    situations: the calls.

  Returns:
    The Comparisons, by variant, then situation.
  """
  out = []
  for label, functions in variants or bench_models.variants():
    for situation in situations:
      result = compare_case(choice, dims, device, label, functions,
                            situation, rounds, repeats)
      if result is not None:
        out.append(result)
  return out
