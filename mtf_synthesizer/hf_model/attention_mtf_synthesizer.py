# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention layer: synthesizing functions composed in one kernel call.

One attention path serves every function, one call of transformers'
attention interface per layer (`config._attn_implementation`). With "sdpa"
(fused) each function contributes query and key columns whose product is
its logits (V: Q and K; D: relu(W1 X + b1) and W2^T, its b2 a bias per key;
FR: R1's and R2's rows), put side by side so that the kernel's Q K^T is the
mixture (eq. 8), or an additive bias (R, Fix, FD), which joins the relative
position bias and the masks (both computed once per stack). With "eager"
(the readable reference) every function but the dot product adds its
logits to the bias. Y = softmax(S + relative position bias + masks) G(X)
W_o (eq. 3).
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
from .functions_mtf_synthesizer import Positions
from .functions_mtf_synthesizer import _cast
from .functions_mtf_synthesizer import _linear
from .functions_mtf_synthesizer import _logits_dtype
from .functions_mtf_synthesizer import _times_each_head
# pylint: enable=relative-beyond-top-level


def _plain_linear(module: nn.Module) -> bool:
  """Whether a projection computes x W^T and nothing else.

  A plain nn.Linear without a bias or hooks: not a layer that an adapter
  (PEFT's LoRA), a quantization or offloading (accelerate's hooks, which
  replace `forward`) has replaced or wrapped. Its kernel can be read and
  scaled before the matmul; any other projection must be called.
  """
  # pylint: disable=protected-access,unidiomatic-typecheck
  return (type(module) is nn.Linear and module.bias is None and
          not module._forward_hooks and not module._forward_pre_hooks and
          "forward" not in vars(module))


def _add_to_bias(bias: Optional[torch.Tensor],
                 term: torch.Tensor) -> torch.Tensor:
  """bias + term, where a missing bias is zero."""
  return term if bias is None else bias + term


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
  """softmax(Q K^T * scaling + bias + mask) V, the logits in float32.

  Args:
    module: the attention layer (num_key_value_groups).
    query: [batch, heads, t, d_kv].
    key: [batch, memory_heads, s, d_kv].
    value: [batch, memory_heads, s, d_kv].
    attention_mask: additive, broadcastable to [batch, heads, t, s].
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
  if attention_mask is not None:
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
  ("dot_product",) is mesh's SelfAttention (and T5's), and the
  cross-attention's.
  """

  def __init__(self, config: MtfSynthesizerConfig,
               functions: Tuple[str, ...] = ("dot_product",),
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
    self.scale_queries = config.scale_queries
    self.scaling = config.d_kv**-0.5 if config.scale_queries else 1.0
    self.function_names = tuple(functions)
    for name in functions:
      setattr(self, name, FUNCTIONS[name](config))
    self.needs_keys = any(f.needs_keys for f in self.functions)
    # A function other than the dot product reads the unscaled queries.
    self.function_reads_queries = any(
        f.needs_queries and not f.needs_keys for f in self.functions)
    self.needs_queries = self.needs_keys or self.function_reads_queries
    # The functions whose logits join the bias, by whether the device's
    # kernel takes a bias with a gradient: fixed by the functions, so not
    # recomputed at every call.
    self.bias_functions = {
        gradient: bias_functions(self.functions, gradient)
        for gradient in (False, True)}
    d = config.d_model
    inner = self.num_heads * self.d_kv
    memory_inner = self.memory_heads * self.d_kv
    if self.needs_queries:
      # mesh folds the 1/sqrt(d_kv) query scale into the initializer.
      self.q = _linear(d, inner, d**-0.5 if config.scale_queries
                       else (d * self.d_kv)**-0.5)
    if self.needs_keys:
      self.k = _linear(d, memory_inner, d**-0.5)
    self.v = _linear(d, memory_inner, d**-0.5)
    self.o = _linear(inner, d, inner**-0.5)
    if len(functions) > 1 and config.learned_mixture_weights:
      self.alpha_logits = nn.Parameter(torch.zeros(len(functions),
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

  def _scaled_queries(self, x: torch.Tensor, scale) -> torch.Tensor:
    """Queries [batch, heads, t, d_kv] times a scale per head (or one).

    The scale goes on the smaller of the two: the query kernel's rows (no
    [batch, heads, t, d_kv] product kept for the backward), or, for fewer
    rows than d_model (a decoding step), the queries. Only a plain
    projection's kernel is scaled: one an adapter (PEFT's LoRA), a
    quantization or offloading has replaced or wrapped is called as it is.
    """
    if scale is None:
      return self._heads(x, self.q)
    b, t, d = x.shape
    if b * t < d or not _plain_linear(self.q):
      queries = self._heads(x, self.q)
      if torch.is_tensor(scale):
        return _times_each_head(queries, scale)
      return queries * scale
    weight = self.q.weight.view(self.num_heads, self.d_kv, -1)
    if torch.is_tensor(scale):
      weight = weight * _cast(scale, weight.dtype).view(-1, 1, 1)
    else:
      weight = weight * scale
    out = nn.functional.linear(x, weight.view(self.num_heads * self.d_kv, -1))
    return out.view(b, t, -1, self.d_kv).transpose(1, 2)

  def forward(self, hidden: torch.Tensor, bias: Optional[torch.Tensor],
              positions: Optional[Positions] = None,
              key_value_states: Optional[torch.Tensor] = None,
              past_key_values: Optional[Cache] = None,
              output_attentions: bool = False
              ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Attends.

    Args:
      hidden: the normalized layer input [batch, t, d_model].
      bias: additive: masks and relative position bias, broadcastable to
        [batch, heads, t, s]; None: nothing masked.
      positions: the positions (self-attention with synthesizing functions).
      key_value_states: the encoder output (cross-attention).
      past_key_values: the cache (DynamicCache or EncoderDecoderCache).
      output_attentions: return the attention weights.

    Returns:
      ([batch, t, d_model], the weights [batch, heads, t, s] or None).
    """
    b, t, _ = hidden.shape
    cross = key_value_states is not None
    cache = past_key_values
    updated = False
    if isinstance(cache, EncoderDecoderCache):
      updated = cross and bool(cache.is_updated.get(self.layer_idx))
      cache = (cache.cross_attention_cache if cross
               else cache.self_attention_cache)
    if updated:
      stored = cache.layers[self.layer_idx]
      keys, values = stored.keys, stored.values
    else:
      source = key_value_states if cross else hidden
      values = self._heads(source, self.v)
      # Without keys the cache keeps one column of the values in their
      # place (it measures its length by the keys).
      keys = self._heads(source, self.k) if self.needs_keys else (
          values[..., :1])
      if cache is not None:
        keys, values = cache.update(keys, values, self.layer_idx)
        if cross:
          past_key_values.is_updated[self.layer_idx] = True
    # pylint: disable-next=protected-access
    implementation = self.config._attn_implementation or "eager"
    if output_attentions:
      implementation = "eager"
    if implementation == "eager":
      queries = self._heads(hidden, self.q) if self.needs_queries else None
      out, weights = self._reference(hidden, queries, keys, values, bias,
                                     positions, output_attentions)
    else:
      out, weights = self._fused(hidden, keys, values, bias, positions,
                                 implementation)
    if torch.compiler.is_exporting():
      # The ONNX exporter keeps SDPA whole: its output's strides change
      # between the exporter's passes, so the flattening reads a copy.
      out = out.clone(memory_format=torch.contiguous_format)
    out = self.o(out.reshape(b, t, -1))
    return out, (weights if output_attentions else None)

  def _reference(self, hidden, queries, keys, values, bias, positions,
                 output_attentions=False):
    """The readable path: each function's logits added to the bias.

    Args:
      hidden: the layer input [batch, t, d_model].
      queries: [batch, heads, t, d_kv] or None.
      keys: [batch, memory_heads, s, d_kv] (a placeholder without V).
      values: [batch, memory_heads, s, d_kv].
      bias: masks and relative bias, or None.
      positions: the positions.
      output_attentions: the weights are returned: compute them per example.

    Returns:
      ([batch, t, heads, d_kv], the weights [batch, heads, t, s]).
    """
    alpha = self.mixture_weights()
    for i, function in enumerate(self.functions):
      if function.needs_keys:  # the dot product: the kernel's Q K^T
        continue
      term = function.logits(hidden, queries, positions,
                             None if alpha is None else alpha[i])
      bias = _add_to_bias(bias, term)
    dropout = self.dropout if self.training else 0.0
    if not self.needs_keys:
      # No Q K^T: the weights are softmax(bias).
      if output_attentions:
        # Each example's weights, the ones the output is computed from (a
        # table's are otherwise shared by the batch).
        bias = bias.expand(hidden.shape[0], self.num_heads, hidden.shape[1],
                           bias.shape[-1])
      return synthesized_attention_forward(self, values, bias, dropout)
    query = queries
    if alpha is not None:
      weight = alpha[self.function_names.index("dot_product")]
      query = _times_each_head(query, weight)
    if bias is not None and not torch.is_autocast_enabled(
        query.device.type):
      bias = bias.to(query.dtype)
    return eager_attention_forward(self, query, keys, values, None,
                                   scaling=self.scaling, dropout=dropout,
                                   position_bias=bias)

  def _fused(self, hidden, keys, values, bias, positions, implementation):
    """One kernel call: every function's query and key columns side by side.

    The kernel's logits are concat_f(q_f) . concat_f(k_f) + bias = the
    mixture sum_f alpha_f S_f (eq. 8), alpha_f on V's queries and on the
    other functions' key side (a slice of weights, without a batch
    dimension); R, Fix, FD, the functions' biases per key (D's b2) and,
    where the kernel takes a bias with a gradient (CUDA), FR's batch-free
    logits join the bias. The scale is 1: run-time query scaling
    (`scale_queries`) multiplies V's columns only. Where the kernel allows,
    the values keep their width (`_kernel_layout`); there a layer without
    columns (R, Fix, FD; FR on CUDA) whose bias differs per example runs
    the kernel on zero queries and keys. On CPU, with a bias that needs a
    gradient, only V's columns go in (see below).

    Args: as `_reference` (without queries), and
      implementation: the attention interface's name.

    Returns:
      ([batch, t, heads, d_kv], None).
    """
    dropout = self.dropout if self.training else 0.0
    is_cuda = hidden.is_cuda
    alpha = self.mixture_weights()
    modules = self.functions
    scales = ([None] * len(modules) if alpha is None else alpha.unbind(0))
    queries = None  # unscaled, for a function that reads them (D's option)
    if self.function_reads_queries:
      queries = self._heads(hidden, self.q)
    functions = list(zip(modules, scales))
    in_bias = self.bias_functions[
        _kernel_layout(is_cuda, True).bias_gradient]
    for function, scale in functions:
      if function.name in in_bias:
        term = function.logits(hidden, queries, positions, scale)
        if term.shape[0] > 1:
          # Per example (FD's), in the logits' dtype (autocast's, where
          # on): not promoted to float32 by a float32 bias.
          dtype = _logits_dtype(hidden)
          bias = None if bias is None else _cast(bias, dtype)
          term = _cast(term, dtype)
        bias = _add_to_bias(bias, term)
    layout = _kernel_layout(is_cuda, bias is not None)
    route = plan_attention(
        self.function_names, in_bias, layout, self.d_kv,
        one_query=hidden.shape[1] == 1,
        bias_needs_grad=bias is not None and bias.requires_grad,
        bias_per_example=bias is not None and bias.shape[0] > 1)
    if route is Route.DOT_PRODUCT:
      return self._kernel(self, self._heads(hidden, self.q), keys, values,
                          bias, implementation, dropout, self.scaling), None
    if route is Route.LOGITS:
      for function, scale in functions:
        if not function.needs_keys and function.name not in in_bias:
          bias = _add_to_bias(bias, function.logits(hidden, queries,
                                                    positions, scale))
      if not self.needs_keys:
        return synthesized_attention_forward(self, values, bias,
                                             dropout)[0], None
      query = self._scaled_queries(hidden, self._dot_product_scale(scales))
      return self._kernel(self, _cast(query, values.dtype), keys, values,
                          bias, implementation, dropout), None
    if route is Route.SOFTMAX_OF_BIAS:
      return synthesized_attention_forward(self, values, bias,
                                           dropout)[0], None
    multiple = layout.multiple
    query_parts, key_parts = [], []
    if route is Route.ZERO_COLUMNS:
      # No columns and a bias per example: the kernel on zero queries and
      # keys, which writes no weights.
      query_parts = [hidden.new_zeros(1, self.num_heads, hidden.shape[1],
                                      multiple)]
      key_parts = [hidden.new_zeros(1, self.memory_heads, values.shape[2],
                                    multiple)]
    key_biases = []
    for function, scale in functions:
      if function.needs_keys:
        query_parts.append(self._scaled_queries(
            hidden, self._dot_product_scale(scales)))
        key_parts.append(keys)
      elif function.name not in in_bias:
        query, key, key_bias = function.columns(hidden, queries, positions,
                                                scale)
        query_parts.append(query)
        key_parts.append(key)
        if key_bias is not None:
          key_biases.append(key_bias)
    for key_bias in key_biases:  # [1|b, heads, s]
      if key_bias_as_column(
          layout, has_bias=bias is not None,
          bias_needs_grad=bias is not None and bias.requires_grad,
          key_bias_needs_grad=(torch.is_grad_enabled() and
                               key_bias.requires_grad)):
        query_parts.append(hidden.new_ones(1, self.num_heads,
                                           hidden.shape[1], 1))
        key_parts.append(key_bias[..., None])
      else:
        bias = bias + key_bias[:, :, None, :]
    module = self
    if self.num_key_value_groups > 1 and any(
        k.shape[1] != self.memory_heads for k in key_parts):
      # Per-head key columns: V's shared keys and values join every head.
      module = self.every_head
      values = _repeat_heads(values, self.num_key_value_groups)
      key_parts = [_repeat_heads(k, self.num_key_value_groups)
                   if k.shape[1] != self.num_heads else k for k in key_parts]
    dtype = values.dtype
    query = _concat_columns(query_parts, values.shape[0], dtype)
    key = _concat_columns(key_parts, values.shape[0], dtype)
    # Zero columns change no logit; the values' zero columns are cut from
    # the output.
    width = _round_up(query.shape[-1], multiple)
    value_width = _round_up(self.d_kv, multiple)
    if not layout.values_apart:
      width = value_width = max(width, value_width)
    query, key = _pad_width(query, width), _pad_width(key, width)
    values = _pad_width(values, value_width)
    return self._kernel(module, query, key, values, bias, implementation,
                        dropout), None

  def _dot_product_scale(self, scales):
    """The dot product's query scale, or None.

    Its mixture weight, times 1/sqrt(d_kv) where the queries are scaled at
    run time (`scale_queries`).

    Args:
      scales: each function's mixture weight [heads] (None without any).

    Returns:
      The scale: a tensor [heads], a number, or None.
    """
    scale = scales[self.function_names.index("dot_product")]
    if self.scale_queries:
      scale = self.scaling if scale is None else scale * self.scaling
    return scale

  def _kernel(self, module, query, key, values, bias, implementation,
              dropout, scaling=1.0) -> torch.Tensor:
    """One call of the attention interface.

    Args:
      module: the layer as the kernel sees it (its key-value groups).
      query: [batch, heads, t, c].
      key: [batch, heads or memory_heads, s, c].
      values: [batch, heads or memory_heads, s, c_v].
      bias: additive, or None.
      implementation: the attention interface's name.
      dropout: on the attention weights.
      scaling: multiplies Q K^T.

    Returns:
      [batch, t, heads, d_kv]: the values' zero columns cut.
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
      out, _ = interface(module, query, key, values, None, dropout=dropout,
                         scaling=scaling, position_bias=bias,
                         is_causal=False)
    if out.shape[-1] != self.d_kv:
      out = out[..., :self.d_kv]
    return out


class Route(enum.Enum):
  """How one fused call computes a layer's attention.

  DOT_PRODUCT: the dot product alone (V, cross-attention), the kernel's own
    call with the query scale as its `scaling`.
  LOGITS: every function but the dot product adds its logits to the bias,
    as the eager path does; the kernel computes the dot product alone
    (softmax(bias) V without one).
  COLUMNS: each function's query and key columns side by side, so that
    the kernel's Q K^T is the mixture (eq. 8).
  SOFTMAX_OF_BIAS: no columns, a bias shared by the batch (R, Fix
    unpadded): softmax(bias) V, the softmax once for every example.
  ZERO_COLUMNS: no columns, a bias per example (FD, a padded batch) where
    the values keep their own width: the kernel on zero queries and keys,
    which writes no weights.
  """
  DOT_PRODUCT = "dot_product"
  LOGITS = "logits"
  COLUMNS = "columns"
  SOFTMAX_OF_BIAS = "softmax_of_bias"
  ZERO_COLUMNS = "zero_columns"


def bias_functions(functions: Sequence[nn.Module],
                   bias_gradient: bool) -> FrozenSet[str]:
  """The functions whose logits join the bias before the kernel is chosen.

  Those that contribute a bias (R, Fix, FD); where the kernel takes a bias
  with a gradient (CUDA), the input-independent ones too (FR's R1 R2^T: one
  [1, heads, t, s] for the batch rather than k more columns per example,
  which would run FR+V in the kernel's wider head tier).

  Args:
    functions: the layer's synthesizing functions.
    bias_gradient: the device's kernel keeps a bias with a gradient fused
      (`KernelLayout.bias_gradient`).

  Returns:
    Their names.
  """
  return frozenset(
      f.name for f in functions if not f.needs_keys and (
          f.contributes == BIAS or (bias_gradient and f.input_independent)))


def plan_attention(names: Tuple[str, ...], in_bias: FrozenSet[str],
                   layout: "KernelLayout", d_kv: int, one_query: bool,
                   bias_needs_grad: bool, bias_per_example: bool) -> Route:
  """The route of one fused call: a pure function of what the call is.

  Args:
    names: the layer's functions.
    in_bias: those whose logits have joined the bias (`bias_functions`).
    layout: the kernel's layout on the device, with or without a bias
      (`_kernel_layout`).
    d_kv: the head width.
    one_query: one query (a decoding step): one row of logits costs less
      than copying the cached keys and values into wider columns.
    bias_needs_grad: the bias needs a gradient (sdpa's CPU kernels take
      none: their math kernel writes the logits anyway, so the logits join
      it).
    bias_per_example: the bias has the batch's dimension.

  Returns:
    The Route; docs/pytorch.md tabulates it for every variant.
  """
  if names == ("dot_product",) and d_kv % layout.multiple == 0:
    return Route.DOT_PRODUCT
  if one_query or (bias_needs_grad and not layout.bias_gradient):
    return Route.LOGITS
  if all(name in in_bias for name in names):
    if layout.values_apart and bias_per_example:
      return Route.ZERO_COLUMNS
    return Route.SOFTMAX_OF_BIAS
  return Route.COLUMNS


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
  """What sdpa's fused kernels take on a device.

  Attributes:
    multiple: queries' and keys' head width is a multiple of this.
    values_apart: the values keep a width of their own (a multiple too);
      else queries, keys and values have one width.
    bias_gradient: a bias that needs a gradient keeps the call fused.
  """
  multiple: int
  values_apart: bool
  bias_gradient: bool


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
