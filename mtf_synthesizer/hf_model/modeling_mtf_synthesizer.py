# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A Synthesizer T5 in PyTorch, computing what the mesh model computes.

The classes follow transformers' T5: `MtfSynthesizerModel` (the
encoder-decoder), `MtfSynthesizerForConditionalGeneration`
(`AutoModelForSeq2SeqLM`) and `MtfSynthesizerForCausalLM`
(`AutoModelForCausalLM`, one causal stack). Inside a stack the names are
T5's (`block.0.layer.0.SelfAttention.q`), with each synthesizing function's
weights under its name (`SelfAttention.random.R`); `mtf_synthesizer.export`
maps mesh's variables to them.

The synthesizing functions (Tay et al., sec. 3), per head h, for a query at
position i and a memory position j:

  Dense (D)            S_ij = (W2 relu(W1 X_i + b1) + b2)_j       eq. 1-2
  Random (R), Fix      S_ij = R_ij                                eq. 4
  FactorizedDense (FD) S_ij = A_i[j mod a] * B_i[floor(j / a)]    eq. 5-6
  FactorizedRandom     S_ij = (R1 R2^T)_ij                        eq. 7
  DotProduct (V)       S_ij = Q_i . K_j
  Mixture              S = sum_f alpha_f S_f, alpha = softmax(w)  eq. 8

and Y = softmax(S + relative position bias + masks) G(X) W_o (eq. 3).

One attention path serves them all, one call of transformers' attention
interface per layer (`config._attn_implementation`). With "sdpa" (fused)
each function contributes query and key columns whose product is its logits
(V: Q and K; D: relu(W1 X + b1) and W2^T, its b2 a bias per key; FR: R1's
and R2's rows), put side by side so that the kernel's Q K^T is the mixture,
or an additive bias (R, Fix, FD), which joins the relative position bias
and the masks (both computed once per stack). With "eager" (the readable
reference) every function but the dot product adds its logits to the bias.
The tables are read by slicing (rows and columns of contiguous positions);
only a batch with per-example positions (`position_ids`, e.g. left padding)
gathers.

Initialization is mesh's (`_init_weights`): a model from a config trains
from scratch as the mesh model would. Masks follow mesh: without an
attention mask, token id 0 marks the inputs' padding; a masked logit gets
-1e9.
"""

import contextlib
import dataclasses
import math
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple, Union

import torch
import torch.nn.attention
from torch import nn
from transformers import GenerationMixin
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache
from transformers.cache_utils import DynamicCache
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput
from transformers.modeling_outputs import BaseModelOutputWithPastAndCrossAttentions
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.modeling_outputs import Seq2SeqModelOutput
from transformers.utils import ModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.optimization import Adafactor

# pylint: disable-next=relative-beyond-top-level
from .configuration_mtf_synthesizer import MtfSynthesizerConfig

# mesh's attention bias for a position that may not be attended to.
MASKED = -1e9


def relative_position_bucket(relative_position: torch.Tensor,
                             bidirectional: bool, num_buckets: int,
                             max_distance: int) -> torch.Tensor:
  """T5's relative position buckets, in float32 as mesh computes them.

  Args:
    relative_position: memory position minus query position (int64).
    bidirectional: encoder (True) or causal stack (False).
    num_buckets: buckets (half for each direction when bidirectional).
    max_distance: distances from here on share the last bucket.

  Returns:
    Bucket ids, like relative_position.
  """
  n = -relative_position
  ret = torch.zeros_like(n)
  if bidirectional:
    num_buckets //= 2
    ret = ret + (n < 0).long() * num_buckets
    n = n.abs()
  else:
    n = n.clamp(min=0)
  max_exact = num_buckets // 2
  scale = math.log(max_distance / max_exact)
  ratio = torch.log(n.clamp(min=1).float() / max_exact) / scale
  large = max_exact + (ratio * (num_buckets - max_exact)).long()
  large = large.clamp(max=num_buckets - 1)
  return ret + torch.where(n < max_exact, n, large)


class MtfSynthesizerRMSNorm(nn.Module):
  """mesh's norm: x / sqrt(mean(x^2) + epsilon) * weight (no mean, no bias)."""

  def __init__(self, d_model: int, epsilon: float):
    super().__init__()
    self.weight = nn.Parameter(torch.ones(d_model))
    self.epsilon = epsilon

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    # One cast: the TorchScript tracer chains a second no-op cast of x onto
    # the first, which onnxruntime's graph optimizer then mis-wires.
    x32 = x.float()
    variance = x32.pow(2).mean(-1, keepdim=True)
    normed = (x32 * torch.rsqrt(variance + self.epsilon)).to(x.dtype)
    return normed * self.weight.to(x.dtype)


def _activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
  """mesh's activation by name (gelu: its tanh approximation)."""
  functions = {
      "relu": torch.relu,
      "gelu": lambda x: nn.functional.gelu(x, approximate="tanh"),
      "gelu_new": lambda x: nn.functional.gelu(x, approximate="tanh"),
      "silu": nn.functional.silu,
      "swish": nn.functional.silu,
      "linear": lambda x: x,
  }
  if name not in functions:
    raise ValueError("activation %r is not supported (supported: %s)" %
                     (name, sorted(functions)))
  return functions[name]


def _linear(d_in: int, d_out: int, std: float, bias: bool = False,
            truncated: bool = False) -> nn.Linear:
  """nn.Linear that carries mesh's initializer of its kernel.

  Args:
    d_in: input width.
    d_out: output width.
    std: the initializer's standard deviation (before truncation).
    bias: with a bias (initialized to 0).
    truncated: a normal truncated at two standard deviations (mesh's
      `mtf.layers.dense` default) instead of a plain normal.

  Returns:
    The layer; `_init_weights` reads its `mesh_initializer`.
  """
  layer = nn.Linear(d_in, d_out, bias=bias)
  layer.mesh_initializer = ("truncated" if truncated else "normal", std)
  return layer


@dataclasses.dataclass
class Positions:
  """Query and memory positions of one self-attention call.

  Attributes:
    start: the first query's position (the cache's length when decoding;
      with a static cache a tensor, and `query` and `memory` are given).
    length: queries.
    memory_length: memory positions (start + length).
    query: [batch, length] per-example positions, or None: start + arange.
    memory: [batch, memory_length] per-example positions, or None: arange.
  """
  start: Union[int, torch.Tensor]
  length: int
  memory_length: int
  query: Optional[torch.Tensor] = None
  memory: Optional[torch.Tensor] = None


# ---------------------------------------------------------------------------
# Synthesizing functions. Each but the dot product returns its logits
# [batch or 1, heads, length, memory_length] in float32 (FD's, which has a
# batch dimension, in autocast's dtype where autocast is on: the dtype the
# kernel reads), times `scale` (a mixture weight per head) applied to its
# cheapest factor: the readable reference that the eager kernel adds to its
# bias. Each also says what it gives the fused kernel (`contributes`):
# COLUMNS, a query side [1 or batch, heads, length, c], a key side [1 or
# batch, heads, memory_length, c] and a bias per key [1 or batch, heads,
# memory_length] (or None) that make its logits (`columns()`), or BIAS, its
# logits as an additive bias (`forward()`).

# What a function contributes to the fused kernel.
COLUMNS = "columns"
BIAS = "bias"

# The synthesizing functions by name (mesh's `synthesizers.BY_NAME` names):
# each class registers itself when defined; the dot product is the kernel's
# Q K^T, with no module and no weights of its own.
FUNCTIONS: Dict[str, Optional[type]] = {"dot_product": None}


class MtfSynthesizerFunction(nn.Module):
  """A synthesizing function's module: what it computes and how it starts.

  A subclass declares everything the rest of the model needs: `name` (its
  key in FUNCTIONS, mesh's name; defining the class registers it),
  `contributes` (COLUMNS or BIAS), `batch_free` (its logits do not depend
  on the input: one [1, heads, t, s] for the whole batch), `needs_queries`,
  and `initializers()` (mesh's initializer of each weight it holds itself;
  `nn.Linear` layers carry theirs, see `_linear`). Its weights have mesh's
  local names (`<function>/<name>`), which is how the export finds them.
  """
  name = ""
  contributes = BIAS
  batch_free = False
  needs_queries = False

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if cls.__dict__.get("name"):
      FUNCTIONS[cls.name] = cls

  def initializers(self, config: MtfSynthesizerConfig
                   ) -> Dict[str, Tuple[str, float]]:
    """mesh's initializer of each weight the module holds directly.

    Args:
      config: the model's configuration.

    Returns:
      Weight name -> (kind, scale): ("normal", std), ("uniform", limit)
      or ("zeros", 0.0); `initializer_factor` multiplies the scale.
    """
    raise NotImplementedError


def _logits_dtype(x: torch.Tensor) -> torch.dtype:
  """float32, or autocast's dtype where autocast is on for x's device."""
  kind = x.device.type
  if torch.is_autocast_enabled(kind):
    return torch.get_autocast_dtype(kind)
  return torch.float32


def _cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
  """x in dtype: x itself where it has it.

  No call is dispatched then: decoding steps are bound by the host's work.
  """
  return x if x.dtype == dtype else x.to(dtype)


def _glorot_limit(fan_in: int, fan_out: int) -> float:
  """The glorot uniform limit sqrt(6 / (fan_in + fan_out))."""
  return math.sqrt(6.0 / (fan_in + fan_out))


def _per_head(table: torch.Tensor, scale: Optional[torch.Tensor]):
  """table [heads, ...] * scale [heads], in float32."""
  table = _cast(table, torch.float32)
  if scale is None:
    return table
  return table * scale.view(-1, *([1] * (table.dim() - 1)))


def _times_heads(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
  """x [batch, heads, ...] times scale [heads], in x's dtype."""
  return x * _cast(scale, x.dtype).view(1, -1, *([1] * (x.dim() - 2)))


def _span(x: torch.Tensor, dim: int, start, length: int) -> torch.Tensor:
  """x's positions start .. start + length - 1 along dim.

  x itself where they are all of it: a slice would cost its backward a
  zeroed copy of the whole (R's [heads, N, N] table in every layer).

  Args:
    x: the tensor.
    dim: the positions' dimension.
    start: the first position (a number).
    length: how many.

  Returns:
    x, or a view of it.
  """
  if start == 0 and length == x.shape[dim]:
    return x
  return x.narrow(dim, start, length)


def _rows(table: torch.Tensor, positions: Positions) -> torch.Tensor:
  """[heads, N, ...] -> the query rows: [1 or batch, heads, length, ...]."""
  if positions.query is None:
    return _span(table, 1, positions.start, positions.length)[None]
  return table[:, positions.query].transpose(0, 1)


def _columns(table: torch.Tensor, positions: Positions) -> torch.Tensor:
  """[heads, ..., N] -> memory columns: [1 or batch, heads, ..., s]."""
  if positions.memory is None:
    return _span(table, -1, 0, positions.memory_length)[None]
  # [heads, ..., batch, s] -> [batch, heads, ..., s]
  gathered = table[..., positions.memory]
  return gathered.movedim(-2, 0)


def _key_rows(table: torch.Tensor, positions: Positions) -> torch.Tensor:
  """[heads, N, c] -> the memory rows: [1 or batch, heads, s, c]."""
  if positions.memory is None:
    return _span(table, 1, 0, positions.memory_length)[None]
  return table[:, positions.memory].transpose(0, 1)


class MtfSynthesizerRandom(MtfSynthesizerFunction):
  """R (eq. 4): a trainable [heads, N, N] table, read at the positions."""
  name = "random"
  contributes = BIAS
  batch_free = True

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__()
    n = config.synthesizer_max_length
    self.R = nn.Parameter(torch.empty(config.num_heads, n, n))

  def initializers(self, config):
    # The original release's glorot scale on its [N, heads, N] variable.
    n = config.synthesizer_max_length
    return {"R": ("uniform", _glorot_limit(config.num_heads * n, n * n))}

  def table(self) -> torch.Tensor:
    return self.R

  def forward(self, hidden, queries, positions: Positions, scale=None):
    del hidden, queries
    r = self.table()
    if positions.query is None:
      r = _span(_span(r, 1, positions.start, positions.length), 2, 0,
                positions.memory_length)
      return _per_head(r, scale)[None]
    rows = r[:, positions.query]                       # [h, b, t, N]
    index = positions.memory[None, :, None, :].expand(
        rows.shape[0], -1, rows.shape[2], -1)
    picked = _per_head(torch.gather(rows, 3, index), scale)
    return picked.transpose(0, 1)


class MtfSynthesizerFixedRandom(MtfSynthesizerRandom):
  """Fix (eq. 4): R drawn at initialization and never trained (a buffer)."""
  name = "fixed_random"

  def __init__(self, config: MtfSynthesizerConfig):
    MtfSynthesizerFunction.__init__(self)
    n = config.synthesizer_max_length
    self.register_buffer("R", torch.empty(config.num_heads, n, n),
                         persistent=True)


class MtfSynthesizerFactorizedRandom(MtfSynthesizerFunction):
  """FR (eq. 7): R1 R2^T, R1 and R2 [heads, N, k]."""
  name = "factorized_random"
  contributes = COLUMNS
  batch_free = True

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__()
    shape = (config.num_heads, config.synthesizer_max_length,
             config.factorized_random_k)
    self.R1 = nn.Parameter(torch.empty(shape))
    self.R2 = nn.Parameter(torch.empty(shape))

  def initializers(self, config):
    limit = _glorot_limit(config.factorized_random_k * config.num_heads,
                          config.factorized_random_k *
                          config.synthesizer_max_length)
    return {"R1": ("uniform", limit), "R2": ("uniform", limit)}

  def forward(self, hidden, queries, positions: Positions, scale=None):
    del hidden, queries
    if positions.query is None and positions.memory is None:
      # The same for every example: one matmul batched over heads, the
      # scale on R1's rows in use.
      start = positions.start
      r1 = _per_head(_span(self.R1, 1, start, positions.length), scale)
      r2 = _span(self.R2, 1, 0, positions.memory_length).float()
      return torch.bmm(r1, r2.transpose(1, 2))[None]
    r1 = _rows(_per_head(self.R1, scale), positions)   # [1|b, h, t, k]
    if positions.memory is None:
      r2 = _span(self.R2, 1, 0, positions.memory_length).float()[None]
    else:
      r2 = self.R2[:, positions.memory].float().transpose(0, 1)
    return torch.matmul(r1, r2.transpose(-1, -2))

  def columns(self, hidden, queries, positions: Positions, scale=None):
    """(R1's query rows, scale * R2's memory rows, None): k columns each."""
    del hidden, queries
    r2 = _key_rows(self.R2, positions)
    if scale is not None:
      r2 = _times_heads(r2, scale)
    return _rows(self.R1, positions), r2, None


def _heads_from_rows(x: torch.Tensor, batch: int) -> torch.Tensor:
  """[heads, batch * t, n] -> [batch, heads, t, n] (a view)."""
  heads, rows, n = x.shape
  return x.view(heads, batch, rows // batch, n).transpose(0, 1)


class _DenseHidden(MtfSynthesizerFunction):
  """relu(W1 X_i + b1) per head, the first layer of D and FD."""

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__()
    self.num_heads = config.num_heads
    self.hidden_size = config.dense_hidden_size or config.d_kv
    self.use_bias = config.synthesizer_use_bias
    self.w1 = _linear(config.d_model, self.num_heads * self.hidden_size,
                      config.d_model**-0.5, bias=self.use_bias)

  def hidden(self, x: torch.Tensor) -> torch.Tensor:
    """[batch, t, d_model] -> [batch, heads, t, hidden]."""
    b, t, _ = x.shape
    h = self.w1(x).view(b, t, self.num_heads, self.hidden_size)
    return torch.relu(h).transpose(1, 2)

  def hidden_rows(self, x: torch.Tensor) -> torch.Tensor:
    """[batch, t, d_model] -> [heads, batch * t, hidden], each head's rows.

    A view of the projection (no copy): the first factor of one matmul
    batched over heads, whose weights are then neither copied per example
    nor their gradient summed over examples.
    """
    b, t, _ = x.shape
    h = torch.relu(self.w1(x)).view(b * t, self.num_heads, self.hidden_size)
    return h.transpose(0, 1)


class MtfSynthesizerDense(_DenseHidden):
  """D (eq. 1-2): each query predicts its row of N logits.

  As columns: relu(W1 X_i + b1) . W2^T_j + b2_j, the key side a slice of
  the weights, the same for every example, b2 a bias per key.
  """
  name = "dense"
  contributes = COLUMNS

  def __init__(self, config: MtfSynthesizerConfig):
    self.share_query_projection = config.dense_share_query_projection
    if self.share_query_projection:
      MtfSynthesizerFunction.__init__(self)
      self.use_bias = config.synthesizer_use_bias
      hidden = config.d_kv
    else:
      super().__init__(config)
      hidden = self.hidden_size
    n = config.synthesizer_max_length
    self.w2 = nn.Parameter(torch.empty(config.num_heads, hidden, n))
    if self.use_bias:
      self.b2 = nn.Parameter(torch.empty(config.num_heads, n))

  @property
  def needs_queries(self) -> bool:
    return self.share_query_projection

  def initializers(self, config):
    out = {"w2": ("normal", self.w2.shape[1]**-0.5)}
    if self.use_bias:
      out["b2"] = ("zeros", 0.0)
    return out

  def forward(self, hidden, queries, positions: Positions, scale=None):
    if self.share_query_projection:
      rows = torch.relu(queries).transpose(0, 1).flatten(1, 2)
    else:
      rows = self.hidden_rows(hidden)  # [heads, batch * t, hidden]
    # The scale on the smaller factor: W2's columns and b2, or the logits
    # (fewer rows than W2's, as in a decoding step).
    late = scale is not None and rows.shape[1] < self.w2.shape[1]
    early = None if late else scale
    # float32, or autocast's dtype: under autocast the hidden rows are not
    # copied to float32 only for the matmul to copy them back.
    dtype = _logits_dtype(rows)
    rows = _cast(rows, dtype)
    if positions.memory is None:
      # One matmul batched over heads with b2 as its addend.
      s = positions.memory_length
      w2 = _cast(_per_head(_span(self.w2, 2, 0, s), early), dtype)
      if self.use_bias:
        b2 = _cast(_per_head(_span(self.b2, 1, 0, s)[:, None], early),
                   dtype)  # [h, 1, s]
        logits = torch.baddbmm(b2, rows, w2)
      else:
        logits = torch.bmm(rows, w2)
      logits = _heads_from_rows(logits, hidden.shape[0])
    else:  # columns per example (a static cache's positions)
      w2 = _cast(_columns(_per_head(self.w2, early), positions), dtype)
      logits = torch.matmul(_heads_from_rows(rows, hidden.shape[0]), w2)
      if self.use_bias:
        b2 = _cast(_columns(_per_head(self.b2, early), positions), dtype)
        logits = logits + b2[:, :, None, :]
    if late:
      logits = _times_heads(logits, scale)
    return logits

  def columns(self, hidden, queries, positions: Positions, scale=None):
    """(relu(W1 X + b1), scale * W2^T's memory rows, scale * b2's columns).

    b2 is the same for every query: the layer adds it to its bias, or
    joins it as a column of the keys against a column of ones.
    """
    h = torch.relu(queries) if self.share_query_projection else (
        self.hidden(hidden))
    # [1|b, heads, s, hidden]: the rows in use, sliced first.
    keys = _key_rows(self.w2.transpose(1, 2), positions)
    if scale is not None:
      keys = _times_heads(keys, scale)
    b2 = None
    if self.use_bias:
      b2 = _columns(_per_head(self.b2, scale), positions)  # [1|b, h, s]
    return h, keys, b2


class MtfSynthesizerFactorizedDense(_DenseHidden):
  """FD (eq. 5-6): C_ij = A_i[j mod a] * B_i[floor(j / a)].

  Not a low-rank product: the fused kernel gets it as a bias.
  """
  name = "factorized_dense"
  needs_queries = False
  contributes = BIAS

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__(config)
    self.a, self.b = config.factorized_dense_factors
    heads, hidden = config.num_heads, self.hidden_size
    self.wa = nn.Parameter(torch.empty(heads, hidden, self.a))
    self.wb = nn.Parameter(torch.empty(heads, hidden, self.b))
    if self.use_bias:
      self.ba = nn.Parameter(torch.empty(heads, self.a))
      self.bb = nn.Parameter(torch.empty(heads, self.b))

  def initializers(self, config):
    out = {"wa": ("normal", self.wa.shape[1]**-0.5),
           "wb": ("normal", self.wb.shape[1]**-0.5)}
    if self.use_bias:
      out.update(ba=("zeros", 0.0), bb=("zeros", 0.0))
    return out

  def forward(self, hidden, queries, positions: Positions, scale=None):
    del queries
    rows = self.hidden_rows(hidden)  # [heads, batch * t, hidden]
    # [batch, heads, t, s] in the kernel's dtype under autocast: not
    # written in float32 and then cast.
    dtype = _logits_dtype(rows)
    rows = _cast(rows, dtype)
    factors = []
    for w, bias in ((self.wa, "ba"), (self.wb, "bb")):
      w = _cast(w, dtype)
      if self.use_bias:
        f = torch.baddbmm(_cast(getattr(self, bias), dtype)[:, None, :],
                          rows, w)
      else:
        f = torch.bmm(rows, w)
      factors.append(_heads_from_rows(f, hidden.shape[0]))
    fa, fb = factors  # [b, h, t, a], [b, h, t, b]
    if scale is not None:
      fa = _times_heads(fa, scale)
    if positions.memory is None:
      # Column j = jb * a + ja: the outer product laid out row-major is C,
      # built only for the column blocks in use.
      s = positions.memory_length
      # Ceiling without dividing a negative size (which ONNX's integer
      # division rounds toward zero, not down).
      blocks = (s + self.a - 1) // self.a
      c = fb[..., :blocks, None] * fa[..., None, :]
      return _span(c.flatten(-2), -1, 0, s)
    columns = positions.memory[:, None, None, :]
    shape = fa.shape[:3] + (columns.shape[-1],)
    return (torch.gather(fa, 3, (columns % self.a).expand(shape)) *
            torch.gather(fb, 3, (columns // self.a).expand(shape)))


# ---------------------------------------------------------------------------
# Attention.


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


def _plus(bias: Optional[torch.Tensor], term: torch.Tensor) -> torch.Tensor:
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
    self.has_dot_product = "dot_product" in functions
    for name in functions:
      if FUNCTIONS[name] is not None:
        setattr(self, name, FUNCTIONS[name](config))
    # What the fused path asks at every call, fixed by the functions: a
    # function reads the unscaled queries; which functions' logits join
    # the bias (the batch-free ones too where the kernel takes a bias with
    # a gradient: on CUDA).
    self.function_reads_queries = any(
        f.needs_queries for f in self.synthesizers())
    self.needs_queries = self.has_dot_product or self.function_reads_queries
    self.bias_functions = frozenset(
        f.name for f in self.synthesizers() if f.contributes == BIAS)
    self.bias_functions_on_cuda = self.bias_functions | frozenset(
        f.name for f in self.synthesizers() if f.batch_free)
    d = config.d_model
    inner = self.num_heads * self.d_kv
    memory_inner = self.memory_heads * self.d_kv
    if self.needs_queries:
      # mesh folds the 1/sqrt(d_kv) query scale into the initializer.
      self.q = _linear(d, inner, d**-0.5 if config.scale_queries
                       else (d * self.d_kv)**-0.5)
    if self.has_dot_product:
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

  def synthesizers(self) -> List[nn.Module]:
    """The function modules (every function but the dot product)."""
    return [getattr(self, n) for n in self.function_names
            if n != "dot_product"]

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
        return _times_heads(queries, scale)
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
      keys = self._heads(source, self.k) if self.has_dot_product else (
          values[..., :1])
      if cache is not None:
        keys, values = cache.update(keys, values, self.layer_idx)
        if cross:
          past_key_values.is_updated[self.layer_idx] = True
    implementation = self.config._attn_implementation or "eager"  # pylint: disable=protected-access
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
    for i, name in enumerate(self.function_names):
      if name == "dot_product":
        continue
      term = getattr(self, name)(hidden, queries, positions,
                                 None if alpha is None else alpha[i])
      bias = _plus(bias, term)
    dropout = self.dropout if self.training else 0.0
    if not self.has_dot_product:
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
      query = _times_heads(query, weight)
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
    if self.function_names == ("dot_product",) and (
        not hidden.is_cuda or self.d_kv % KERNEL_WIDTH_MULTIPLE == 0):
      # The dot product alone (V, cross-attention): the kernel's own call,
      # the query scale its `scaling` (on CUDA at a head width the fused
      # kernels take; else the columns below are padded to one).
      return self._kernel(self, self._heads(hidden, self.q), keys, values,
                          bias, implementation, dropout, self.scaling), None
    alpha = self.mixture_weights()
    scales = ([None] * len(self.function_names) if alpha is None
              else alpha.unbind(0))
    queries = None  # unscaled, for a function that reads them (D's option)
    if self.function_reads_queries:
      queries = self._heads(hidden, self.q)
    functions = [(name, getattr(self, name, None), scale)
                 for name, scale in zip(self.function_names, scales)]
    # Where the kernel takes a bias with a gradient (CUDA), batch-free
    # logits (FR's R1 R2^T) join the bias, [1, heads, t, s] once for the
    # batch, rather than widening every example's queries and keys (FR+V:
    # 64 + k columns run the kernel's 128-wide head tier).
    as_bias = (self.bias_functions_on_cuda
               if _kernel_layout(hidden.is_cuda, True).bias_gradient
               else self.bias_functions)
    for name, function, scale in functions:
      if name in as_bias:
        term = function(hidden, queries, positions, scale)
        if term.shape[0] > 1:
          # Per example (FD's), in the logits' dtype (autocast's, where
          # on): not promoted to float32 by a float32 bias.
          dtype = _logits_dtype(hidden)
          bias = None if bias is None else _cast(bias, dtype)
          term = _cast(term, dtype)
        bias = _plus(bias, term)
    # sdpa's CPU kernels take no bias that needs a gradient (R's table, the
    # relative bias in training): its math kernel writes the logits anyway,
    # so there the other functions' logits join the bias as in `_reference`
    # (columns would only be copied). So do they for one query (a decoding
    # step): one row of logits costs less than copying the cached keys and
    # values into wider columns at every step.
    layout = _kernel_layout(hidden.is_cuda, bias is not None)
    if hidden.shape[1] == 1 or not (
        layout.bias_gradient or bias is None or not bias.requires_grad):
      # The logits path: every other function's logits join the bias, as
      # in `_reference`; the kernel computes the dot product alone.
      for name, function, scale in functions:
        if function is not None and name not in as_bias:
          bias = _plus(bias, function(hidden, queries, positions, scale))
      if not self.has_dot_product:
        return synthesized_attention_forward(self, values, bias,
                                             dropout)[0], None
      query = self._scaled_queries(hidden, self._dot_product_scale(scales))
      return self._kernel(self, _cast(query, values.dtype), keys, values,
                          bias, implementation, dropout), None
    # The columns path.
    query_parts, key_parts, key_biases = [], [], []
    for name, function, scale in functions:
      if name == "dot_product":
        query_parts.append(self._scaled_queries(
            hidden, self._dot_product_scale(scales)))
        key_parts.append(keys)
      elif name not in as_bias:
        query, key, key_bias = function.columns(hidden, queries, positions,
                                                scale)
        query_parts.append(query)
        key_parts.append(key)
        if key_bias is not None:
          key_biases.append(key_bias)
    for key_bias in key_biases:  # [1|b, heads, s]
      # A key column against a column of ones where there is no bias, or
      # where b2 would give a CPU kernel's bias a gradient (its math path,
      # which writes the logits); else it joins the bias (CUDA: the head
      # width stays d_kv's multiple).
      if bias is None or (not layout.bias_gradient and
                          torch.is_grad_enabled() and
                          key_bias.requires_grad and not bias.requires_grad):
        query_parts.append(hidden.new_ones(1, self.num_heads,
                                           hidden.shape[1], 1))
        key_parts.append(key_bias[..., None])
      else:
        bias = bias + key_bias[:, :, None, :]
    multiple, values_apart = layout.multiple, layout.values_apart
    if not query_parts:  # R, Fix, FD: softmax(bias) V
      if not (values_apart and bias.shape[0] > 1):
        # A bias shared by the batch (R, Fix unpadded): its softmax once
        # for every example (on an H200 the kernel, which takes it per
        # example, ran R at 0.99x V at 8 x 2048, this path at 1.22x).
        return synthesized_attention_forward(self, values, bias,
                                             dropout)[0], None
      # A bias per example (FD, or a padded batch): the kernel on zero
      # queries and keys, which writes no weights.
      query_parts = [hidden.new_zeros(1, self.num_heads, hidden.shape[1],
                                      multiple)]
      key_parts = [hidden.new_zeros(1, self.memory_heads, values.shape[2],
                                    multiple)]
    module = self
    if self.num_key_value_groups > 1 and any(
        k.shape[1] != self.memory_heads for k in key_parts):
      # Per-head key columns: V's shared keys and values join every head.
      module = self.every_head
      values = _repeat_heads(values, self.num_key_value_groups)
      key_parts = [_repeat_heads(k, self.num_key_value_groups)
                   if k.shape[1] != self.num_heads else k for k in key_parts]
    dtype = values.dtype
    query = _side_by_side(query_parts, values.shape[0], dtype)
    key = _side_by_side(key_parts, values.shape[0], dtype)
    # Zero columns change no logit; the values' zero columns are cut from
    # the output.
    width = _round_up(query.shape[-1], multiple)
    value_width = _round_up(self.d_kv, multiple)
    if not values_apart:
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


def _side_by_side(parts: List[torch.Tensor], batch: int,
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


class MtfSynthesizerDenseReluDense(nn.Module):
  """The feed-forward layer: wo(act(wi x)), or gated: wo(act(wi_0 x) wi_1 x)."""

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__()
    self.gated = config.is_gated_act
    self.act = _activation(config.dense_act_fn)
    d, d_ff = config.d_model, config.d_ff
    if self.gated:
      self.wi_0 = _linear(d, d_ff, d**-0.5, truncated=True)
      self.wi_1 = _linear(d, d_ff, d**-0.5, truncated=True)
    else:
      self.wi = _linear(d, d_ff, d**-0.5, truncated=True)
    self.wo = _linear(d_ff, d, d_ff**-0.5, truncated=True)
    self.dropout = nn.Dropout(config.dropout_rate)

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    if self.gated:
      h = self.act(self.wi_0(x)) * self.wi_1(x)
    else:
      h = self.act(self.wi(x))
    return self.wo(self.dropout(h))


class MtfSynthesizerLayerSelfAttention(nn.Module):
  """x + dropout(SelfAttention(norm(x)))."""

  def __init__(self, config, functions, has_relative_attention_bias,
               layer_idx):
    super().__init__()
    self.SelfAttention = MtfSynthesizerAttention(  # pylint: disable=invalid-name
        config, functions, has_relative_attention_bias, layer_idx)
    self.layer_norm = MtfSynthesizerRMSNorm(config.d_model,
                                            config.layer_norm_epsilon)
    self.dropout = nn.Dropout(config.dropout_rate)

  def forward(self, x, bias, positions, past_key_values, output_attentions):
    y, weights = self.SelfAttention(
        self.layer_norm(x), bias, positions,
        past_key_values=past_key_values, output_attentions=output_attentions)
    return x + self.dropout(y), weights


class MtfSynthesizerLayerCrossAttention(nn.Module):
  """x + dropout(EncDecAttention(norm(x), encoder output))."""

  def __init__(self, config, layer_idx):
    super().__init__()
    self.EncDecAttention = MtfSynthesizerAttention(  # pylint: disable=invalid-name
        config, ("dot_product",), False, layer_idx)
    self.layer_norm = MtfSynthesizerRMSNorm(config.d_model,
                                            config.layer_norm_epsilon)
    self.dropout = nn.Dropout(config.dropout_rate)

  def forward(self, x, memory, bias, past_key_values, output_attentions):
    y, weights = self.EncDecAttention(
        self.layer_norm(x), bias, key_value_states=memory,
        past_key_values=past_key_values, output_attentions=output_attentions)
    return x + self.dropout(y), weights


class MtfSynthesizerLayerFF(nn.Module):
  """x + dropout(DenseReluDense(norm(x)))."""

  def __init__(self, config):
    super().__init__()
    self.DenseReluDense = MtfSynthesizerDenseReluDense(config)  # pylint: disable=invalid-name
    self.layer_norm = MtfSynthesizerRMSNorm(config.d_model,
                                            config.layer_norm_epsilon)
    self.dropout = nn.Dropout(config.dropout_rate)

  def forward(self, x):
    return x + self.dropout(self.DenseReluDense(self.layer_norm(x)))


class MtfSynthesizerBlock(GradientCheckpointingLayer):
  """One block: self-attention, cross-attention (a decoder's), feed-forward."""

  def __init__(self, config: MtfSynthesizerConfig, functions: Tuple[str, ...],
               has_relative_attention_bias: bool, is_decoder: bool,
               layer_idx: int):
    super().__init__()
    self.is_decoder = is_decoder
    self.layer = nn.ModuleList([MtfSynthesizerLayerSelfAttention(
        config, functions, has_relative_attention_bias, layer_idx)])
    if is_decoder:
      self.layer.append(MtfSynthesizerLayerCrossAttention(config, layer_idx))
    self.layer.append(MtfSynthesizerLayerFF(config))

  def forward(self, x, bias, positions, memory=None, cross_bias=None,
              past_key_values=None, output_attentions=False):
    x, self_weights = self.layer[0](x, bias, positions, past_key_values,
                                    output_attentions)
    cross_weights = None
    if self.is_decoder:
      x, cross_weights = self.layer[1](x, memory, cross_bias,
                                       past_key_values, output_attentions)
    return self.layer[-1](x), self_weights, cross_weights


# ---------------------------------------------------------------------------
# Models.


class MtfSynthesizerPreTrainedModel(PreTrainedModel):
  """Initialization as mesh's, and what transformers asks of a model."""
  config_class = MtfSynthesizerConfig
  base_model_prefix = "model"
  supports_gradient_checkpointing = True
  _no_split_modules = ["MtfSynthesizerBlock"]
  _supports_sdpa = True
  _supports_flash_attn = False
  _supports_flex_attn = False
  _supports_attention_backend = False
  # Static caches and a compiled forward (generate's compile_config): the
  # stack reads a static cache's whole length, masked past the written part.
  _can_compile_fullgraph = True
  _keys_to_ignore_on_load_unexpected = []

  def create_masks_for_generate(self, config, inputs_embeds, attention_mask,
                                past_key_values, position_ids=None,
                                **kwargs) -> Optional[torch.Tensor]:
    """The mask generate() passes with a static cache: still [batch, s].

    The stacks build their masks themselves (with the relative bias, once
    per stack); a static cache's mask is padded with 0 to the cache's
    length, so that a compiled step sees one shape.

    Args:
      config: the model's configuration (unused).
      inputs_embeds: the step's inputs (unused: only their shape matters).
      attention_mask: [batch, s] 1 at tokens, 0 at padding, or None.
      past_key_values: the cache.
      position_ids: the step's positions (unused).
      **kwargs: generate()'s other arguments (unused).

    Returns:
      [batch, cache length] or the mask as given (None stays None).
    """
    del config, inputs_embeds, position_ids, kwargs
    cache = past_key_values
    if isinstance(cache, EncoderDecoderCache):
      cache = cache.self_attention_cache
    length = _static_length(cache)
    if attention_mask is None or length is None:
      return attention_mask
    return _static_mask(attention_mask, length)

  @property
  def accepts_loss_kwargs(self) -> bool:
    """Whether the Trainer may pass `num_items_in_batch` to forward.

    With `loss_denominator="tokens"` the loss divides by the tokens of the
    whole accumulated batch when given them; mesh's "positions" has no such
    count, so the Trainer divides the per-call mean over accumulation steps
    itself.
    """
    return self.config.loss_denominator == "tokens"

  @torch.no_grad()
  def _init_weights(self, module: nn.Module) -> None:
    """mesh's initializer of each weight (mesh_tensorflow and this package).

    Each weight is initialized by the module that holds it: nn.Linear by
    the `mesh_initializer` it was made with (the query kernel N(0,
    (d_model d_kv)^-1/2), mesh folding the 1/sqrt(d_kv) scale into it;
    keys, values, D's and FD's first layer N(0, d_model^-1/2); the output
    N(0, (heads d_kv)^-1/2); feed-forward and softmax kernels truncated
    normal with 1/sqrt(fan_in)); embeddings N(0, 1); the relative bias and
    R, FR uniform (glorot on the original release's shapes); D's and FD's
    tables N(0, fan_in^-1/2), their biases and the mixture logits 0; norms
    1 (a synthesizing function's own weights: its `initializers()`).
    `initializer_factor` multiplies each scale.
    """
    config = self.config
    factor = config.initializer_factor

    def normal(tensor, std):
      init.normal_(tensor, 0.0, factor * std)

    def truncated(tensor, std):
      init.trunc_normal_(tensor, 0.0, factor * std, -2 * factor * std,
                         2 * factor * std)

    def uniform(tensor, limit):
      init.uniform_(tensor, -factor * limit, factor * limit)

    if isinstance(module, MtfSynthesizerRMSNorm):
      init.ones_(module.weight)
    elif isinstance(module, MtfSynthesizerRelativeBias):
      # mesh's default (glorot uniform) on its [heads, buckets] table.
      uniform(module.weight, math.sqrt(6.0 / sum(module.weight.shape)))
    elif isinstance(module, nn.Embedding):
      normal(module.weight, 1.0)
    elif isinstance(module, nn.Linear):
      kind, std = getattr(module, "mesh_initializer",
                          ("normal", module.in_features**-0.5))
      (truncated if kind == "truncated" else normal)(module.weight, std)
      if module.bias is not None:
        init.zeros_(module.bias)
    elif isinstance(module, MtfSynthesizerAttention):
      if hasattr(module, "alpha_logits"):
        init.zeros_(module.alpha_logits)
    elif isinstance(module, MtfSynthesizerFunction):
      draw = {"normal": normal, "uniform": uniform,
              "zeros": lambda tensor, _: init.zeros_(tensor)}
      for name, (kind, scale) in module.initializers(config).items():
        draw[kind](getattr(module, name), scale)

  def mesh_optimizer(self, total_steps: Optional[int] = None,
                     **schedule) -> Tuple["MeshAdafactor",
                                          torch.optim.lr_scheduler.LambdaLR]:
    """The optimizer and schedule that train this model as mesh trains it.

    With them, set `config.loss_denominator = "positions"` (mesh's loss
    normalization) and `config.dropout_rate` to the mesh run's: from the
    same weights and batches, the losses are mesh's
    (tests/test_torch_follows_mesh.py).

    Args:
      total_steps: the training's steps (the schedule's linear decay).
      **schedule: `mesh_learning_rate`'s other arguments (warmup_steps,
        linear_decay_fraction, constant).

    Returns:
      (MeshAdafactor, its LambdaLR): step both after each batch, as
      transformers' Trainer does with `optimizers=(optimizer, schedule)`.
    """
    optimizer = MeshAdafactor(self)
    rate = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: mesh_learning_rate(step, total_steps,
                                                   **schedule))
    return optimizer, rate

  def _shift_right(self, labels: torch.Tensor) -> torch.Tensor:
    """The decoder inputs of targets: decoder_start_token_id, then labels."""
    start = torch.full_like(labels[:, :1], self.config.decoder_start_token_id)
    shifted = torch.cat([start, labels[:, :-1]], dim=1)
    return shifted.masked_fill(shifted == -100, self.config.pad_token_id)


class MtfSynthesizerStack(MtfSynthesizerPreTrainedModel):
  """One stack: embeddings, blocks, final norm (mesh's Unitransformer)."""

  def __init__(self, config: MtfSynthesizerConfig, is_decoder: bool,
               synthesizers: Tuple[str, ...], num_layers: int,
               embed_tokens: Optional[nn.Embedding] = None):
    super().__init__(config)
    self.is_decoder = is_decoder
    self.embed_tokens = embed_tokens if embed_tokens is not None else (
        nn.Embedding(config.vocab_size, config.d_model))
    if config.max_position_embeddings:
      self.embed_positions = nn.Embedding(config.max_position_embeddings,
                                          config.d_model)
    self.synthesizer_names = tuple(synthesizers)
    self.has_tables = any(n != "dot_product" for n in synthesizers)
    relative = config.relative_attention_type
    self.block = nn.ModuleList(
        MtfSynthesizerBlock(
            config, synthesizers,
            relative == "bias" or (relative == "bias_shared" and i == 0),
            is_decoder and config.is_encoder_decoder, i)
        for i in range(num_layers))
    self.final_layer_norm = MtfSynthesizerRMSNorm(config.d_model,
                                                  config.layer_norm_epsilon)
    self.dropout = nn.Dropout(config.dropout_rate)
    self.gradient_checkpointing = False
    self.post_init()

  def get_input_embeddings(self) -> nn.Embedding:
    return self.embed_tokens

  def set_input_embeddings(self, value: nn.Embedding) -> None:
    self.embed_tokens = value

  def _relative_bias(self, table: nn.Embedding, buckets: torch.Tensor):
    """[t, s] buckets -> [1, heads, t, s] float32 (one embedding lookup)."""
    return table(buckets).permute(2, 0, 1)[None].float()

  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              inputs_embeds: Optional[torch.Tensor] = None,
              position_ids: Optional[torch.LongTensor] = None,
              encoder_hidden_states: Optional[torch.Tensor] = None,
              encoder_attention_mask: Optional[torch.Tensor] = None,
              past_key_values: Optional[Cache] = None,
              output_attentions: Optional[bool] = None,
              output_hidden_states: Optional[bool] = None,
              return_dict: Optional[bool] = None,
              **kwargs) -> BaseModelOutputWithPastAndCrossAttentions:
    """Runs the stack.

    Args:
      input_ids: [batch, t].
      attention_mask: [batch, s] 1 at tokens, 0 at padding, over the memory
        of the self-attention (a causal stack: the cache's positions and the
        new ones); None: an encoder masks input_ids == pad_token_id, a
        causal stack masks nothing.
      inputs_embeds: instead of input_ids.
      position_ids: [batch, t] per-example positions (left padding); None:
        the cache's length + arange(t).
      encoder_hidden_states: the encoder output (a decoder).
      encoder_attention_mask: [batch, s_enc] 1 at the encoder's tokens.
      past_key_values: the cache when decoding.
      output_attentions: return each layer's attention weights (None: the
        config's).
      output_hidden_states: return each block's input and the output (None:
        the config's).
      return_dict: a ModelOutput, else a tuple (None: the config's).
      **kwargs: generation's bookkeeping; anything else raises.

    Returns:
      BaseModelOutputWithPastAndCrossAttentions (`cross_attentions`: a
      decoder's, with output_attentions), or its tuple.
    """
    _refuse(kwargs, type(self).__name__)
    config = self.config
    output_attentions, output_hidden_states = _output_flags(
        config, output_attentions, output_hidden_states)
    if (input_ids is None) == (inputs_embeds is None):
      raise ValueError("give exactly one of input_ids and inputs_embeds")
    if inputs_embeds is None:
      inputs_embeds = self.embed_tokens(input_ids)
    b, t = inputs_embeds.shape[:2]
    device = inputs_embeds.device
    self_cache = past_key_values
    if isinstance(past_key_values, EncoderDecoderCache):
      self_cache = past_key_values.self_attention_cache
    start = self_cache.get_seq_length() if self_cache is not None else 0
    static = _static_length(self_cache)
    if static is None:
      s = start + t
      _check_length(self.has_tables, s, config)
    else:
      # The cache's whole length is read; the causal mask hides what is
      # not written yet. `start` is a tensor, whose value a compiled step
      # never reads (its length check runs outside compilation).
      s = static
      if not torch.compiler.is_compiling():
        _check_length(self.has_tables, int(start) + t, config)
    causal = self.is_decoder
    if attention_mask is None and not causal and input_ids is not None:
      attention_mask = (input_ids != config.pad_token_id).long()
    if attention_mask is not None and static is not None:
      attention_mask = _static_mask(attention_mask, static)
    if attention_mask is not None and attention_mask.shape[-1] != s:
      raise ValueError("attention_mask covers %d positions, the stack reads "
                       "%d (the cache's and the new ones)" % (
                           attention_mask.shape[-1], s))
    if static is None:
      query = torch.arange(start, s, device=device)
    else:
      query = torch.as_tensor(start, device=device) + torch.arange(
          t, device=device)
    memory_positions = torch.arange(s, device=device)
    positions = Positions(start, t, s)
    if position_ids is not None or static is not None:
      if position_ids is None:
        position_ids = query[None]
      if attention_mask is None:  # no padding (generate() drops all-1 masks)
        memory = memory_positions[None].expand(position_ids.shape[0], s)
      else:
        memory = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
      if static is not None:  # positions past the tables are masked
        memory = memory.clamp(max=config.synthesizer_max_length - 1)
      positions = Positions(start, t, s, position_ids.long(), memory)
    x = inputs_embeds
    if hasattr(self, "embed_positions"):
      rows = query[None] if position_ids is None else position_ids
      x = x + self.embed_positions(rows)
    x = self.dropout(x)

    # The masks and the shared relative bias: once per stack.
    relative = memory_positions[None, :] - query[:, None]
    mask = None
    if causal:
      mask = torch.zeros(t, s, device=device).masked_fill(
          relative > 0, MASKED)[None, None]
    padding = _padding_bias(attention_mask)
    if padding is not None:
      mask = padding if mask is None else mask + padding
    buckets = None
    shared_bias = None
    relative_type = config.relative_attention_type
    if relative_type is not None:
      buckets = relative_position_bucket(
          relative, not causal, config.relative_attention_num_buckets,
          config.relative_attention_max_distance)
    if relative_type == "bias_shared":
      table = self.block[0].layer[0].SelfAttention.relative_attention_bias
      shared_bias = self._relative_bias(table, buckets)
      shared_bias = shared_bias if mask is None else shared_bias + mask
    cross_bias = None
    if encoder_hidden_states is not None:
      cross_bias = _padding_bias(encoder_attention_mask)

    hidden_states = () if output_hidden_states else None
    attentions = () if output_attentions else None
    cross_attentions = () if output_attentions and self.is_decoder else None
    for block in self.block:
      if output_hidden_states:
        hidden_states += (x,)
      if relative_type == "bias":
        table = block.layer[0].SelfAttention.relative_attention_bias
        bias = self._relative_bias(table, buckets)
        bias = bias if mask is None else bias + mask
      elif relative_type == "bias_shared":
        bias = shared_bias
      else:
        bias = mask
      # The cache by keyword: gradient checkpointing drops it (a replayed
      # block would append its keys and values again).
      x, self_weights, cross_weights = block(
          x, bias, positions, encoder_hidden_states, cross_bias,
          past_key_values=past_key_values,
          output_attentions=output_attentions)
      if output_attentions:
        attentions += (self_weights,)
        if cross_attentions is not None:
          cross_attentions += (cross_weights,)
    x = self.dropout(self.final_layer_norm(x))
    if output_hidden_states:
      hidden_states += (x,)
    return _returned(BaseModelOutputWithPastAndCrossAttentions(
        last_hidden_state=x, past_key_values=past_key_values,
        hidden_states=hidden_states, attentions=attentions,
        cross_attentions=cross_attentions), return_dict, config)


def _static_length(cache: Optional[Cache]) -> Optional[int]:
  """A static cache's length (what each layer returns), else None."""
  if cache is None or not cache.is_compileable:
    return None
  return cache.layers[0].max_cache_len


def _static_mask(mask: torch.Tensor, length: int) -> torch.Tensor:
  """[batch, s] -> [batch, length]: the positions not yet written are 0."""
  if mask.dim() != 2 or mask.shape[-1] >= length:
    return mask
  return nn.functional.pad(mask, (0, length - mask.shape[-1]), value=0)


def _check_length(has_tables: bool, length: int,
                  config: MtfSynthesizerConfig) -> None:
  """Raises ValueError where a stack with tables reads past them."""
  if has_tables and length > config.synthesizer_max_length:
    raise ValueError(
        "a sequence of length %d is longer than max_length %d, the size "
        "of the synthesizing functions' position tables "
        "(synthesizer_max_length)" % (
            length, config.synthesizer_max_length))


def _output_flags(config: MtfSynthesizerConfig,
                  output_attentions: Optional[bool],
                  output_hidden_states: Optional[bool]) -> Tuple[bool, bool]:
  """The call's output_attentions and output_hidden_states, else the config's.
  """
  if output_attentions is None:
    output_attentions = config.output_attentions
  if output_hidden_states is None:
    output_hidden_states = config.output_hidden_states
  return bool(output_attentions), bool(output_hidden_states)


def _returned(output: ModelOutput, return_dict: Optional[bool],
              config: MtfSynthesizerConfig) -> Union[ModelOutput, Tuple]:
  """The output as the call asks: a ModelOutput, or its tuple.

  Args:
    output: the forward's output.
    return_dict: the call's argument; None: the config's `return_dict`.
    config: the model's configuration.

  Returns:
    `output`, or `output.to_tuple()` (its fields that are not None, in
    order) where return_dict is False.
  """
  if return_dict is None:
    return_dict = config.return_dict
  return output if return_dict else output.to_tuple()


def _padding_bias(mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
  """[batch, s] 1/0 -> additive [batch, 1, 1, s]; None where nothing is masked.

  A mask of ones is dropped (outside torch.compile, torch.export and the
  TorchScript tracer, as transformers' masks are), so that an unpadded
  batch's bias has no batch dimension.
  """
  if mask is None or (not torch.compiler.is_compiling() and
                      not torch.jit.is_tracing() and bool(mask.all())):
    return None
  return torch.where(mask[:, None, None, :] > 0, 0.0, MASKED)


def _refuse(kwargs: Dict, model: str) -> None:
  """Raises on an argument the model does not implement."""
  ignored = {"cache_position", "logits_to_keep"}
  if kwargs.get("shift_labels") is not None:
    raise TypeError(
        "%s does not take shift_labels: its labels are the targets of the "
        "decoder inputs (MtfSynthesizerForCausalLM takes them)" % model)
  unknown = sorted(k for k, v in kwargs.items()
                   if k not in ignored and v is not None)
  if unknown:
    raise TypeError("%s does not support %s" % (model, ", ".join(unknown)))


class MtfSynthesizerModel(MtfSynthesizerPreTrainedModel):
  """The encoder-decoder without an output layer (T5Model's place)."""
  _tied_weights_keys = {"encoder.embed_tokens.weight": "shared.weight",
                        "decoder.embed_tokens.weight": "shared.weight"}

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__(config)
    if config.shared_embedding:
      self.shared = nn.Embedding(config.vocab_size, config.d_model)
      encoder_embedding = decoder_embedding = self.shared
    else:
      encoder_embedding = decoder_embedding = None
      self._tied_weights_keys = {}
    self.encoder = MtfSynthesizerStack(
        config, False, config.encoder_synthesizers, config.num_layers,
        encoder_embedding)
    self.decoder = MtfSynthesizerStack(
        config, True, config.decoder_synthesizers,
        config.num_decoder_layers, decoder_embedding)
    self.post_init()

  def get_input_embeddings(self) -> nn.Embedding:
    return self.shared if self.config.shared_embedding else (
        self.encoder.embed_tokens)

  def set_input_embeddings(self, value: nn.Embedding) -> None:
    if self.config.shared_embedding:
      self.shared = value
      self.decoder.embed_tokens = value
    self.encoder.embed_tokens = value

  def get_encoder(self, modality=None):
    del modality
    return self.encoder

  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              decoder_input_ids: Optional[torch.LongTensor] = None,
              decoder_attention_mask: Optional[torch.Tensor] = None,
              encoder_outputs: Optional[Tuple] = None,
              past_key_values: Optional[Cache] = None,
              inputs_embeds: Optional[torch.Tensor] = None,
              decoder_inputs_embeds: Optional[torch.Tensor] = None,
              use_cache: Optional[bool] = None,
              output_attentions: Optional[bool] = None,
              output_hidden_states: Optional[bool] = None,
              return_dict: Optional[bool] = None,
              **kwargs) -> Union[Seq2SeqModelOutput, Tuple]:
    """Encodes (unless encoder_outputs are given) and decodes.

    Args:
      input_ids: the encoder inputs [batch, s].
      attention_mask: 1 at input tokens, 0 at padding; default: ids != pad.
      decoder_input_ids: [batch, t].
      decoder_attention_mask: [batch, cache + t] 1 at the decoder's tokens
        (padding at the end needs none: the decoder is causal).
      encoder_outputs: the encoder's output, when already computed.
      past_key_values: the decoding cache.
      inputs_embeds: instead of input_ids.
      decoder_inputs_embeds: instead of decoder_input_ids.
      use_cache: keep and return a cache.
      output_attentions: return the attention weights (None: the
        config's).
      output_hidden_states: return the hidden states (None: the config's).
      return_dict: a ModelOutput, else a tuple (None: the config's).
      **kwargs: generation's bookkeeping; anything else raises.

    Returns:
      Seq2SeqModelOutput, or its tuple.
    """
    _refuse(kwargs, type(self).__name__)
    config = self.config
    output_attentions, output_hidden_states = _output_flags(
        config, output_attentions, output_hidden_states)
    if attention_mask is None and input_ids is not None:
      attention_mask = (input_ids != config.pad_token_id).long()
    if encoder_outputs is None:
      encoder_outputs = self.encoder(
          input_ids=input_ids, attention_mask=attention_mask,
          inputs_embeds=inputs_embeds, output_attentions=output_attentions,
          output_hidden_states=output_hidden_states, return_dict=True)
    elif not isinstance(encoder_outputs, ModelOutput):
      encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs[0])
    memory = encoder_outputs.last_hidden_state
    use_cache = config.use_cache if use_cache is None else use_cache
    if use_cache and past_key_values is None:
      past_key_values = EncoderDecoderCache(DynamicCache(), DynamicCache())
    if not use_cache:
      past_key_values = None
    decoded = self.decoder(
        input_ids=decoder_input_ids, attention_mask=decoder_attention_mask,
        inputs_embeds=decoder_inputs_embeds, encoder_hidden_states=memory,
        encoder_attention_mask=attention_mask,
        past_key_values=past_key_values, output_attentions=output_attentions,
        output_hidden_states=output_hidden_states, return_dict=True)
    return _returned(Seq2SeqModelOutput(
        last_hidden_state=decoded.last_hidden_state,
        past_key_values=past_key_values,
        decoder_hidden_states=decoded.hidden_states,
        decoder_attentions=decoded.attentions,
        cross_attentions=decoded.cross_attentions,
        encoder_last_hidden_state=memory,
        encoder_hidden_states=getattr(encoder_outputs, "hidden_states", None),
        encoder_attentions=getattr(encoder_outputs, "attentions", None)),
                     return_dict, config)


def mesh_loss(logits: torch.Tensor, labels: torch.Tensor, z_loss: float,
              per_position: bool = False,
              num_items_in_batch: Optional[Union[int, torch.Tensor]] = None
              ) -> torch.Tensor:
  """Cross entropy + z_loss * log(Z)^2 of the tokens (labels != -100).

  mesh's loss (`softmax_cross_entropy_with_logits` with z_loss).

  Args:
    logits: [batch, length, vocab].
    labels: [batch, length], -100 where ignored.
    z_loss: the auxiliary loss's weight (0: plain cross entropy).
    per_position: divide the sum by batch x length, as mesh does; else by
      the tokens.
    num_items_in_batch: divide the sum by this instead: the tokens of the
      whole batch when this call sees a part of it (transformers' Trainer
      with gradient accumulation); only with per_position False.

  Returns:
    A scalar.

  Raises:
    ValueError: num_items_in_batch with per_position.
  """
  if num_items_in_batch is not None and per_position:
    raise ValueError(
        "num_items_in_batch counts tokens; loss_denominator='positions' "
        "divides by batch x length (mesh's): give one or the other")
  positions = labels.numel()
  logits = logits.float().reshape(-1, logits.shape[-1])
  labels = labels.reshape(-1)
  keep = labels != -100
  # One pass over the vocabulary: cross entropy, then log(Z) from it and
  # the label's logit (log Z = logit_y - log p_y = logit_y + xent).
  per_token = nn.functional.cross_entropy(logits, labels, ignore_index=-100,
                                          reduction="none")
  if z_loss:
    log_z = logits.gather(1, labels.clamp(min=0)[:, None])[:, 0] + per_token
    per_token = per_token + z_loss * (log_z.square() * keep)
  total = per_token.sum()
  if num_items_in_batch is not None:
    if torch.is_tensor(num_items_in_batch):
      num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch
  if per_position:
    return total / positions
  return total / keep.sum().clamp(min=1)


# ---------------------------------------------------------------------------
# Training as mesh trains: its Adafactor and learning-rate schedule.

# mesh's AdafactorOptimizer factors the second moment of a variable whose two
# largest dimensions are at least this long (T5's setting).
MIN_DIM_SIZE_TO_FACTOR = 128


def _mesh_shape(name: str, parameter: torch.Tensor,
                config: MtfSynthesizerConfig) -> Tuple[int, ...]:
  """The shape mesh gives the variable of a parameter (up to order)."""
  if name.endswith(".w1.weight"):  # D's, FD's [d_model, heads, hidden]
    return (parameter.shape[1], config.num_heads,
            parameter.shape[0] // config.num_heads)
  return tuple(parameter.shape)


def mesh_factored(mesh_shape: Tuple[int, ...],
                  shape: Tuple[int, ...]) -> bool:
  """Whether mesh's Adafactor factors the variable, as PyTorch can.

  mesh factors over the two largest dimensions when both reach
  MIN_DIM_SIZE_TO_FACTOR; transformers' Adafactor over the last two, which
  in this model's layouts are those two. One exception: D's and FD's first
  layer, whose PyTorch weight merges two of mesh's three dimensions, is
  left whole where mesh would factor it (a per-head hidden width or a head
  count of 128 or more).

  Args:
    mesh_shape: the variable's shape in mesh.
    shape: the parameter's shape in PyTorch.

  Returns:
    True to factor the parameter's second moment.
  """
  sizes = sorted(mesh_shape, reverse=True)
  if len(sizes) < 2 or sizes[1] < MIN_DIM_SIZE_TO_FACTOR:
    return False
  return len(shape) >= 2 and sorted(shape[-2:], reverse=True) == sizes[:2]


class MeshAdafactor(Adafactor):
  """transformers' Adafactor with mesh's (and T5's) settings.

  beta1 0 (no momentum), decay rate 1 - (step + 1)^-0.8, update clipping
  at 1, epsilons 1e-30 and 1e-3, the step scaled by the parameter's RMS,
  and the second moment factored where mesh factors it (`mesh_factored`).
  The learning rate comes from a schedule (`mesh_learning_rate`).
  """

  def __init__(self, model: "MtfSynthesizerPreTrainedModel",
               learning_rate: float = 1.0):
    """Creates the optimizer over the model's trainable parameters.

    Args:
      model: the model.
      learning_rate: the base rate (the schedule multiplies it).
    """
    groups = {True: [], False: []}
    for name, parameter in model.named_parameters():
      if parameter.requires_grad:
        shape = _mesh_shape(name, parameter, model.config)
        groups[mesh_factored(shape, tuple(parameter.shape))].append(
            parameter)
    super().__init__(
        [{"params": p, "factored": f} for f, p in groups.items() if p],
        lr=learning_rate, eps=(1e-30, 1e-3), clip_threshold=1.0,
        decay_rate=-0.8, beta1=None, weight_decay=0.0,
        scale_parameter=True, relative_step=False, warmup_init=False)

  @staticmethod
  def _get_options(param_group, param_shape):
    return param_group["factored"], param_group["beta1"] is not None


def mesh_learning_rate(step: int, total_steps: Optional[int] = None,
                       warmup_steps: int = 10000,
                       linear_decay_fraction: float = 0.1,
                       constant: Optional[float] = None) -> float:
  """mesh's learning rate at a step (0 at the first update).

  The default is mesh's `learning_rate_schedule_noam`, as T5 pre-trained:
  rsqrt(max(step, warmup_steps)), decaying linearly to 0 over the last
  linear_decay_fraction of total_steps; `constant` gives T5's finetuning
  rate (0.001) instead.

  Args:
    step: the global step.
    total_steps: the training's steps (None: no decay).
    warmup_steps: the rate is constant until here.
    linear_decay_fraction: the decaying end of the training.
    constant: a constant rate instead of the schedule.

  Returns:
    The learning rate.
  """
  if constant is not None:
    return constant
  rate = max(step, warmup_steps)**-0.5
  if total_steps and linear_decay_fraction > 0:
    rate *= min(1.0, (total_steps - step) /
                (total_steps * linear_decay_fraction))
  return rate


class MtfSynthesizerForConditionalGeneration(MtfSynthesizerPreTrainedModel,
                                             GenerationMixin):
  """The encoder-decoder with its output layer (mesh's Bitransformer)."""
  _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__(config)
    self.model = MtfSynthesizerModel(config)
    self.lm_head = _linear(config.d_model, config.vocab_size,
                           config.d_model**-0.5, truncated=True)
    if not (config.tie_word_embeddings and config.shared_embedding):
      self._tied_weights_keys = {}
    self.post_init()

  def get_input_embeddings(self) -> nn.Embedding:
    return self.model.get_input_embeddings()

  def set_input_embeddings(self, value: nn.Embedding) -> None:
    self.model.set_input_embeddings(value)

  def get_output_embeddings(self) -> nn.Linear:
    return self.lm_head

  def set_output_embeddings(self, value: nn.Linear) -> None:
    self.lm_head = value

  def get_encoder(self, modality=None):
    del modality
    return self.model.encoder

  def get_decoder(self):
    return self.model.decoder

  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              decoder_input_ids: Optional[torch.LongTensor] = None,
              decoder_attention_mask: Optional[torch.Tensor] = None,
              encoder_outputs: Optional[Tuple] = None,
              past_key_values: Optional[Cache] = None,
              inputs_embeds: Optional[torch.Tensor] = None,
              decoder_inputs_embeds: Optional[torch.Tensor] = None,
              labels: Optional[torch.LongTensor] = None,
              use_cache: Optional[bool] = None,
              output_attentions: Optional[bool] = None,
              output_hidden_states: Optional[bool] = None,
              return_dict: Optional[bool] = None,
              num_items_in_batch: Optional[Union[int, torch.Tensor]] = None,
              **kwargs) -> Union[Seq2SeqLMOutput, Tuple]:
    """Logits of the decoder inputs (teacher forcing or a decoding step).

    Args: as `MtfSynthesizerModel.forward`, and
      labels: targets [batch, t] (-100: ignored); decoder_input_ids default
        to them shifted right. The loss is `mesh_loss` (z_loss in training).
      num_items_in_batch: the loss divides its sum by this (the target
        tokens of a whole batch split over calls, as transformers' Trainer
        counts them); only with loss_denominator "tokens".

    Returns:
      Seq2SeqLMOutput, or its tuple.
    """
    if decoder_input_ids is None and decoder_inputs_embeds is None:
      if labels is None:
        raise ValueError("give decoder_input_ids or labels")
      decoder_input_ids = self._shift_right(labels)
    out = self.model(
        input_ids=input_ids, attention_mask=attention_mask,
        decoder_input_ids=decoder_input_ids,
        decoder_attention_mask=decoder_attention_mask,
        encoder_outputs=encoder_outputs, past_key_values=past_key_values,
        inputs_embeds=inputs_embeds,
        decoder_inputs_embeds=decoder_inputs_embeds, use_cache=use_cache,
        output_attentions=output_attentions,
        output_hidden_states=output_hidden_states, return_dict=True,
        **kwargs)
    hidden = out.last_hidden_state
    if self.config.tie_word_embeddings:
      hidden = hidden * self.config.d_model**-0.5
    logits = self.lm_head(hidden)
    loss = None
    if labels is not None:
      loss = mesh_loss(logits, labels,
                       self.config.z_loss if self.training else 0.0,
                       self.config.loss_denominator == "positions",
                       num_items_in_batch)
    return _returned(Seq2SeqLMOutput(
        loss=loss, logits=logits, past_key_values=out.past_key_values,
        decoder_hidden_states=out.decoder_hidden_states,
        decoder_attentions=out.decoder_attentions,
        cross_attentions=out.cross_attentions,
        encoder_last_hidden_state=out.encoder_last_hidden_state,
        encoder_hidden_states=out.encoder_hidden_states,
        encoder_attentions=out.encoder_attentions), return_dict, self.config)

  def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor):
    return self._shift_right(labels)

  @classmethod
  def from_t5(cls, t5_model_or_path, **kwargs):
    """A Synthesizer around a transformers T5's weights.

    Args:
      t5_model_or_path: a T5ForConditionalGeneration, or its path or Hub
        name.
      **kwargs: `t5_conversion_mtf_synthesizer.from_t5`'s
        (encoder_synthesizers, decoder_synthesizers,
        synthesizer_max_length, output_loading_info, config fields).

    Returns:
      The model (and a ConversionInfo with output_loading_info=True).
    """
    # pylint: disable-next=g-import-not-at-top,relative-beyond-top-level
    from .t5_conversion_mtf_synthesizer import from_t5
    return from_t5(cls, t5_model_or_path, **kwargs)


class MtfSynthesizerForCausalLM(MtfSynthesizerPreTrainedModel,
                               GenerationMixin):
  """A decoder-only language model (mesh's Unitransformer, model_type lm).

  One causal stack of `num_layers` blocks with `decoder_synthesizers`. As in
  mesh, a sequence starts with id 0: give [0] + prompt ids. A left-padded
  batch (attention_mask 0 at the padding, and position_ids, which
  `generate()` derives from it) reads each example's tables from its first
  token, so each row generates what it generates alone.
  """
  _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__(config)
    self.model = MtfSynthesizerStack(config, True,
                                     config.decoder_synthesizers,
                                     config.num_layers)
    self.lm_head = _linear(config.d_model, config.vocab_size,
                           config.d_model**-0.5, truncated=True)
    if not config.tie_word_embeddings:
      self._tied_weights_keys = {}
    self.post_init()

  def get_input_embeddings(self) -> nn.Embedding:
    return self.model.embed_tokens

  def set_input_embeddings(self, value: nn.Embedding) -> None:
    self.model.embed_tokens = value

  def get_output_embeddings(self) -> nn.Linear:
    return self.lm_head

  def set_output_embeddings(self, value: nn.Linear) -> None:
    self.lm_head = value

  def get_decoder(self):
    return self.model

  def _prepare_attention_mask_for_generation(self, inputs_tensor,
                                             generation_config,
                                             model_kwargs):
    """Without a mask every id is a token: mesh's sequences start with id 0.

    (transformers would take the leading 0, the pad id, for padding.) Give
    `attention_mask` for a left-padded batch.
    """
    del generation_config, model_kwargs
    return torch.ones(inputs_tensor.shape[:2], dtype=torch.long,
                      device=inputs_tensor.device)

  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              position_ids: Optional[torch.LongTensor] = None,
              past_key_values: Optional[Cache] = None,
              inputs_embeds: Optional[torch.Tensor] = None,
              labels: Optional[torch.LongTensor] = None,
              use_cache: Optional[bool] = None,
              output_attentions: Optional[bool] = None,
              output_hidden_states: Optional[bool] = None,
              return_dict: Optional[bool] = None,
              shift_labels: Optional[torch.LongTensor] = None,
              num_items_in_batch: Optional[Union[int, torch.Tensor]] = None,
              **kwargs) -> Union[CausalLMOutputWithPast, Tuple]:
    """Logits of every position (or of the new ones, with a cache).

    Args:
      input_ids: [batch, t] (the new tokens, when decoding with a cache).
      attention_mask: [batch, cache + t] 1 at tokens, 0 at padding (left
        padding included).
      position_ids: [batch, t] each token's position in its example (its
        row of the tables): with left padding, the count of tokens before
        it, as `generate()` derives them from attention_mask; default the
        cache's length + arange(t).
      past_key_values: the decoding cache.
      inputs_embeds: instead of input_ids.
      labels: targets aligned with input_ids (shifted inside, as in
        transformers' causal LMs); -100 ignored.
      use_cache: keep and return a cache.
      output_attentions: return the attention weights (None: the config's).
      output_hidden_states: return the hidden states (None: the config's).
      return_dict: a ModelOutput, else a tuple (None: the config's).
      shift_labels: instead of labels, the targets already shifted: the
        token each position predicts (-100 ignored), as transformers'
        causal LM losses take them.
      num_items_in_batch: the loss divides its sum by this (the target
        tokens of a whole batch split over calls, as transformers' Trainer
        counts them); only with loss_denominator "tokens".
      **kwargs: generation's bookkeeping; anything else raises.

    Returns:
      CausalLMOutputWithPast, or its tuple.
    """
    _refuse(kwargs, type(self).__name__)
    config = self.config
    if labels is not None and shift_labels is not None:
      raise ValueError("give labels or shift_labels, not both")
    output_attentions, output_hidden_states = _output_flags(
        config, output_attentions, output_hidden_states)
    use_cache = config.use_cache if use_cache is None else use_cache
    if use_cache and past_key_values is None:
      past_key_values = DynamicCache()
    if not use_cache:
      past_key_values = None
    out = self.model(
        input_ids=input_ids, attention_mask=attention_mask,
        inputs_embeds=inputs_embeds, position_ids=position_ids,
        past_key_values=past_key_values,
        output_attentions=output_attentions,
        output_hidden_states=output_hidden_states, return_dict=True)
    hidden = out.last_hidden_state
    if config.tie_word_embeddings:
      hidden = hidden * config.d_model**-0.5
    logits = self.lm_head(hidden)
    loss = None
    predicting = logits
    if labels is not None:  # position i predicts token i + 1
      predicting, shift_labels = logits[:, :-1], labels[:, 1:]
    if shift_labels is not None:
      loss = mesh_loss(predicting, shift_labels,
                       config.z_loss if self.training else 0.0,
                       config.loss_denominator == "positions",
                       num_items_in_batch)
    return _returned(CausalLMOutputWithPast(
        loss=loss, logits=logits, past_key_values=past_key_values,
        hidden_states=out.hidden_states, attentions=out.attentions),
                     return_dict, config)


# A model saved from Python carries this code beside its weights, as an
# export does (config.json's auto_map names the classes), so that it loads
# with trust_remote_code=True where this package is not installed.
MtfSynthesizerConfig.register_for_auto_class()
MtfSynthesizerModel.register_for_auto_class("AutoModel")
MtfSynthesizerForConditionalGeneration.register_for_auto_class(
    "AutoModelForSeq2SeqLM")
MtfSynthesizerForCausalLM.register_for_auto_class("AutoModelForCausalLM")
