# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The synthesizing functions of Tay et al. (sec. 3), one module each.

Per head h, for a query at position i and a memory position j:

  Dense (D)            S_ij = (W2 relu(W1 X_i + b1) + b2)_j       eq. 1-2
  Random (R), Fix      S_ij = R_ij                                eq. 4
  FactorizedDense (FD) S_ij = A_i[j mod a] * B_i[floor(j / a)]    eq. 5-6
  FactorizedRandom     S_ij = (R1 R2^T)_ij                        eq. 7
  DotProduct (V)       S_ij = Q_i . K_j

Each class registers itself in `FUNCTIONS` under mesh's name and takes its
properties from the function's declaration
(synthesizing_functions_mtf_synthesizer.py); the attention layer
(attention_mtf_synthesizer.py) composes them (eq. 8).
"""

import dataclasses
from typing import Dict, NamedTuple, Optional, Tuple, Union

import torch
from torch import nn

# pylint: disable-next=relative-beyond-top-level
from .configuration_mtf_synthesizer import FUNCTION_SETTINGS
# pylint: disable-next=relative-beyond-top-level
from .configuration_mtf_synthesizer import MtfSynthesizerConfig
# pylint: disable-next=relative-beyond-top-level
from .synthesizing_functions_mtf_synthesizer import FUNCTIONS as DECLARED
# pylint: disable-next=relative-beyond-top-level
from .synthesizing_functions_mtf_synthesizer import Sizes


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


class LayerProjections(NamedTuple):
  """The attention layer's own query projection and keys.

  What a function with `needs_keys` (the dot product) reads: its columns
  are the layer's projections.

  Attributes:
    query: the layer's query projection (`q`), called on the layer input,
      or its kernel's rows scaled (`project_heads`).
    keys: the keys [batch, memory_heads, s, d_kv] (the cache's, when
      decoding).
  """
  query: nn.Module
  keys: torch.Tensor


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


def project_heads(projection: nn.Module, x: torch.Tensor, d_kv: int,
                  scale: Union[None, float, torch.Tensor] = None
                  ) -> torch.Tensor:
  """projection(x) [batch, heads, t, d_kv], times a scale per head.

  The scale goes on the smaller of the two: the kernel's rows (no [batch,
  heads, t, d_kv] product kept for the backward), or, for fewer rows than
  d_model (a decoding step), the output. Only a plain projection's kernel
  is scaled: one an adapter (PEFT's LoRA), a quantization or offloading
  has replaced or wrapped is called as it is.

  Args:
    projection: a projection to heads * d_kv.
    x: [batch, t, d_model].
    d_kv: the head width.
    scale: None, one number for every head, or a tensor [heads].

  Returns:
    [batch, heads, t, d_kv].
  """
  b, t, d = x.shape
  if scale is not None and b * t >= d and _plain_linear(projection):
    weight = projection.weight.view(-1, d_kv, d)
    if torch.is_tensor(scale):
      weight = weight * _cast(scale, weight.dtype).view(-1, 1, 1)
    else:
      weight = weight * scale
    out = nn.functional.linear(x, weight.view(-1, d))
    return out.view(b, t, -1, d_kv).transpose(1, 2)
  return scale_heads(projection(x).view(b, t, -1, d_kv).transpose(1, 2),
                     scale)


def scale_heads(x: torch.Tensor,
                scale: Union[None, float, torch.Tensor]) -> torch.Tensor:
  """x [batch, heads, ...] times None, a number, or a tensor [heads]."""
  if scale is None:
    return x
  if torch.is_tensor(scale):
    return _times_each_head(x, scale)
  return x * scale


# ---------------------------------------------------------------------------
# Synthesizing functions. Each has one formulation of its logits
# [batch or 1, heads, length, memory_length], times `scale` (a mixture
# weight per head) applied to its cheapest factor, and says which
# (`contributes`): COLUMNS, a query side [1 or batch, heads, length, c], a
# key side [1 or batch, heads or memory_heads, memory_length, c] and a bias
# per key [1 or batch, heads, memory_length] (or None) whose product is its
# logits (`columns()`), or BIAS, the logits themselves (`forward()`; FD's,
# which have a batch dimension, in autocast's dtype where autocast is on:
# the dtype the kernel reads). `logits()` gives either as logits: what the
# eager kernel adds to its bias.

# What a function contributes to the fused kernel.
COLUMNS = "columns"
BIAS = "bias"

# A training step's FLOPs of a matmul, in its forward's: the backward
# computes the gradient of each operand, a matmul of the same size each.
TRAINING_MATMUL = 3

# The synthesizing functions by name (mesh's `synthesizers.BY_NAME` names):
# each class registers itself when defined.
FUNCTIONS: Dict[str, type] = {}


class MtfSynthesizerFunction(nn.Module):
  """A synthesizing function's module: what it computes and how it starts.

  A subclass gives everything the rest of the model needs, with mesh's
  names for the same properties (`mtf_synthesizer.synthesizers`): `name`
  (its key in FUNCTIONS and FUNCTION_SETTINGS; defining the class
  registers it and sets the properties its declaration states:
  `input_independent`, its logits do not depend on the input: one [1,
  heads, t, s] for the whole batch; `trainable`, its weights train;
  `needs_queries`, it reads the layer's unscaled queries; `needs_keys`,
  its columns are the layer's own query projection and keys,
  `LayerProjections`: the layer computes keys, which the cache keeps),
  `contributes` (COLUMNS or BIAS), `training_flops()` (its own products'
  FLOPs, for the benchmark's MFU) and `initializers()` (mesh's
  initializer of each weight it holds itself, as declared; `nn.Linear`
  layers carry theirs, see `_linear`). Its weights have mesh's local names
  (`<function>/<name>`), which is how the export finds them.
  """
  name = ""
  contributes = BIAS
  input_independent = False
  trainable = True
  needs_queries = False
  needs_keys = False

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if cls.__dict__.get("name"):
      if cls.name not in FUNCTION_SETTINGS:
        raise ValueError(
            "synthesizing function %r is not declared (%s): declare it in "
            "synthesizing_functions.py, or, outside the package, with the "
            "configuration's register_function" %
            (cls.name, ", ".join(FUNCTION_SETTINGS)))
      declaration = DECLARED[cls.name]
      cls.input_independent = declaration.input_independent
      cls.trainable = declaration.trainable
      cls.needs_keys = declaration.needs_keys
      if "needs_queries" not in cls.__dict__:
        cls.needs_queries = declaration.needs_queries
      FUNCTIONS[cls.name] = cls

  @classmethod
  def declared_initializers(cls, config: MtfSynthesizerConfig,
                            settings: Dict[str, object]
                            ) -> Dict[str, Tuple[str, float]]:
    """The declared initializer of each of its variables, by leaf name.

    Args:
      config: the model's configuration.
      settings: the function's settings, by their names in the
        declaration.

    Returns:
      Leaf name -> (kind, scale), as `initializers()` gives them.
    """
    declaration = DECLARED[cls.name]
    sizes = Sizes(config.d_model, config.num_heads, config.d_kv,
                  config.synthesizer_max_length)
    return {v.leaf: declaration.initializer(v.name, sizes, settings)
            for v in declaration.variables_of(settings)}

  def initializers(self, config: MtfSynthesizerConfig
                   ) -> Dict[str, Tuple[str, float]]:
    """mesh's initializer of each weight the module holds directly.

    Args:
      config: the model's configuration.

    Returns:
      Weight name -> (kind, scale): ("normal", std), ("uniform", limit),
      ("zeros", 0.0) or ("constant", value); `initializer_factor`
      multiplies the normal's and the uniform's scale.
    """
    raise NotImplementedError

  def columns(self, hidden: torch.Tensor, queries: Optional[torch.Tensor],
              positions: Positions, scale: Optional[torch.Tensor] = None,
              projections: Optional[LayerProjections] = None
              ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """A COLUMNS function's query side, key side and bias per key.

    Args:
      hidden: the layer input [batch, t, d_model].
      queries: the layer's unscaled queries [batch, heads, t, d_kv], or
        None (given to a function with `needs_queries`).
      positions: the call's positions.
      scale: the function's mixture weight per head [heads], or None.
      projections: the layer's query projection and keys (given to a
        function with `needs_keys`), or None.

    Returns:
      (query [1|batch, heads, t, c], key [1|batch, heads or memory_heads,
      s, c], bias per key [1|batch, heads, s] or None).
    """
    raise NotImplementedError

  def logits(self, hidden: torch.Tensor, queries: Optional[torch.Tensor],
             positions: Positions, scale: Optional[torch.Tensor] = None,
             projections: Optional[LayerProjections] = None
             ) -> torch.Tensor:
    """Its logits S [1 or batch, heads, length, memory_length], times scale.

    From the one formulation the function declares: a BIAS function's
    `forward()`, a COLUMNS function's `columns()` multiplied out
    (`columns_product`). The eager path adds them to its bias, as the
    fused path does for those that join the kernel's bias.

    Args:
      hidden: the layer input [batch, t, d_model].
      queries: the layer's unscaled queries [batch, heads, t, d_kv], or
        None (read by a function with `needs_queries`).
      positions: the call's positions.
      scale: the function's mixture weight per head [heads], or None.
      projections: as for `columns()`.

    Returns:
      float32 logits, or autocast's dtype where autocast is on.
    """
    if self.contributes == COLUMNS:
      return columns_product(*self.columns(hidden, queries, positions,
                                           scale, projections))
    return self(hidden, queries, positions, scale)

  def training_flops(self, batch: int, length: int,
                     memory_length: int) -> Dict[str, int]:
    """A training step's FLOPs of its own products in one layer.

    The model's math, forward and backward (a multiply-add is 2 FLOPs; a
    matmul costs `TRAINING_MATMUL` times its forward), not the kernel's
    work: the layer's projections and its weights times the values are the
    layer's, not the function's. The benchmark's MFU adds these up
    (`workbench/pytorch/flops.py`).

    Args:
      batch: the examples.
      length: the queries of each.
      memory_length: the memory positions of each.

    Returns:
      Term name -> FLOPs: one term per product, named after the function
      (`<name>` for its matmuls, `<name>_<what>` for another); {} for none
      (R's and Fix's tables are read, not computed).
    """
    del batch, length, memory_length
    return {}

  def mesh_shapes(self) -> Dict[str, Tuple[int, ...]]:
    """mesh's shape of each weight whose PyTorch shape merges its dims.

    mesh's Adafactor factors a variable by its two largest dimensions
    (`mtf_synthesizer/hf_tools/mesh_training.py`, `mesh_factored`): a
    weight whose PyTorch layout joins two of them names mesh's shape here.

    Returns:
      Weight name (as in named_parameters of this module) -> mesh's shape.
    """
    return {}


class MtfSynthesizerDotProduct(MtfSynthesizerFunction):
  """V: S_ij = Q_i . K_j, its columns the layer's queries and keys.

  No weights of its own: the layer's q and k. Its query side carries its
  mixture weight and, with `scale_queries`, 1/sqrt(d_kv) (mesh folds that
  scale into the query initializer otherwise), on the query kernel's rows.
  """
  name = "dot_product"
  contributes = COLUMNS

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__()
    self.num_heads = config.num_heads
    self.d_kv = config.d_kv
    self.query_scale = config.d_kv**-0.5 if config.scale_queries else None

  def training_flops(self, batch, length, memory_length):
    """Q K^T: 2 B h t s c per layer, times TRAINING_MATMUL."""
    return {self.name: TRAINING_MATMUL * 2 * batch * self.num_heads *
                       length * memory_length * self.d_kv}

  def initializers(self, config):
    del config
    return {}

  def columns(self, hidden, queries, positions: Positions, scale=None,
              projections: Optional[LayerProjections] = None):
    """(scale * the layer's queries, the layer's keys, None).

    The queries are projected with the scale on the kernel's rows, or,
    where the layer has computed them for another function (D's shared
    query projection), scaled.
    """
    del positions
    if self.query_scale is not None:
      scale = self.query_scale if scale is None else scale * self.query_scale
    if queries is not None:
      return scale_heads(queries, scale), projections.keys, None
    return (project_heads(projections.query, hidden, self.d_kv, scale),
            projections.keys, None)


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


def columns_product(query: torch.Tensor, key: torch.Tensor,
                    key_bias: Optional[torch.Tensor]) -> torch.Tensor:
  """A COLUMNS function's logits: query . key^T plus the bias per key.

  Args:
    query: [1 or batch, heads, t, c].
    key: [1 or batch, heads, s, c].
    key_bias: [1 or batch, heads, s], or None.

  Returns:
    [1 or batch, heads, t, s] in float32, or autocast's dtype where
    autocast is on.
  """
  dtype = _logits_dtype(query)
  query, key = _cast(query, dtype), _cast(key, dtype)
  if key_bias is not None:
    key_bias = _cast(key_bias, dtype)
  if key.shape[0] == 1 and (key_bias is None or key_bias.shape[0] == 1):
    # Keys shared by the batch: one matmul batched over heads on each
    # head's rows (a view of a projection's output), so that the key side
    # is neither expanded per example nor its gradient summed over them.
    b, h, t, c = query.shape
    rows = query.transpose(0, 1).reshape(h, b * t, c)
    keys = key[0].transpose(1, 2)
    if key_bias is None:
      out = torch.bmm(rows, keys)
    else:  # [1, heads, s] -> [heads, 1, s]: the addend of every row
      out = torch.baddbmm(key_bias.transpose(0, 1), rows, keys)
    return out.view(h, b, t, -1).transpose(0, 1)
  out = torch.matmul(query, key.transpose(-1, -2))
  if key_bias is not None:
    out = out + key_bias[:, :, None, :]
  return out


def _scaled_table(table: torch.Tensor, scale: Optional[torch.Tensor]):
  """table [heads, ...] * scale [heads], in float32."""
  table = _cast(table, torch.float32)
  if scale is None:
    return table
  return table * scale.view(-1, *([1] * (table.dim() - 1)))


def _times_each_head(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
  """x [batch, heads, ...] times scale [heads], in x's dtype."""
  return x * _cast(scale, x.dtype).view(1, -1, *([1] * (x.dim() - 2)))


def _narrow(x: torch.Tensor, dim: int, start, length: int) -> torch.Tensor:
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
    return _narrow(table, 1, positions.start, positions.length)[None]
  return table[:, positions.query].transpose(0, 1)


def _columns(table: torch.Tensor, positions: Positions) -> torch.Tensor:
  """[heads, ..., N] -> memory columns: [1 or batch, heads, ..., s]."""
  if positions.memory is None:
    return _narrow(table, -1, 0, positions.memory_length)[None]
  # [heads, ..., batch, s] -> [batch, heads, ..., s]
  gathered = table[..., positions.memory]
  return gathered.movedim(-2, 0)


def _key_rows(table: torch.Tensor, positions: Positions) -> torch.Tensor:
  """[heads, N, c] -> the memory rows: [1 or batch, heads, s, c]."""
  if positions.memory is None:
    return _narrow(table, 1, 0, positions.memory_length)[None]
  return table[:, positions.memory].transpose(0, 1)


class MtfSynthesizerRandom(MtfSynthesizerFunction):
  """R (eq. 4): a trainable [heads, N, N] table, read at the positions."""
  name = "random"
  contributes = BIAS

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__()
    n = config.synthesizer_max_length
    table = torch.empty(config.num_heads, n, n)
    if self.trainable:
      self.R = nn.Parameter(table)
    else:  # drawn at initialization, saved with the weights
      self.register_buffer("R", table, persistent=True)

  def initializers(self, config):
    # The original release's glorot scale on its [N, heads, N] variable.
    return {"R": self.declared_initializers(config, {})["R"]}

  def forward(self, hidden, queries, positions: Positions, scale=None):
    del hidden, queries
    r = self.R
    if positions.query is None:
      r = _narrow(_narrow(r, 1, positions.start, positions.length), 2, 0,
                  positions.memory_length)
      return _scaled_table(r, scale)[None]
    rows = r[:, positions.query]                       # [h, b, t, N]
    index = positions.memory[None, :, None, :].expand(
        rows.shape[0], -1, rows.shape[2], -1)
    picked = _scaled_table(torch.gather(rows, 3, index), scale)
    return picked.transpose(0, 1)


class MtfSynthesizerFixedRandom(MtfSynthesizerRandom):
  """Fix (eq. 4): R drawn at initialization and never trained (a buffer)."""
  name = "fixed_random"


class MtfSynthesizerFactorizedRandom(MtfSynthesizerFunction):
  """FR (eq. 7): R1 R2^T, R1 and R2 [heads, N, k]."""
  name = "factorized_random"
  contributes = COLUMNS

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__()
    shape = (config.num_heads, config.synthesizer_max_length,
             config.factorized_random_k)
    self.R1 = nn.Parameter(torch.empty(shape))
    self.R2 = nn.Parameter(torch.empty(shape))

  def initializers(self, config):
    return self.declared_initializers(
        config, {"k": config.factorized_random_k})

  def training_flops(self, batch, length, memory_length):
    """R1 R2^T: 2 h t s k, once for the batch."""
    del batch
    heads, _, k = self.R1.shape
    return {self.name: TRAINING_MATMUL * 2 * heads * length *
                       memory_length * k}

  def columns(self, hidden, queries, positions: Positions, scale=None,
              projections=None):
    """(R1's query rows, scale * R2's memory rows, None): k columns each."""
    del hidden, queries, projections
    r2 = _key_rows(self.R2, positions)
    if scale is not None:
      r2 = _times_each_head(r2, scale)
    return _rows(self.R1, positions), r2, None


def _heads_from_rows(x: torch.Tensor, batch: int) -> torch.Tensor:
  """[heads, batch * t, n] -> [batch, heads, t, n] (a view)."""
  heads, rows, n = x.shape
  return x.view(heads, batch, rows // batch, n).transpose(0, 1)


class _DenseHidden(MtfSynthesizerFunction):
  """relu(W1 X_i + b1) per head, the first layer of D and FD.

  Args:
    config: the model's configuration.
    first_layer: with W1 and b1 (else the layer's queries take their place:
      D's `dense_share_query_projection`, whose hidden width is d_kv).
  """

  def __init__(self, config: MtfSynthesizerConfig, first_layer: bool = True):
    super().__init__()
    self.num_heads = config.num_heads
    self.use_bias = config.synthesizer_use_bias
    if first_layer:
      self.hidden_size = config.dense_hidden_size or config.d_kv
      self.w1 = _linear(config.d_model, self.num_heads * self.hidden_size,
                        config.d_model**-0.5, bias=self.use_bias)
    else:
      self.hidden_size = config.d_kv

  def first_layer_flops(self, tokens: int) -> int:
    """W1's training FLOPs on `tokens` (0 where the queries stand in)."""
    if not hasattr(self, "w1"):
      return 0
    return (TRAINING_MATMUL * 2 * tokens * self.w1.in_features *
            self.w1.out_features)

  def mesh_shapes(self) -> Dict[str, Tuple[int, ...]]:
    """W1: mesh's [d_model, heads, hidden], PyTorch's [heads * hidden, d]."""
    if not hasattr(self, "w1"):
      return {}
    return {"w1.weight": (self.w1.in_features, self.num_heads,
                          self.hidden_size)}

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
    super().__init__(config, first_layer=not self.share_query_projection)
    n = config.synthesizer_max_length
    self.w2 = nn.Parameter(torch.empty(config.num_heads, self.hidden_size, n))
    if self.use_bias:
      self.b2 = nn.Parameter(torch.empty(config.num_heads, n))

  @property
  def needs_queries(self) -> bool:
    return DECLARED[self.name].reads_queries(
        {"share_query_projection": self.share_query_projection})

  def training_flops(self, batch, length, memory_length):
    """W1 (unless the queries stand in) and W2's columns in use."""
    tokens = batch * length
    return {self.name: self.first_layer_flops(tokens) + TRAINING_MATMUL * 2 *
                       tokens * self.num_heads * self.hidden_size *
                       memory_length}

  def initializers(self, config):
    out = {"w2": ("normal", self.w2.shape[1]**-0.5)}
    if self.use_bias:
      out["b2"] = ("zeros", 0.0)
    return out

  def columns(self, hidden, queries, positions: Positions, scale=None,
              projections=None):
    """(relu(W1 X + b1), scale * W2^T's memory rows, scale * b2's columns).

    b2 is the same for every query: the layer adds it to its bias, or
    joins it as a column of the keys against a column of ones.
    """
    del projections
    h = torch.relu(queries) if self.share_query_projection else (
        self.hidden(hidden))
    # [1|b, heads, s, hidden]: the rows in use, sliced first.
    keys = _key_rows(self.w2.transpose(1, 2), positions)
    if scale is not None:
      keys = _times_each_head(keys, scale)
    b2 = None
    if self.use_bias:
      b2 = _columns(_scaled_table(self.b2, scale), positions)  # [1|b, h, s]
    return h, keys, b2


class MtfSynthesizerFactorizedDense(_DenseHidden):
  """FD (eq. 5-6): C_ij = A_i[j mod a] * B_i[floor(j / a)].

  Not a low-rank product: the fused kernel gets it as a bias.
  """
  name = "factorized_dense"
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

  def training_flops(self, batch, length, memory_length):
    """W1 and the factors' layers; the outer product, elementwise.

    The outer product's forward is one multiply per logit of the column
    blocks in use; its backward one multiply-add per logit for each
    factor: 5 FLOPs per logit (`<name>_product`).
    """
    tokens = batch * length
    factors = TRAINING_MATMUL * 2 * tokens * self.num_heads * (
        self.hidden_size) * (self.a + self.b)
    blocks = -(-memory_length // self.a)
    return {self.name: self.first_layer_flops(tokens) + factors,
            self.name + "_product": 5 * tokens * self.num_heads * blocks *
                                    self.a}

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
      fa = _times_each_head(fa, scale)
    if positions.memory is None:
      # Column j = jb * a + ja: the outer product laid out row-major is C,
      # built only for the column blocks in use.
      s = positions.memory_length
      # Ceiling without dividing a negative size (which ONNX's integer
      # division rounds toward zero, not down).
      blocks = (s + self.a - 1) // self.a
      c = fb[..., :blocks, None] * fa[..., None, :]
      return _narrow(c.flatten(-2), -1, 0, s)
    columns = positions.memory[:, None, None, :]
    shape = fa.shape[:3] + (columns.shape[-1],)
    return (torch.gather(fa, 3, (columns % self.a).expand(shape)) *
            torch.gather(fb, 3, (columns // self.a).expand(shape)))
