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
import math
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import flax.linen as nn
import jax
from jax import lax
import jax.numpy as jnp

Array = jax.Array
Initializer = Callable[..., Array]

# THE settings of every synthesizing function and their defaults, read from
# this one dict only. To be read from the package's declarations module of
# the synthesizing functions (`mtf_synthesizer.synthesizing_functions`) once
# it exists: replace this dict by that module's defaults.
# A hidden_size of None means d_kv; FD's a and b of None mean
# `default_factors(max_length)`.
_SETTINGS_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "dot_product": {},
    "random": {"initializer_scale": 1.0},
    "fixed_random": {"initializer_scale": 1.0},
    "factorized_random": {"k": 8},
    "dense": {"hidden_size": None, "use_bias": True,
              "share_query_projection": False},
    "factorized_dense": {"a": None, "b": None, "hidden_size": None,
                         "use_bias": True},
}

# The functions that hold tables of `max_length` positions.
READS_MAX_LENGTH = frozenset(n for n in _SETTINGS_DEFAULTS
                             if n != "dot_product")
# Functions whose variables are never trained (stop_gradient; excluded from
# the optimizer by `trainable_mask`).
NOT_TRAINED = frozenset(["fixed_random"])


def function_settings(name: str,
                      overrides: Optional[Mapping[str, Any]] = None
                      ) -> Dict[str, Any]:
  """A synthesizing function's settings: the defaults and `overrides`.

  Args:
    name: the function's name (mesh's, e.g. "factorized_random").
    overrides: settings to change, e.g. {"k": 32}.

  Returns:
    Setting name -> value.

  Raises:
    ValueError: an unknown function or setting.
  """
  if name not in _SETTINGS_DEFAULTS:
    raise ValueError("Unknown synthesizing function %r; known: %s." % (
        name, ", ".join(_SETTINGS_DEFAULTS)))
  settings = dict(_SETTINGS_DEFAULTS[name])
  for key, value in (overrides or {}).items():
    if key not in settings:
      raise ValueError("Unknown setting %r of %s; its settings: %s." % (
          key, name, ", ".join(settings) or "none"))
    settings[key] = value
  return settings


def default_factors(n: int) -> Tuple[int, int]:
  """FD's default (a, b): a the largest divisor of n with a <= sqrt(n).

  Args:
    n: N, max_length.

  Returns:
    (a, n // a).
  """
  a = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
  return a, n // a


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

  def _param(self, name: str, init: Initializer, shape: Tuple[int, ...],
             axes: Tuple[Optional[str], ...]) -> Array:
    return self.param(name, nn.with_logical_partitioning(init, axes), shape,
                      self.param_dtype)


class Random(SynthesizingFunction):
  """R (eq. 4): a trainable table [heads, N, N], read at the positions."""
  trainable = True

  @nn.compact
  def __call__(self, inputs: SynthesisInputs) -> Array:
    h, n = self.num_heads, self.max_length
    limit = self.settings.get("initializer_scale", 1.0) * math.sqrt(
        6.0 / (h * n + n * n))
    r = self._param("R", uniform(limit), (h, n, n),
                    ("heads", "length", "length"))
    if not self.trainable:
      r = lax.stop_gradient(r)
    rows = _query_rows(r, inputs)[:, :, :inputs.memory_length]
    return rows.astype(jnp.float32)[None]


class FixedRandom(Random):
  """Fix (eq. 4): R drawn at initialization and never trained."""
  trainable = False


class FactorizedRandom(SynthesizingFunction):
  """FR (eq. 7): R1 R2^T, R1 and R2 [heads, N, k]."""

  @nn.compact
  def __call__(self, inputs: SynthesisInputs) -> Array:
    h, n, k = self.num_heads, self.max_length, self.settings["k"]
    limit = math.sqrt(6.0 / (k * (h + n)))
    r1 = self._param("R1", uniform(limit), (h, n, k),
                     ("heads", "length", None))
    r2 = self._param("R2", uniform(limit), (h, n, k),
                     ("heads", "length", None))
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
    w1 = self._param("w1", normal(d**-0.5), (d, self.num_heads,
                                             self.hidden_size),
                     ("embed", "heads", "kv"))
    y = jnp.einsum("bte,ehk->bthk", inputs.x.astype(self.dtype),
                   w1.astype(self.dtype))
    if self.settings["use_bias"]:
      y = y + self._param("b1", nn.initializers.zeros,
                          (self.num_heads, self.hidden_size),
                          ("heads", "kv")).astype(self.dtype)
    return nn.relu(y)

  def projection(self, hidden: Array, name: str, width: int) -> Array:
    """hidden [batch, length, heads, c] times w{name} [heads, c, width]."""
    c = hidden.shape[-1]
    w = self._param("w" + name, normal(c**-0.5), (self.num_heads, c, width),
                    ("heads", "kv", None))
    y = jnp.einsum("bthc,hcw->bhtw", hidden, w.astype(hidden.dtype))
    if self.settings["use_bias"]:
      y = y + self._param("b" + name, nn.initializers.zeros,
                          (self.num_heads, width),
                          ("heads", None)).astype(y.dtype)[None, :, None]
    return y.astype(jnp.float32)


class Dense(_DenseHidden):
  """D (eq. 1-2): each query predicts its row of N logits.

  Only the columns of the memory positions are computed: W2's and b2's
  first memory_length columns.
  """

  @nn.compact
  def __call__(self, inputs: SynthesisInputs) -> Array:
    hidden = self.hidden(inputs)
    c, n, s = hidden.shape[-1], self.max_length, inputs.memory_length
    w2 = self._param("w2", normal(c**-0.5), (self.num_heads, c, n),
                     ("heads", "kv", "length"))
    logits = jnp.einsum("bthc,hcs->bhts", hidden,
                        w2[:, :, :s].astype(hidden.dtype)).astype(jnp.float32)
    if self.settings["use_bias"]:
      b2 = self._param("b2", nn.initializers.zeros, (self.num_heads, n),
                       ("heads", "length"))
      logits = logits + b2[:, :s].astype(jnp.float32)[None, :, None]
    return logits


class FactorizedDense(_DenseHidden):
  """FD (eq. 5-6): C_ij = A_i[j mod a] * B_i[floor(j / a)], a * b = N."""

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


# The modules by function name (mesh's `synthesizers.BY_NAME` names).
MODULES = {
    "dot_product": DotProduct,
    "random": Random,
    "fixed_random": FixedRandom,
    "factorized_random": FactorizedRandom,
    "dense": Dense,
    "factorized_dense": FactorizedDense,
}


def needs_queries(name: str, settings: Mapping[str, Any]) -> bool:
  """Whether a function reads the layer's query projection."""
  return name == "dot_product" or bool(
      settings.get("share_query_projection"))


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
