# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention layer: synthesizing functions composed in one kernel call.

One algorithm serves every function and both implementations: each
function contributes either query and key columns whose product is its
logits (V: the layer's Q and K; D: relu(W1 X + b1) and W2^T, its b2 a bias
per key; FR: R1's and R2's rows), put side by side so that the kernel's
Q K^T is the mixture (eq. 8), or its logits, which join an additive bias
with the relative position bias (computed once per stack, with a boolean
mask that selects from the sum last: `masked_bias`). Where some function
gives columns, one call of transformers' attention interface
(`config._attn_implementation`: "eager", the readable reference, which
writes the logits, or "sdpa", fused) then computes softmax(Q K^T + bias)
G(X) (eq. 3) before W_o. Where none does (R, Fix,
FD, and under the eager kernel or in a decoding step D and FR), the layer
takes the bias's softmax itself (`Route.SOFTMAX_OF_BIAS`, once for the
batch where the batch shares the bias), or, on CUDA with a bias per
example, gives the fused kernel zero columns (`Route.ZERO_COLUMNS`).
Which function gives columns and which gives logits, and which route the
call takes, is one pure decision of what the call is (`bias_functions`,
then `plan_attention`; docs/pytorch.md tabulates it for every variant);
the routes that exist only for speed live there, not in `forward`, and
docs/pytorch_benchmark.md gives each one's measured gain against the way
the call would go otherwise (`workbench/pytorch/route_choices.py`).
"""

import contextlib
import enum
from typing import FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.attention
from torch import nn
from transformers.cache_utils import Cache
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

# pylint: disable=relative-beyond-top-level
from .configuration_mtf_synthesizer import MtfSynthesizerConfig
from .functions_mtf_synthesizer import BIAS
from .functions_mtf_synthesizer import FUNCTIONS
from .functions_mtf_synthesizer import LayerProjections
from .functions_mtf_synthesizer import Positions
from .functions_mtf_synthesizer import _cast
from .functions_mtf_synthesizer import _linear
from .functions_mtf_synthesizer import _logits_dtype
# pylint: enable=relative-beyond-top-level


def _repeat_heads(x: torch.Tensor, groups: int) -> torch.Tensor:
  """[b, memory_heads, s, d] -> [b, memory_heads * groups, s, d]."""
  if groups == 1:
    return x
  b, h, s, d = x.shape
  return x[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


def eager_attention_forward(
    module: nn.Module, query: torch.Tensor, key: torch.Tensor,
    value: torch.Tensor, attention_mask: Optional[torch.Tensor],
    scaling: float = 1.0, dropout: float = 0.0,
    position_bias: Optional[torch.Tensor] = None,
    **kwargs) -> Tuple[torch.Tensor, torch.Tensor]:
  """softmax(Q K^T * scaling + bias, masked) V, the logits in float32.

  Args:
    module: the attention layer (num_key_value_groups).
    query: [batch, heads, t, d_kv].
    key: [batch, memory_heads, s, d_kv].
    value: [batch, memory_heads, s, d_kv].
    attention_mask: boolean, True where a key may be attended to (the
      model's masks: selected after the sum, `masked_bias`), or additive;
      broadcastable to [batch, heads, t, s].
    scaling: multiplies Q K^T.
    dropout: on the attention weights.
    position_bias: additive, like attention_mask.
    **kwargs: the interface's other arguments (unused).

  Returns:
    ([batch, t, heads, d_kv], the weights [batch, heads, t, s]).
  """
  del kwargs
  groups = getattr(module, "num_key_value_groups", 1)
  key = _repeat_heads(key, groups)
  value = _repeat_heads(value, groups)
  logits = torch.matmul(query, key.transpose(-1, -2)).float() * scaling
  if position_bias is not None:
    logits = logits + position_bias.float()
  if attention_mask is not None and attention_mask.dtype == torch.bool:
    logits = masked_bias(logits, attention_mask, torch.float32)
  elif attention_mask is not None:
    logits = logits + attention_mask.float()
  weights = torch.softmax(logits, dim=-1).to(value.dtype)
  weights = nn.functional.dropout(weights, p=dropout,
                                  training=module.training)
  out = torch.matmul(weights, value)
  return out.transpose(1, 2).contiguous(), weights


def synthesized_attention_forward(
    module: nn.Module, value: torch.Tensor, bias: torch.Tensor,
    dropout: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor]:
  """softmax(bias) V: attention without a dot product (R, D, FD, ...).

  Args:
    module: the attention layer (num_key_value_groups, training).
    value: [batch, memory_heads, s, d_kv].
    bias: the synthesized logits with masks and relative bias,
      broadcastable to [batch, heads, t, s].
    dropout: on the attention weights.

  Returns:
    ([batch, t, heads, d_kv], the weights).
  """
  value = _repeat_heads(value, getattr(module, "num_key_value_groups", 1))
  weights = torch.softmax(bias.float(), dim=-1).to(value.dtype)
  weights = nn.functional.dropout(weights, p=dropout,
                                  training=module.training)
  b, h, s, d = value.shape
  t = weights.shape[2]
  if (weights.shape[0] == 1 < b and t > d and
      not torch.compiler.is_exporting()):  # a branch on dynamic shapes
    # Weights shared by the batch (R, Fix unpadded): the batch's values side
    # by side, [heads, s, batch * d_kv], one matmul per head. A broadcast
    # matmul would copy the weights per example, [batch, heads, t, s], and
    # keep that copy for the backward; this copies the values (smaller
    # where t > d_kv).
    rows = value.permute(1, 2, 0, 3).reshape(h, s, b * d)
    out = torch.bmm(weights[0], rows).view(h, t, b, d)
    return out.permute(2, 1, 0, 3).contiguous(), weights
  out = torch.matmul(weights, value)
  return out.transpose(1, 2).contiguous(), weights



class MtfSynthesizerRelativeBias(nn.Embedding):
  """T5's relative position bias: [buckets, heads], read once per stack."""


class MtfSynthesizerAttention(nn.Module):
  """Self-attention composing synthesizing functions, or cross-attention.

  `functions` names the synthesizing functions (a mixture when several);
  the default, the dot product alone, is mesh's SelfAttention (and T5's),
  and the cross-attention's.
  """

  def __init__(self, config: MtfSynthesizerConfig,
               functions: Optional[Tuple[str, ...]] = None,
               has_relative_attention_bias: bool = False,
               layer_idx: Optional[int] = None):
    super().__init__()
    self.config = config
    self.layer_idx = layer_idx
    self.num_heads = config.num_heads
    self.d_kv = config.d_kv
    self.memory_heads = config.num_memory_heads or config.num_heads
    self.num_key_value_groups = self.num_heads // self.memory_heads
    self.is_causal = False  # causality is in the bias
    self.dropout = config.dropout_rate
    self.function_names = tuple(functions or dot_product_only())
    for name in self.function_names:
      setattr(self, name, FUNCTIONS[name](config))
    self.needs_keys = any(f.needs_keys for f in self.functions)
    self.reads_queries = any(f.needs_queries for f in self.functions)
    # The functions whose logits join the bias first, by whether the
    # kernel takes a bias with a gradient: fixed by the functions.
    self.bias_functions = {
        gradient: bias_functions(self.functions, gradient)
        for gradient in (False, True)}
    d = config.d_model
    inner = self.num_heads * self.d_kv
    memory_inner = self.memory_heads * self.d_kv
    if self.needs_keys or self.reads_queries:
      # mesh folds the 1/sqrt(d_kv) query scale into the initializer.
      self.q = _linear(d, inner, d**-0.5 if config.scale_queries
                       else (d * self.d_kv)**-0.5)
    if self.needs_keys:
      self.k = _linear(d, memory_inner, d**-0.5)
    self.v = _linear(d, memory_inner, d**-0.5)
    self.o = _linear(inner, d, inner**-0.5)
    if len(self.function_names) > 1 and config.learned_mixture_weights:
      self.alpha_logits = nn.Parameter(torch.zeros(len(self.function_names),
                                                   self.num_heads))
    if has_relative_attention_bias:
      self.relative_attention_bias = MtfSynthesizerRelativeBias(
          config.relative_attention_num_buckets, self.num_heads)
    self.every_head = _EveryHead(self)

  @property
  def functions(self) -> List[nn.Module]:
    """The synthesizing functions' modules, in the mixture's order."""
    return [getattr(self, n) for n in self.function_names]

  def mixture_weights(self) -> Optional[torch.Tensor]:
    """alpha [functions, heads] (eq. 8), or None for one function."""
    if not hasattr(self, "alpha_logits"):
      return None
    return torch.softmax(self.alpha_logits.float(), dim=0)

  def _heads(self, x: torch.Tensor, projection: nn.Linear) -> torch.Tensor:
    b, t, _ = x.shape
    return projection(x).view(b, t, -1, self.d_kv).transpose(1, 2)

  def forward(self, hidden: torch.Tensor, bias: Optional[torch.Tensor],
              positions: Optional[Positions] = None,
              key_value_states: Optional[torch.Tensor] = None,
              past_key_values: Optional[Cache] = None,
              output_attentions: bool = False,
              mask: Optional[torch.Tensor] = None
              ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Attends: Y = softmax(sum_f alpha_f S_f + bias, masked) G(X) W_o.

    Args:
      hidden: the normalized layer input [batch, t, d_model].
      bias: additive, without the masks: the relative position bias,
        broadcastable to [batch, heads, t, s]; or None.
      positions: the positions (self-attention with synthesizing functions).
      key_value_states: the encoder output (cross-attention).
      past_key_values: the cache (DynamicCache or EncoderDecoderCache).
      output_attentions: return the attention weights (the eager kernel).
      mask: boolean, True where a key may be attended to, broadcastable to
        [batch, heads, t, s]; None: nothing masked. Applied once the bias
        and the synthesized logits are summed (`masked_bias`).

    Returns:
      ([batch, t, d_model], the weights [batch, heads, t, s] or None).
    """
    b, t, _ = hidden.shape
    keys, values = self._keys_and_values(hidden, key_value_states,
                                         past_key_values)
    # pylint: disable-next=protected-access
    implementation = self.config._attn_implementation or "eager"
    if output_attentions:
      implementation = "eager"
    eager = implementation == "eager"
    alpha = self.mixture_weights()
    scales = [None] * len(self.function_names) if alpha is None else (
        alpha.unbind(0))
    inputs = (hidden, self._heads(hidden, self.q) if self.reads_queries
              else None, positions)
    projections = LayerProjections(getattr(self, "q", None), keys)
    functions = self.functions
    contributions = list(zip(functions, scales))
    # 1. The logits that join the bias whatever the call (R, Fix, FD; FR's
    # where the kernel takes a bias with a gradient); 2. the plan, from
    # what the call then is; 3. the logits the plan adds; 4. one kernel.
    layout = EAGER_LAYOUT if eager else _kernel_layout(hidden.is_cuda, True)
    in_bias = self.bias_functions[layout.bias_gradient]
    bias = _add_logits(bias, contributions, in_bias, inputs, projections)
    if not eager:
      layout = _kernel_layout(hidden.is_cuda,
                              bias is not None or mask is not None)
    plan = plan_attention(
        functions, in_bias, layout, one_query=t == 1,
        bias_needs_grad=bias is not None and bias.requires_grad,
        bias_per_example=any(x is not None and x.shape[0] > 1
                             for x in (bias, mask)))
    bias = _add_logits(bias, contributions, plan.logits, inputs,
                       projections)
    dropout = self.dropout if self.training else 0.0
    logits = in_bias | plan.logits
    columns = [(f, s) for f, s in contributions if f.name not in logits]
    if plan.route is Route.SOFTMAX_OF_BIAS:
      # The softmax is float32's, and so is the floor.
      bias = masked_bias(_cast(bias, torch.float32), mask, torch.float32)
      if output_attentions:
        # Each example's weights (a table's are shared by the batch).
        bias = bias.expand(b, self.num_heads, t, bias.shape[-1])
      out, weights = synthesized_attention_forward(self, values, bias,
                                                   dropout)
    else:
      query, key, values, bias, module = _side_by_side(
          self, columns, inputs, projections, values, bias, layout,
          zero=plan.route is Route.ZERO_COLUMNS,
          has_mask=mask is not None)
      out, weights = _attend(module, query, key, values, bias, mask,
                             implementation, dropout, self.d_kv)
    if torch.compiler.is_exporting():
      # The ONNX exporter keeps SDPA whole: its output's strides change
      # between the exporter's passes, so the flattening reads a copy.
      out = out.clone(memory_format=torch.contiguous_format)
    out = self.o(out.reshape(b, t, -1))
    return out, (weights if output_attentions else None)

  def _keys_and_values(self, hidden, key_value_states, past_key_values):
    """The keys (or a stand-in) and values, through the cache."""
    cross = key_value_states is not None
    if cross and past_key_values is not None:
      stored = self.stored_cross_attention(past_key_values)
      if stored is not None:
        return stored
    source = key_value_states if cross else hidden
    values = self._heads(source, self.v)
    # Without keys the cache keeps one column of the values in their
    # place (it measures its length by the keys).
    keys = self._heads(source, self.k) if self.needs_keys else (
        values[..., :1])
    if past_key_values is not None:
      keys, values = self.update_cache(past_key_values, keys, values, cross)
    return keys, values

  # The methods below are all that reads the layer's index. Where each
  # block is compiled on its own (regional compilation), leaving them out
  # of the graphs (`torch.compiler.disable`) lets a stack's blocks share
  # one graph: dynamo specializes on the index, one graph per layer.
  LAYER_INDEXED_METHODS = ("stored_cross_attention", "update_cache")

  def stored_cross_attention(
      self, past_key_values: Cache
      ) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """The cross-attention's keys and values, if this layer cached them.

    Args:
      past_key_values: the call's cache.

    Returns:
      (keys, values) stored by an earlier step, or None.
    """
    if not (isinstance(past_key_values, EncoderDecoderCache) and
            past_key_values.is_updated.get(self.layer_idx)):
      return None
    stored = past_key_values.cross_attention_cache.layers[self.layer_idx]
    return stored.keys, stored.values

  def update_cache(self, past_key_values: Cache, keys: torch.Tensor,
                   values: torch.Tensor, cross: bool
                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Stores this step's keys and values; returns all the cache holds.

    Args:
      past_key_values: the call's cache (an EncoderDecoderCache for the
        seq2seq's layers).
      keys: [batch, heads, t, d_kv] (or the values' stand-in column).
      values: [batch, heads, t, d_kv].
      cross: the cross-attention's (the encoder's, stored once).

    Returns:
      (keys, values) of every cached position.
    """
    cache = past_key_values
    if isinstance(cache, EncoderDecoderCache):
      cache = (cache.cross_attention_cache if cross
               else cache.self_attention_cache)
    keys, values = cache.update(keys, values, self.layer_idx)
    if cross:
      past_key_values.is_updated[self.layer_idx] = True
    return keys, values

def _side_by_side(layer, columns, inputs, projections, values, bias,
                  layout, zero, has_mask=False):
  """The kernel's query and key: the functions' columns side by side.

  Zero columns change no logit: they pad the widths to the kernel's
  multiple, or stand in for no columns (`Route.ZERO_COLUMNS`).

  Args:
    layer: the attention layer.
    columns: (function, its mixture weight or None) of those with columns.
    inputs: (hidden, queries, positions), the functions' inputs.
    projections: the layer's `LayerProjections`.
    values: [batch, memory_heads, s, d_kv].
    bias: the additive bias, or None.
    layout: the kernel's layout.
    zero: start from zero columns (`Route.ZERO_COLUMNS`).
    has_mask: the call masks keys: the kernel gets an additive bias even
      where `bias` is None.

  Returns:
    (query, key, values, bias, the layer as the kernel sees it).
  """
  hidden = inputs[0]
  query_parts, key_parts, key_biases = [], [], []
  if zero:
    query_parts.append(hidden.new_zeros(1, layer.num_heads, hidden.shape[1],
                                        layout.multiple))
    key_parts.append(hidden.new_zeros(1, layer.memory_heads,
                                      values.shape[2], layout.multiple))
  for function, scale in columns:
    query, key, key_bias = function.columns(*inputs, scale, projections)
    query_parts.append(query)
    key_parts.append(key)
    if key_bias is not None:
      key_biases.append(key_bias)
  for key_bias in key_biases:  # [1|b, heads, s]
    if key_bias_as_column(
        layout, has_bias=bias is not None or has_mask,
        bias_needs_grad=bias is not None and bias.requires_grad,
        key_bias_needs_grad=(torch.is_grad_enabled() and
                             key_bias.requires_grad)):
      query_parts.append(hidden.new_ones(1, layer.num_heads,
                                         hidden.shape[1], 1))
      key_parts.append(key_bias[..., None])
    else:
      key_bias = key_bias[:, :, None, :]
      bias = key_bias if bias is None else bias + key_bias
  module = layer
  if layer.num_key_value_groups > 1 and any(
      k.shape[1] != layer.memory_heads for k in key_parts):
    # Per-head key columns: the layer's shared keys and values join
    # every head.
    module = layer.every_head
    values = _repeat_heads(values, layer.num_key_value_groups)
    key_parts = [_repeat_heads(k, layer.num_key_value_groups)
                 if k.shape[1] != layer.num_heads else k for k in key_parts]
  dtype = values.dtype
  query = _concat_columns(query_parts, values.shape[0], dtype)
  key = _concat_columns(key_parts, values.shape[0], dtype)
  width = _round_up(query.shape[-1], layout.multiple)
  value_width = _round_up(layer.d_kv, layout.multiple)
  if not layout.values_apart:
    width = value_width = max(width, value_width)
  return (_pad_width(query, width), _pad_width(key, width),
          _pad_width(values, value_width), bias, module)


def _attend(module, query, key, values, bias, mask, implementation, dropout,
            d_kv) -> Tuple[torch.Tensor, torch.Tensor]:
  """One call of the attention interface: softmax(Q K^T + bias) V.

  Args:
    module: the layer as the kernel sees it (its key-value groups).
    query: [batch, heads, t, c].
    key: [batch, heads or memory_heads, s, c].
    values: [batch, heads or memory_heads, s, c_v].
    bias: additive, or None.
    mask: boolean, True where a key may be attended to, or None.
    implementation: the attention interface's name.
    dropout: on the attention weights.
    d_kv: the head width of the output.

  Returns:
    ([batch, t, heads, d_kv]: the values' zero columns cut, the weights
    or None).
  """
  if bias is not None and not torch.is_autocast_enabled(
      query.device.type):
    bias = _cast(bias, values.dtype)
  interface = ALL_ATTENTION_FUNCTIONS.get_interface(
      implementation, eager_attention_forward)
  context = contextlib.nullcontext()
  if values.shape[-1] != query.shape[-1] and implementation == "sdpa":
    # cuDNN's kernel accepts narrower values and then fails: not offered.
    context = torch.nn.attention.sdpa_kernel(NARROW_VALUE_BACKENDS)
  with context:
    # The boolean mask and the bias apart, as T5 passes them: the kernel
    # masks their sum (`masked_bias`; transformers' sdpa integration,
    # `create_position_bias_mask`, at the minimum of the keys' dtype).
    out, weights = interface(module, query, key, values, mask,
                             dropout=dropout, scaling=1.0,
                             position_bias=bias, is_causal=False)
  if out.shape[-1] != d_kv:
    out = out[..., :d_kv]
  return out, weights




def masked_bias(bias: Optional[torch.Tensor], mask: Optional[torch.Tensor],
                dtype: torch.dtype) -> Optional[torch.Tensor]:
  """The bias where a key may be attended to, the dtype's minimum elsewhere.

  The masks are applied once, after the relative bias and the synthesized
  logits are summed, by selecting (`torch.where`) rather than adding, as
  transformers' sdpa integration joins a boolean mask and T5's position
  bias (`create_position_bias_mask`), which the sdpa kernel's calls use;
  this serves the eager kernel and the bias's softmax:

  - A masked logit is exactly `torch.finfo(dtype).min`, whatever the sum
    there: a row with every key masked (a left-padded query) is uniform
    and finite in that dtype, never NaN. A mask added to a sum (or a sum
    added to a mask) would leave the dtype once a row's logits sit below
    zero (float16: R's table at -40 puts the row past -65504, which is
    -inf there).
  - The gradient of every term at a masked position is exactly zero, by
    the selection. A sum clamped to the floor (`(bias + mask).clamp(
    min=floor)`) instead passes the gradient of a masked position where
    the rounded sum ties with the floor (`floor + x == floor` for small
    x): whether it ties depends on how the sum is rounded, so a compiler
    that orders or contracts the arithmetic otherwise (inductor's C++
    kernels) trains the relative bias on another gradient.

  Args:
    bias: the summed additive bias, or None: in `dtype` or a wider one
      (float32), which holds that floor.
    mask: boolean, True where a key may be attended to, or None.
    dtype: the narrowest dtype the masked bias meets on its way into the
      kernel (the one it is cast to, or autocast's).

  Returns:
    The masked bias (the bias's dtype, or `dtype` where only a mask is
    given), or `bias` where there is no mask.
  """
  if mask is None:
    return bias
  floor = torch.finfo(dtype).min
  if bias is None:
    return torch.zeros(mask.shape, dtype=dtype,
                       device=mask.device).masked_fill(~mask, floor)
  return torch.where(mask, bias, floor)


def dot_product_only() -> Tuple[str, ...]:
  """The functions of mesh's SelfAttention (T5's): those with `needs_keys`.

  The cross-attention's, and a layer's by default.
  """
  return tuple(n for n, f in FUNCTIONS.items() if f.needs_keys)


def _add_logits(bias, contributions, names, inputs, projections):
  """bias plus the logits of the functions named.

  A term per example (FD's) is added in the logits' dtype (autocast's,
  where on): not promoted to float32 by a float32 bias.

  Args:
    bias: the additive bias, or None.
    contributions: (function, its mixture weight or None), in order.
    names: the functions whose logits join it.
    inputs: (hidden, queries, positions), the functions' inputs.
    projections: the layer's `LayerProjections`.

  Returns:
    The new bias (None where it was None and nothing joined it).
  """
  if not names:
    return bias
  for function, scale in contributions:
    if function.name not in names:
      continue
    term = function.logits(*inputs, scale, projections)
    if term.shape[0] > 1:
      dtype = _logits_dtype(inputs[0])
      bias = None if bias is None else _cast(bias, dtype)
      term = _cast(term, dtype)
    bias = term if bias is None else bias + term
  return bias


class Route(enum.Enum):
  """How one call computes a layer's attention, once its bias is known.

  COLUMNS: each function not in the bias gives columns, side by side, so
    that the kernel's Q K^T is the mixture (eq. 8).
  LOGITS: the functions whose key side is a weight (D's, FR's) have added
    their logits to the bias (`Plan.logits`); the kernel gets the layer's
    own columns (V's).
  SOFTMAX_OF_BIAS: no columns (R, Fix, FD; D's or FR's logits in the
    bias): softmax(bias) V outside the kernel, the softmax once for the
    batch where the bias is shared by it (R, Fix unpadded).
  ZERO_COLUMNS: no columns, a bias per example (FD, a padded batch) where
    the values keep their own width: the kernel on zero queries and keys,
    which writes no weights.
  """
  COLUMNS = "columns"
  LOGITS = "logits"
  SOFTMAX_OF_BIAS = "softmax_of_bias"
  ZERO_COLUMNS = "zero_columns"


class Plan(NamedTuple):
  """One call's route and the functions whose logits its route adds.

  Attributes:
    route: the Route.
    logits: the functions whose logits the route adds to the bias (beyond
      `bias_functions`'); the others not in the bias give columns.
  """
  route: Route
  logits: FrozenSet[str]


def bias_functions(functions: Sequence[nn.Module],
                   bias_gradient: bool) -> FrozenSet[str]:
  """The functions whose logits join the bias before the call is planned.

  Those that contribute a bias (R, Fix, FD); where the kernel takes a bias
  with a gradient (CUDA, eager), the input-independent ones too (FR's
  R1 R2^T: one [1, heads, t, s] for the batch rather than k more columns
  per example, which would run FR+V in the kernel's wider head tier).

  Args:
    functions: the layer's synthesizing functions (modules or classes).
    bias_gradient: the kernel keeps a bias with a gradient fused
      (`KernelLayout.bias_gradient`).

  Returns:
    Their names.
  """
  return frozenset(
      f.name for f in functions if not f.needs_keys and (
          f.contributes == BIAS or (bias_gradient and f.input_independent)))


def plan_attention(functions: Sequence[nn.Module], in_bias: FrozenSet[str],
                   layout: "KernelLayout", one_query: bool,
                   bias_needs_grad: bool, bias_per_example: bool) -> Plan:
  """The plan of one call: a pure function of what the call is.

  Args:
    functions: the layer's functions (modules or classes).
    in_bias: those whose logits have joined the bias (`bias_functions`).
    layout: the kernel's layout (`_kernel_layout`, or `EAGER_LAYOUT`).
    one_query: one query (a decoding step): one row of logits costs less
      than copying the cached keys and values into wider columns.
    bias_needs_grad: the bias needs a gradient (sdpa's CPU kernels take
      none: their math kernel writes the logits anyway, so the logits join
      it).
    bias_per_example: the bias has the batch's dimension.

  Returns:
    The Plan; docs/pytorch.md tabulates its route for every variant.
  """
  logits = frozenset()
  if one_query or layout.writes_logits or (
      bias_needs_grad and not layout.bias_gradient):
    logits = frozenset(f.name for f in functions
                       if f.name not in in_bias and not f.needs_keys)
  contributing = in_bias | logits
  if any(f.name not in contributing for f in functions):
    return Plan(Route.LOGITS if logits else Route.COLUMNS, logits)
  if layout.values_apart and bias_per_example and not one_query:
    return Plan(Route.ZERO_COLUMNS, logits)
  return Plan(Route.SOFTMAX_OF_BIAS, logits)


def key_bias_as_column(layout: "KernelLayout", has_bias: bool,
                       bias_needs_grad: bool,
                       key_bias_needs_grad: bool) -> bool:
  """Whether a function's bias per key (D's b2) is a column of the keys.

  It is, against a column of ones in the queries, where there is no bias,
  or where it would give a CPU kernel's bias a gradient (its math path,
  which writes the logits); else it is added to the bias (on CUDA the head
  width stays a multiple of the kernel's).

  Args:
    layout: the kernel's layout on the device.
    has_bias: the call has an additive bias.
    bias_needs_grad: that bias needs a gradient.
    key_bias_needs_grad: the bias per key needs one (grad enabled).

  Returns:
    True for a column.
  """
  if not has_bias:
    return True
  return (not layout.bias_gradient and key_bias_needs_grad and
          not bias_needs_grad)


class _EveryHead:
  """A layer as the kernel sees it when its keys and values have every head.

  Args:
    layer: the attention layer.
  """
  num_key_value_groups = 1
  is_causal = False

  def __init__(self, layer: nn.Module):
    self._layer = [layer]  # a list: not registered as a submodule

  @property
  def training(self) -> bool:
    return self._layer[0].training

  @property
  def layer_idx(self) -> Optional[int]:
    return self._layer[0].layer_idx


# The fused kernel's head widths, on CUDA, are multiples of this.
KERNEL_WIDTH_MULTIPLE = 8
# sdpa's kernels for values narrower than queries and keys (the
# memory-efficient one; math where it cannot run).
NARROW_VALUE_BACKENDS = [torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION,
                         torch.nn.attention.SDPBackend.MATH]


class KernelLayout(NamedTuple):
  """What an attention kernel takes on a device.

  Attributes:
    multiple: queries' and keys' head width is a multiple of this.
    values_apart: the values keep a width of their own (a multiple too);
      else queries, keys and values have one width.
    bias_gradient: a bias that needs a gradient keeps the call fused.
    writes_logits: the kernel writes the logits (eager): every function's
      logits but the layer's own columns join the bias, as readable as
      the equations.
  """
  multiple: int
  values_apart: bool
  bias_gradient: bool
  writes_logits: bool = False


# The eager kernel's layout: any width, any bias, the logits written.
EAGER_LAYOUT = KernelLayout(1, False, True, True)


def _kernel_layout(is_cuda: bool, has_bias: bool) -> KernelLayout:
  """The layout of one call's fused kernel.

  On CUDA a bias sends sdpa to its memory-efficient kernel, which takes
  narrower values and returns the bias' gradient; its flash kernel (no
  bias) and the CPU's kernels take one width, and the CPU's no bias that
  needs a gradient (its math kernel writes the logits).

  Args:
    is_cuda: the call runs on CUDA.
    has_bias: the call has an additive bias.

  Returns:
    The KernelLayout.
  """
  if not is_cuda:
    return KernelLayout(1, False, False)
  return KernelLayout(KERNEL_WIDTH_MULTIPLE, has_bias, True)


def _round_up(width: int, multiple: int) -> int:
  return -(-width // multiple) * multiple


def _pad_width(x: torch.Tensor, width: int) -> torch.Tensor:
  """x [..., c] with zero columns up to [..., width]."""
  if x.shape[-1] == width:
    return x
  return nn.functional.pad(x, (0, width - x.shape[-1]))


def _concat_columns(parts: List[torch.Tensor], batch: int,
                    dtype: torch.dtype) -> torch.Tensor:
  """[1 or batch, heads, n, c_i] -> [batch, heads, n, sum c_i] in dtype.

  One part is expanded over the batch, not copied; several are
  concatenated, each read as it lies (the copy is the concatenation's), a
  part without the batch expanded.
  """
  if len(parts) > 1:
    # Converted where they differ: concatenation would promote them all.
    return torch.cat([_expand_batch(_cast(p, dtype), batch) for p in parts],
                     dim=-1)
  part = parts[0]
  if part.stride(-1) != 1:
    # The fused kernels on CUDA read columns of stride 1 (D's keys are a
    # transposed weight): converted and copied at once, before the batch
    # is expanded.
    part = (part.contiguous() if part.dtype == dtype else
            part.to(dtype, memory_format=torch.contiguous_format))
  return _expand_batch(_cast(part, dtype), batch)


def _expand_batch(x: torch.Tensor, batch: int) -> torch.Tensor:
  """[1 or batch, ...] -> [batch, ...]: a view, dispatched only if needed."""
  return x if x.shape[0] == batch else x.expand(batch, *x.shape[1:])
