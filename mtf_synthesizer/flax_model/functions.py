# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The synthesizing functions of Tay et al. (sec. 3), one linen module each.

Per head h, for a query at position i and a memory position j:

  Dense (D)            S_ij = (W2 relu(W1 X_i + b1) + b2)_j       eq. 1-2
  Random (R), Fix      S_ij = R_ij                                eq. 4
  FactorizedDense (FD) S_ij = A_i[j mod a] * B_i[floor(j / a)]    eq. 5-6
  FactorizedRandom     S_ij = (R1 R2^T)_ij                        eq. 7
  DotProduct (V)       S_ij = Q_i . K_j

Each module holds its variables under mesh's local names and shapes (e.g.
`random/R` [heads, N, N]) and returns float32 logits [batch or 1, heads,
length, memory_length]. The queries are at positions `start .. start +
length - 1` (`start` is the cache index in a decoding step), the memory at
`0 .. memory_length - 1`: a table holds `max_length` (N) positions, sliced.
The dot product holds nothing: its queries and keys are the attention
layer's projections (`attention.SynthesizerAttention`).
"""

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import flax.linen as nn
import jax
from jax import lax
import jax.numpy as jnp

from mtf_synthesizer import synthesizing_functions as declared

Array = jax.Array
Initializer = Callable[..., Array]

def declaration(name: str) -> declared.Function:
  """A synthesizing function's declaration (`synthesizing_functions`).

  Args:
    name: the function's name (mesh's, e.g. "factorized_random").

  Returns:
    The declared Function.

  Raises:
    ValueError: an unknown function.
  """
  if name not in declared.FUNCTIONS:
    raise ValueError("Unknown synthesizing function %r; known: %s." % (
        name, ", ".join(declared.FUNCTIONS)))
  return declared.FUNCTIONS[name]


def function_settings(name: str,
                      overrides: Optional[Mapping[str, Any]] = None
                      ) -> Dict[str, Any]:
  """A synthesizing function's settings: the declared defaults, `overrides`.

  A hidden_size of None means d_kv; FD's a and b of None mean
  `default_factors(max_length)` (the declarations' rules).

  Args:
    name: the function's name (mesh's, e.g. "factorized_random").
    overrides: settings to change, e.g. {"k": 32}.

  Returns:
    Setting name -> value, for every setting.

  Raises:
    ValueError: an unknown function or setting, or a value its setting's
      kind refuses.
  """
  function = declaration(name)
  unknown = sorted(set(overrides or {}) - set(function.defaults()))
  if unknown:
    raise ValueError("Unknown setting %r of %s; its settings: %s." % (
        unknown[0], name, ", ".join(function.defaults()) or "none"))
  return function.resolve(overrides)


def reads_max_length(name: str) -> bool:
  """Whether a function holds tables of `max_length` positions."""
  return declaration(name).reads_max_length


def default_factors(n: int) -> Tuple[int, int]:
  """FD's default (a, b) for max_length n (the declarations' rule)."""
  return declared.default_factors(n)


def factor_sizes(a: Optional[int], b: Optional[int],
                 n: int) -> Tuple[int, int]:
  """FD's (a, b) for max_length n, checked: a * b == n.

  Args:
    a: the setting a, or None.
    b: the setting b, or None.
    n: N, max_length.

  Returns:
    (a, b).

  Raises:
    ValueError: a * b != n, a factor that is not a positive integer, or
      no default split of a prime n (mesh's rule).
  """
  for name, value in (("a", a), ("b", b)):
    if value is not None and (isinstance(value, bool) or
                              not isinstance(value, int) or value < 1):
      raise ValueError("factorized_dense's %s must be a positive integer, "
                       "got %r." % (name, value))
  if a is None and b is None:
    a, b = default_factors(n)
    if a == 1:
      raise ValueError(
          "factorized_dense cannot factorize max_length %d (%s): the only "
          "split is a=1, b=%d. Valid: a composite max_length, or a and b "
          "set explicitly with a * b == max_length." % (
              n, "prime" if n > 1 else "1", n))
  elif a is None:
    a = n // b
  elif b is None:
    b = n // a
  if a * b != n:
    raise ValueError(
        "factorized_dense needs a * b == max_length; got a=%d, b=%d (a * b "
        "= %d), max_length=%d. Valid: factors of %d, e.g. a=%d, b=%d." % (
            a, b, a * b, n, n, *default_factors(n)))
  return a, b


def uniform(limit: float) -> Initializer:
  """U(-limit, limit), mesh's `random_uniform_initializer`."""
  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -limit, limit)
  return init


def normal(stddev: float) -> Initializer:
  """N(0, stddev^2), mesh's `random_normal_initializer`."""
  return jax.nn.initializers.normal(stddev)


@dataclasses.dataclass(frozen=True)
class SynthesisInputs:
  """What a synthesizing function reads in one call.

  Attributes:
    x: the layer input [batch, length, embed].
    start: the first query's position (an int, or a traced int32 scalar:
      the cache index of a decoding step).
    memory_length: the memory positions, 0 .. memory_length - 1.
    queries: the layer's query projection [batch, length, heads, kv], or
      None where no function needs it.
    keys: the layer's keys [batch, memory_length, heads, kv] (the cache's
      in a decoding step), or None.
  """
  x: Array
  start: Any
  memory_length: int
  queries: Optional[Array] = None
  keys: Optional[Array] = None

  @property
  def length(self) -> int:
    return self.x.shape[1]


def _query_rows(table: Array, inputs: SynthesisInputs) -> Array:
  """[heads, N, ...] -> its rows at the query positions [heads, length, ...].

  A dynamic slice: past the table's end (a decoding step beyond N, whose
  output is discarded) it reads the last rows, as mesh reads row N - 1.
  """
  return lax.dynamic_slice_in_dim(table, inputs.start, inputs.length, axis=1)


class SynthesizingFunction(nn.Module):
  """A synthesizing function: its logits from the layer's inputs.

  Attributes:
    num_heads: h.
    head_dim: d_kv (the default hidden width of D and FD).
    max_length: N, the positions its tables hold.
    settings: the function's settings (`function_settings`).
    dtype: the dtype of the computation before the logits (float32 logits).
    param_dtype: the dtype of the variables.
  """
  num_heads: int
  head_dim: int
  max_length: int
  settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  name_declared = ""  # the function's name in the declarations

  def _param(self, name: str, shape: Tuple[int, ...],
             axes: Tuple[Optional[str], ...], d_model: int = 0) -> Array:
    """The variable `name`, drawn as its declaration says (mesh's draw)."""
    kind, value = declaration(self.name_declared).initializer(
        name, declared.Sizes(d_model, self.num_heads, self.head_dim,
                             self.max_length), self.settings)
    init = {declared.UNIFORM: lambda: uniform(value),
            declared.NORMAL: lambda: normal(value),
            declared.ZEROS: lambda: nn.initializers.zeros}[kind]()
    return self.param(name, nn.with_logical_partitioning(init, axes), shape,
                      self.param_dtype)


class Random(SynthesizingFunction):
  """R (eq. 4): a trainable table [heads, N, N], read at the positions."""
  name_declared = "random"

  @nn.compact
  def __call__(self, inputs: SynthesisInputs) -> Array:
    h, n = self.num_heads, self.max_length
    r = self._param("R", (h, n, n), ("heads", "length", "length"))
    if not declaration(self.name_declared).trainable:
      r = lax.stop_gradient(r)
    rows = _query_rows(r, inputs)[:, :, :inputs.memory_length]
    return rows.astype(jnp.float32)[None]


class FixedRandom(Random):
  """Fix (eq. 4): R drawn at initialization and never trained."""
  name_declared = "fixed_random"


class FactorizedRandom(SynthesizingFunction):
  """FR (eq. 7): R1 R2^T, R1 and R2 [heads, N, k]."""
  name_declared = "factorized_random"

  @nn.compact
  def __call__(self, inputs: SynthesisInputs) -> Array:
    h, n, k = self.num_heads, self.max_length, self.settings["k"]
    r1 = self._param("R1", (h, n, k), ("heads", "length", None))
    r2 = self._param("R2", (h, n, k), ("heads", "length", None))
    rows = _query_rows(r1, inputs).astype(jnp.float32)
    columns = r2[:, :inputs.memory_length].astype(jnp.float32)
    return jnp.einsum("hqk,hsk->hqs", rows, columns)[None]


class _DenseHidden(SynthesizingFunction):
  """relu(W1 X_i + b1) per head: the first layer of D and FD."""

  @property
  def hidden_size(self) -> int:
    return self.settings.get("hidden_size") or self.head_dim

  def hidden(self, inputs: SynthesisInputs) -> Array:
    """[batch, length, embed] -> [batch, length, heads, hidden]."""
    if self.settings.get("share_query_projection"):
      if inputs.queries is None:
        raise ValueError("share_query_projection needs the layer's queries")
      return nn.relu(inputs.queries)
    d = inputs.x.shape[-1]
    w1 = self._param("w1", (d, self.num_heads, self.hidden_size),
                     ("embed", "heads", "kv"), d)
    y = jnp.einsum("bte,ehk->bthk", inputs.x.astype(self.dtype),
                   w1.astype(self.dtype))
    if self.settings["use_bias"]:
      y = y + self._param("b1", (self.num_heads, self.hidden_size),
                          ("heads", "kv")).astype(self.dtype)
    return nn.relu(y)

  def projection(self, hidden: Array, name: str, width: int) -> Array:
    """hidden [batch, length, heads, c] times w{name} [heads, c, width]."""
    c = hidden.shape[-1]
    w = self._param("w" + name, (self.num_heads, c, width),
                    ("heads", "kv", None))
    y = jnp.einsum("bthc,hcw->bhtw", hidden, w.astype(hidden.dtype))
    if self.settings["use_bias"]:
      y = y + self._param("b" + name, (self.num_heads, width),
                          ("heads", None)).astype(y.dtype)[None, :, None]
    return y.astype(jnp.float32)


class Dense(_DenseHidden):
  """D (eq. 1-2): each query predicts its row of N logits.

  Only the columns of the memory positions are computed: W2's and b2's
  first memory_length columns.
  """
  name_declared = "dense"

  @nn.compact
  def __call__(self, inputs: SynthesisInputs) -> Array:
    hidden = self.hidden(inputs)
    c, n, s = hidden.shape[-1], self.max_length, inputs.memory_length
    w2 = self._param("w2", (self.num_heads, c, n), ("heads", "kv", "length"))
    logits = jnp.einsum("bthc,hcs->bhts", hidden,
                        w2[:, :, :s].astype(hidden.dtype)).astype(jnp.float32)
    if self.settings["use_bias"]:
      b2 = self._param("b2", (self.num_heads, n), ("heads", "length"))
      logits = logits + b2[:, :s].astype(jnp.float32)[None, :, None]
    return logits


class FactorizedDense(_DenseHidden):
  """FD (eq. 5-6): C_ij = A_i[j mod a] * B_i[floor(j / a)], a * b = N."""
  name_declared = "factorized_dense"

  def setup_factors(self) -> Tuple[int, int]:
    return factor_sizes(self.settings.get("a"), self.settings.get("b"),
                        self.max_length)

  @nn.compact
  def __call__(self, inputs: SynthesisInputs) -> Array:
    a, b = self.setup_factors()
    hidden = self.hidden(inputs)
    factor_a = self.projection(hidden, "a", a)  # [batch, heads, length, a]
    factor_b = self.projection(hidden, "b", b)
    s = inputs.memory_length
    rows = -(-s // a)  # the rows of B that reach memory_length
    # Column j = jb * a + ja: the outer product B A^T read row by row.
    outer = factor_b[..., :rows, None] * factor_a[..., None, :]
    return outer.reshape(outer.shape[:-2] + (rows * a,))[..., :s]


class DotProduct(nn.Module):
  """V: S_ij = Q_i . K_j, the layer's queries and keys (no variables).

  mesh folds the 1/sqrt(d_kv) scale into the query kernel's initializer.
  """

  @nn.compact
  def __call__(self, inputs: SynthesisInputs) -> Array:
    return jnp.einsum("bqhd,bshd->bhqs", inputs.queries.astype(jnp.float32),
                      inputs.keys.astype(jnp.float32))


def _declared_modules(cls: type) -> Dict[str, type]:
  """Every subclass of cls that names its function, by that name."""
  out = {}
  for sub in cls.__subclasses__():
    if sub.__dict__.get("name_declared"):
      out[sub.name_declared] = sub
    out.update(_declared_modules(sub))
  return out


# The modules by function name (the declarations' names): every
# SynthesizingFunction class with its `name_declared`, and the dot product,
# which reads the layer's own projections.
MODULES = dict(_declared_modules(SynthesizingFunction),
               **{declared.VANILLA: DotProduct})


def needs_queries(name: str, settings: Mapping[str, Any]) -> bool:
  """Whether a function reads the layer's query projection."""
  return declaration(name).reads_queries(settings)


# Functions whose variables are never trained (stop_gradient; excluded from
# the optimizer by `trainable_mask`).
NOT_TRAINED = frozenset(n for n, f in declared.FUNCTIONS.items()
                        if not f.trainable)


def trainable_mask(params: Any) -> Any:
  """A pytree like `params`: False at variables that are never trained.

  The variables of Fix (`fixed_random/R`): give the mask to
  `optax.masked` (or `optax.multi_transform`) so that no optimizer
  updates them or keeps slots for them.

  Args:
    params: the model's parameters (boxed or not).

  Returns:
    A pytree of bools with the structure of `params`.
  """
  def trained(path, _):
    names = [getattr(p, "key", getattr(p, "name", None)) for p in path]
    return not any(name in NOT_TRAINED for name in names)
  return jax.tree_util.tree_map_with_path(
      trained, params, is_leaf=lambda x: isinstance(x, nn.meta.AxisMetadata))
