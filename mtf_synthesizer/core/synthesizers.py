# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The synthesizing functions of the Synthesizer paper (Tay et al., sec. 3).

Each synthesizing function S maps the layer input X to attention logits per
head over [length, memory_length]; the layer (`layer.py`) adds the usual bias
(masks, relative positions), takes the softmax over memory and multiplies by
the values G(X). Names follow the paper:

  Dense (D)               S(X)_i = W2 relu(W1 X_i + b1) + b2       eq. 1-3
  Random (R)              S(X)   = R, trainable                     eq. 4
  FixedRandom (Fix)       S(X)   = R, never trained                 eq. 4
  FactorizedDense (FD)    S(X)_i = H_A(F_A(X_i)) * H_B(F_B(X_i))   eq. 5-6
  FactorizedRandom (FR)   S(X)   = R1 R2^T                          eq. 7
  DotProduct (V)          S(X)   = Q K^T (scaled as in mesh)        Table 1

Their Mixture (eq. 8) is `mixture.py`. What each function is, apart from
its math here, is its declaration (`mtf_synthesizer.synthesizing_functions`):
its settings' defaults (the keywords' defaults below, which gin reads) and
checks, its properties, its variables and their initializers.

Every parameter is per head (and, since each layer owns its variables, per
layer), as in the paper's S_{h,l}. Functions that index by position (R, FR and
the columns of D/FD) hold max_length rows and are truncated to the batch's
lengths. Positions are either contiguous from 0 (plain sequences: a slice,
with no batch dimension for R and FR, so softmax(R) is computed once per step)
or explicit per example (packed sequences and incremental decoding: a gather
by the position of each token inside its own segment).

The logits are float32 whatever the activation dtype (bfloat16 on TPU): the
first layers (W1 X, the factor projections, F_Q and F_K) run in the activation
dtype, as mesh's query and key projections do, and each factor of the logits
is cast to float32 before the mixture weight and the final product.
"""

from typing import Optional, Tuple

from absl import logging
import gin
import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf

from mtf_synthesizer import synthesizing_functions as declarations
from mtf_synthesizer.core import interface
from mtf_synthesizer.ops import positions as positions_lib
from mtf_synthesizer.ops import products

# The functions below by name: each class registers itself when defined.
BY_NAME = interface.BY_NAME


def _default(function: str, setting: str):
  """A setting's declared default: the default of mesh's keyword."""
  return declarations.FUNCTIONS[function].setting(setting).default


def _uniform(inputs: interface.SynthesisInputs, function: str, variable: str,
             settings) -> tf.keras.initializers.Initializer:
  """A variable's declared uniform initializer, for this layer's sizes."""
  kind, limit = declarations.FUNCTIONS[function].initializer(
      variable, declarations.Sizes(inputs.model_dim.size, inputs.num_heads,
                                   inputs.key_dim.size, inputs.max_length),
      settings)
  assert kind == declarations.UNIFORM, (function, variable, kind)
  return interface.uniform(limit)


@gin.configurable(module="synthesizers")
class DotProduct(interface.SynthesizingFunction):
  """Vanilla dot-product attention logits, F_Q(X) F_K(X)^T (V).

  The 1/sqrt(d_kv) scale is mesh's: folded into the query initializer
  (default) or applied to the queries, so V here is exactly mesh's attention.
  """
  name = "dot_product"

  @classmethod
  def marker(cls) -> str:
    # No variable of its own: the layer's key projection (mesh's SelfAttention
    # has it too, but no SynthesizerAttention scope).
    return "k"

  def logits(self, inputs, scale=None):
    q = interface.float32(inputs.queries, scale)
    k = interface.float32(inputs.keys)
    return mtf.einsum([q, k], output_shape=inputs.logits_shape(
        [q, k], [inputs.key_dim]))


@gin.configurable(module="synthesizers")
class Random(interface.SynthesizingFunction):
  """Random Synthesizer (R), eq. 4: a learned N x N matrix per head.

  The default initializer draws R uniformly with the scale the original
  release's glorot initializer gives its [N, heads, N] variable, so attention
  starts close to uniform.
  """
  name = "random"

  def __init__(self, initializer_scale: float = _default(
      "random", "initializer_scale")):
    """Creates the function.

    Args:
      initializer_scale: multiplies the default uniform range.
    """
    self.initializer_scale = self.declared_setting("initializer_scale",
                                                   initializer_scale)

  def matrix(self, inputs: interface.SynthesisInputs) -> mtf.Tensor:
    """Returns the variable R: heads + [query positions, memory positions]."""
    n = inputs.max_length
    shape = mtf.Shape(inputs.heads_dims + [
        mtf.Dimension(interface.QUERY_POSITIONS, n),
        mtf.Dimension(interface.MEMORY_POSITIONS, n)])
    return mtf.get_variable(
        inputs.mesh, "R", shape,
        initializer=_uniform(inputs, self.name, "R", self.settings()),
        dtype=inputs.variable_dtype, trainable=self.trainable)

  def logits(self, inputs, scale=None):
    r = self.matrix(inputs)
    decoding = inputs.length_dim is None
    if not decoding:
      # [heads, N, N]: no batch dim, so scaling it is cheap.
      r = interface.float32(r, scale)
    logits = inputs.at_memory_positions(inputs.at_query_positions(r))
    if decoding:
      # One row of R per example: smaller than the table, so the row lookup
      # comes first and the scale applies to the row.
      logits = interface.float32(logits, scale)
    return logits


@gin.configurable(module="synthesizers")
class FixedRandom(Random):
  """Fixed Random Synthesizer (Fix): R drawn once and never trained.

  R is a non-trainable variable: no gradient, no optimizer slots.
  """
  name = "fixed_random"


@gin.configurable(module="synthesizers")
class FactorizedRandom(interface.SynthesizingFunction):
  """Factorized Random Synthesizer (FR), eq. 7: R1 R2^T per head.

  R1 and R2 are N x k. Both are truncated (or gathered) to the positions in
  use before the product, so the work is length * memory_length * k.
  """
  name = "factorized_random"

  def __init__(self, k: int = _default("factorized_random", "k")):
    """Creates the function.

    Args:
      k: the rank (the paper uses 8; 32 in Table 7).
    """
    self.k = self.declared_setting("k", k)

  def export_settings(self, max_length):
    del max_length
    return self.settings()

  def factors(self, inputs: interface.SynthesisInputs):
    """Returns the variables (R1, R2): heads + [positions, k]."""
    n = inputs.max_length
    rank_dim = mtf.Dimension("synth_rank", self.k)
    r1 = mtf.get_variable(
        inputs.mesh, "R1",
        mtf.Shape(inputs.heads_dims + [
            mtf.Dimension(interface.QUERY_POSITIONS, n), rank_dim]),
        initializer=_uniform(inputs, self.name, "R1", self.settings()),
        dtype=inputs.variable_dtype)
    r2 = mtf.get_variable(
        inputs.mesh, "R2",
        mtf.Shape(inputs.heads_dims + [
            mtf.Dimension(interface.MEMORY_POSITIONS, n), rank_dim]),
        initializer=_uniform(inputs, self.name, "R2", self.settings()),
        dtype=inputs.variable_dtype)
    return r1, r2

  def logits(self, inputs, scale=None):
    r1, r2 = self.factors(inputs)
    r1 = interface.float32(r1, scale)
    r1 = inputs.at_query_positions(r1)
    r2 = inputs.at_memory_positions(r2)
    return mtf.einsum([r1, interface.float32(r2)],
                      reduced_dims=[r1.shape.dims[-1]])


def _dense_hidden(inputs: interface.SynthesisInputs, hidden_size: Optional[int],
                  use_bias: bool) -> mtf.Tensor:
  """relu(W1 X_i + b1) per head: the first layer of F in eq. 2 and eq. 5."""
  hidden_dim = mtf.Dimension("synth_hidden",
                             hidden_size or inputs.key_dim.size)
  w1 = mtf.get_variable(
      inputs.mesh, "w1",
      mtf.Shape([inputs.model_dim] + inputs.heads_dims + [hidden_dim]),
      initializer=interface.fan_in_normal(inputs.model_dim.size),
      dtype=inputs.variable_dtype)
  h = mtf.einsum([inputs.x, w1], reduced_dims=[inputs.model_dim])
  if use_bias:
    h += mtf.get_variable(
        inputs.mesh, "b1", mtf.Shape(inputs.heads_dims + [hidden_dim]),
        initializer=tf.zeros_initializer(), dtype=inputs.variable_dtype)
  return mtf.relu(h)


def _dense_projection(inputs: interface.SynthesisInputs, hidden: mtf.Tensor,
                      out_dim: mtf.Dimension, name: str,
                      use_bias: bool) -> mtf.Tensor:
  """W h + b per head, from the hidden dim to `out_dim`."""
  hidden_dim = hidden.shape.dims[-1]
  w = mtf.get_variable(
      inputs.mesh, "w" + name,
      mtf.Shape(inputs.heads_dims + [hidden_dim, out_dim]),
      initializer=interface.fan_in_normal(hidden_dim.size),
      dtype=inputs.variable_dtype)
  y = mtf.einsum([hidden, w], reduced_dims=[hidden_dim])
  if use_bias:
    y += mtf.get_variable(
        inputs.mesh, "b" + name, mtf.Shape(inputs.heads_dims + [out_dim]),
        initializer=tf.zeros_initializer(), dtype=inputs.variable_dtype)
  return y


@gin.configurable(module="synthesizers")
class Dense(interface.SynthesizingFunction):
  """Dense Synthesizer (D), eq. 1-3: each token predicts its attention row.

  B_i = W2 relu(W1 X_i + b1) + b2 per head, W1: d_model -> hidden,
  W2: hidden -> N; column j of B is the logit for memory position j.
  """
  name = "dense"

  def __init__(self,
               hidden_size: Optional[int] = _default("dense", "hidden_size"),
               use_bias: bool = _default("dense", "use_bias"),
               share_query_projection: bool = _default(
                   "dense", "share_query_projection")):
    """Creates the function.

    Args:
      hidden_size: per-head width of the hidden layer (default: d_kv, so that
        W1 is d_model x d_model over all heads, as in Table 1).
      use_bias: add b1 and b2.
      share_query_projection: use the layer's query projection F_Q(X) as
        W1 X (the original release's `dense_*` modes); hidden_size and b1 do
        not apply then.
    """
    self.hidden_size = self.declared_setting("hidden_size", hidden_size)
    self.use_bias = self.declared_setting("use_bias", use_bias)
    self.share_query_projection = self.declared_setting(
        "share_query_projection", share_query_projection)

  def export_settings(self, max_length):
    del max_length
    return self.settings()

  def logits(self, inputs, scale=None):
    if self.share_query_projection:
      hidden = mtf.relu(inputs.queries)
    else:
      hidden = _dense_hidden(inputs, self.hidden_size, self.use_bias)
    # The first layer runs in the activation dtype (as mesh's query and key
    # projections); the W2 product, which makes the logits, in float32.
    # The scale goes on the smaller factor of that product: W2 in a full
    # pass, the one token's hidden layer when decoding.
    decoding = inputs.length_dim is None
    hidden = interface.float32(hidden, scale if decoding else None)
    hidden_dim = hidden.shape.dims[-1]
    positions_dim = mtf.Dimension(interface.MEMORY_POSITIONS, inputs.max_length)
    w2 = mtf.get_variable(
        inputs.mesh, "w2",
        mtf.Shape(inputs.heads_dims + [hidden_dim, positions_dim]),
        initializer=interface.fan_in_normal(hidden_dim.size),
        dtype=inputs.variable_dtype)
    # Only the columns of the memory positions in use are computed: W2 is
    # truncated (or gathered, for packed input) before the product.
    w2 = inputs.at_memory_positions(
        interface.float32(w2, None if decoding else scale))
    if inputs.length_dim is not None:
      # W2 carries no batch dim; broadcast it (it is small next to the
      # logits) so that the product is a matmul batched over batch and heads,
      # with no transpose of the [length, memory_length] logits or of their
      # gradient. Not when decoding, where reading W2 dominates.
      batch_dims = [d for d in inputs.batch_dims if d not in w2.shape.dims]
      w2 = mtf.broadcast(w2, mtf.Shape(batch_dims) + w2.shape)
    logits = mtf.einsum([hidden, w2], output_shape=inputs.logits_shape(
        [hidden, w2], [hidden_dim]))
    if self.use_bias:
      b2 = mtf.get_variable(
          inputs.mesh, "b2", mtf.Shape(inputs.heads_dims + [positions_dim]),
          initializer=tf.zeros_initializer(), dtype=inputs.variable_dtype)
      logits += inputs.at_memory_positions(interface.float32(b2, scale))
    return logits


def check_setting(owner: str, name: str, value, kind: str):
  """A layer's setting, checked as the PyTorch config checks it.

  Args:
    owner: the class, for the message.
    name: the setting.
    value: its value.
    kind: a kind of `synthesizing_functions` ("positive_int",
      "optional_positive_int" (None: the default), "bool" or "number").

  Returns:
    value.

  Raises:
    ValueError: naming the setting, the value and what would be valid.
  """
  return declarations.check(kind, value, "%s.%s" % (owner, name))


# FD's default split of max_length (its declaration's rule).
default_factors = declarations.default_factors


def _next_composite(n: int) -> int:
  """The smallest composite number greater than n."""
  m = n + 1
  while m < 4 or default_factors(m)[0] == 1:
    m += 1
  return m


@gin.configurable(module="synthesizers")
class FactorizedDense(interface.SynthesizingFunction):
  """Factorized Dense Synthesizer (FD), eq. 5-6.

  A = F_A(X_i) in R^a and B = F_B(X_i) in R^b with a * b = N, sharing the
  hidden layer relu(W1 X_i + b1) (Table 1: d^2 + d(a + b) parameters). The
  tiling functions compose so that every column gets its own pair:
  C_{i,j} = A_{i, j mod a} * B_{i, floor(j / a)}.
  """
  name = "factorized_dense"

  def __init__(self, a: Optional[int] = _default("factorized_dense", "a"),
               b: Optional[int] = _default("factorized_dense", "b"),
               hidden_size: Optional[int] = _default("factorized_dense",
                                                     "hidden_size"),
               use_bias: bool = _default("factorized_dense", "use_bias")):
    """Creates the function.

    Args:
      a: size of F_A's output; default: the largest divisor of N <= sqrt(N)
        (N must then be composite; see `factor_sizes`).
      b: size of F_B's output; default N / a.
      hidden_size: per-head hidden width (default d_kv).
      use_bias: add biases to the three projections.
    """
    self.a = self.declared_setting("a", a)
    self.b = self.declared_setting("b", b)
    self.hidden_size = self.declared_setting("hidden_size", hidden_size)
    self.use_bias = self.declared_setting("use_bias", use_bias)

  def factor_sizes(self, n: int) -> Tuple[int, int]:
    """Returns (a, b) for max_length n, checking a * b == n.

    Args:
      n: N, the layer's max_length.

    Returns:
      (a, b), both positive, with a * b == n.

    Raises:
      ValueError: if a * b != n, if a or b is not positive, or if neither is
        set and n has no split with a, b > 1 (n prime, or 1): FD would then
        be a Dense synthesizer, not a factorized one. Setting a = 1 or b = 1
        explicitly is allowed, with a warning.
    """
    for name, value in (("a", self.a), ("b", self.b)):
      if value is not None and value < 1:
        raise ValueError("FactorizedDense.%s must be positive, got %r." %
                         (name, value))
    a, b = self.a, self.b
    if a is None and b is None:
      a, b = default_factors(n)
      if a == 1:
        raise ValueError(
            "FactorizedDense cannot factorize max_length N=%d: %s, so the "
            "only split is a=1, b=%d and FD degenerates to Dense (one "
            "projection to all N columns, nothing factorized). Choose a "
            "composite SynthesizerAttention.max_length (e.g. %d), or set "
            "synthesizers.FactorizedDense.a / .b explicitly (a * b == N) to "
            "accept a=1 or b=1." % (
                n, "N is prime" if n > 1 else "N is 1", n,
                _next_composite(n)))
    elif a is None:
      a = n // b
    elif b is None:
      b = n // a
    if a * b != n:
      raise ValueError(
          "FactorizedDense needs a * b == max_length; got a=%d, b=%d, "
          "a * b=%d, max_length=%d." % (a, b, a * b, n))
    if a == 1 or b == 1:
      logging.warning(
          "FactorizedDense with a=%d, b=%d (max_length %d) is not "
          "factorized: one factor is a single column, so FD is a Dense "
          "synthesizer (times a per-token factor).", a, b, n)
    return a, b

  def export_settings(self, max_length):
    a, b = self.factor_sizes(max_length)
    return {"a": a, "b": b, "hidden_size": self.hidden_size,
            "use_bias": self.use_bias}

  def logits(self, inputs, scale=None):
    a, b = self.factor_sizes(inputs.max_length)
    a_dim, b_dim = mtf.Dimension("synth_a", a), mtf.Dimension("synth_b", b)
    hidden = _dense_hidden(inputs, self.hidden_size, self.use_bias)
    # The first layer and the projections to A and B run in the activation
    # dtype; A and B are cast to float32 before the scale and their product.
    factor_a = interface.float32(
        _dense_projection(inputs, hidden, a_dim, "a", self.use_bias), scale)
    factor_b = interface.float32(
        _dense_projection(inputs, hidden, b_dim, "b", self.use_bias))
    if inputs.memory_positions is None:
      return self._contiguous_columns(inputs, factor_a, factor_b)
    # Column j of C is A[j mod a] * B[floor(j / a)]: only the columns of the
    # memory positions in use are built (a gather by per-example positions),
    # never the full max_length row.
    columns = inputs.memory_positions
    # The factors are small: lay them out as the logits (batch, heads,
    # length) before the gathers append the memory dim.
    order = inputs.logits_shape([factor_a, columns], [a_dim])
    factor_a = mtf.transpose(
        factor_a, [d for d in order.dims if d in factor_a.shape] + [a_dim])
    factor_b = mtf.transpose(
        factor_b, [d for d in order.dims if d in factor_b.shape] + [b_dim])
    return mtf.multiply(
        positions_lib.gather_positions(factor_a, a_dim, columns % a,
                                       positions_last=True,
                                       batch_dims=inputs.batch_dims),
        positions_lib.gather_positions(factor_b, b_dim, columns // a,
                                       positions_last=True,
                                       batch_dims=inputs.batch_dims),
        output_shape=order)

  def _contiguous_columns(self, inputs: interface.SynthesisInputs,
                          factor_a: mtf.Tensor,
                          factor_b: mtf.Tensor) -> mtf.Tensor:
    """C for memory positions 0..memory_length-1, as an outer product.

    Columns j = q * a + r, r < a, are A[r] * B[q]: the outer product B A^T
    per token, [b, a] read row by row, is C's row. Only the rows of B that
    reach memory_length are used. Unlike two gathers and their product, this
    keeps no full-size tensor but C for the backward pass (see
    `_outer_product`).

    Args:
      inputs: an interface.SynthesisInputs without memory positions.
      factor_a: A (float32, times the scale): ... + [synth_a].
      factor_b: B (float32): ... + [synth_b].

    Returns:
      C: batch dims, heads dims, length, memory_length.
    """
    a_dim, b_dim = factor_a.shape.dims[-1], factor_b.shape.dims[-1]
    memory = inputs.memory_length_dim.size
    rows = -(-memory // a_dim.size)  # the rows of B in use
    if rows < b_dim.size:
      factor_b = mtf.slice(factor_b, 0, rows, b_dim.name)
      b_dim = factor_b.shape.dims[-1]
    order = inputs.logits_shape([factor_a, factor_b], [a_dim, b_dim])
    outer = products.outer_product(
        mtf.transpose(factor_b, order + [b_dim]),
        mtf.transpose(factor_a, order + [a_dim]))
    if rows * a_dim.size == memory:
      return mtf.reshape(outer, order + [inputs.memory_length_dim])
    columns_dim = mtf.Dimension("synth_columns", rows * a_dim.size)
    columns = mtf.slice(mtf.reshape(outer, order + [columns_dim]), 0, memory,
                        columns_dim.name)
    return mtf.replace_dimensions(
        columns, columns.shape.get_dim_by_name(columns_dim.name),
        inputs.memory_length_dim)
