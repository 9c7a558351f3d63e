# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""SynthesizerAttention: attention whose logits are synthesized (eq. 3, 8).

    Y = sum_h softmax(sum_f alpha_f,h S_f,h(X) + bias, masked) G_h(X) W_o,h

with alpha = softmax over functions of `mixture/alpha_logits` [functions,
heads] (eq. 8; all ones without learned mixture weights, and for one
function). The call is flaxformer's `MultiHeadDotProductAttention`'s, so
that the module replaces it in flaxformer's T5 layers; with the dot product
alone it is mesh's `SelfAttention` (and its `EncDecAttention`).

Variables (mesh's local names under the layer): `value/kernel` [embed,
heads, kv] and `out/kernel` [heads, kv, embed] always; `query/kernel` and
`key/kernel` where a function reads them (V; D sharing the query
projection: the query only); each function's own under its name
(`functions.py`); `mixture/alpha_logits` for a learned mixture.

Decoding (`decode=True`): the first call creates the cache, batch first:
`cached_value` [batch, L, heads, kv] (and `cached_key` with V) and
`cache_index`, a scalar; each later call takes one token at position
`cache_index`, whose R and FR rows, D's and FD's columns of the memory
positions 0..L-1 and the cached keys and values it reads, masked to the
positions written.
"""

import dataclasses
from typing import Any, Mapping, Optional, Sequence, Tuple

import flax.linen as nn
import jax
from jax import lax
import jax.numpy as jnp

from mtf_synthesizer import attentions
from mtf_synthesizer.flax_model import functions as functions_lib

Array = jax.Array


def variant_functions(variant: str) -> Tuple[str, ...]:
  """A variant's synthesizing functions, from `attentions.VARIANTS`.

  Args:
    variant: a variant's name or label, e.g. "random_vanilla" or "R+V".

  Returns:
    Its functions, in the mixture's order.

  Raises:
    ValueError: an unknown variant, naming the valid ones.
  """
  return attentions.get(variant, attentions.Kind.SYNTHESIZER).components


class DenseGeneral(nn.Module):
  """x times one kernel, contracting x's last `in_dims` dims (no bias).

  Attributes:
    features: the output dims.
    axes: the kernel's logical axis names.
    stddev: the kernel's initializer N(0, stddev^2) (mesh's).
    in_dims: the input dims contracted.
    dtype: the computation's dtype.
    param_dtype: the kernel's.
  """
  features: Tuple[int, ...]
  axes: Tuple[str, ...]
  stddev: float
  in_dims: int = 1
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: Array) -> Array:
    shape = x.shape[-self.in_dims:] + tuple(self.features)
    kernel = self.param(
        "kernel", nn.with_logical_partitioning(
            nn.initializers.normal(self.stddev), self.axes), shape,
        self.param_dtype)
    axes = tuple(range(x.ndim - self.in_dims, x.ndim))
    return lax.dot_general(x.astype(self.dtype), kernel.astype(self.dtype),
                           ((axes, tuple(range(self.in_dims))), ((), ())))


class Mixture(nn.Module):
  """eq. 8's learned weights: alpha = softmax over functions of the logits.

  Attributes:
    num_functions: the functions mixed.
    num_heads: h.
    param_dtype: the logits' dtype.
  """
  num_functions: int
  num_heads: int
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self) -> Array:
    logits = self.param(
        "alpha_logits", nn.with_logical_partitioning(
            nn.initializers.zeros, (None, "heads")),
        (self.num_functions, self.num_heads), self.param_dtype)
    return jax.nn.softmax(logits.astype(jnp.float32), axis=0)


def _row(x: Optional[Array], index: Any) -> Optional[Array]:
  """The query row `index` of a full [.., L, L] mask or bias in a step."""
  if x is None or x.shape[-2] == 1:
    return x
  return lax.dynamic_slice_in_dim(x, index, 1, axis=-2)


def _concrete_int(x: Any) -> Optional[int]:
  """x as an int where it is known outside compilation, else None."""
  try:
    return int(x)
  except (jax.errors.ConcretizationTypeError, TypeError):
    return None


class SynthesizerAttention(nn.Module):
  """Multi-head attention with synthesized logits (Tay et al., eq. 3 and 8).

  Attributes:
    num_heads: h.
    head_dim: d_kv, the width of each head's values (and queries, keys).
    variant: a row of `attentions.VARIANTS` by name or label (e.g.
      "random_vanilla"), whose functions the layer composes; or None.
    functions: the synthesizing functions by name, where `variant` is None
      (default: the dot product alone, mesh's SelfAttention and
      EncDecAttention).
    max_length: N, the positions the functions' tables hold; sequences
      may be shorter (the tables are sliced), not longer.
    learned_mixture_weights: several functions are mixed with learned
      weights alpha (eq. 8), else added with weight one.
    function_settings: function name -> settings that differ from the
      defaults (`functions.function_settings`), e.g. {"dense":
      {"hidden_size": 128}}.
    dropout_rate: dropout on the attention weights (mesh's SelfAttention
      `dropout_rate`), a mask per example.
    dtype: the dtype of the projections (the logits are float32).
    param_dtype: the variables' dtype.
  """
  num_heads: int
  head_dim: int
  variant: Optional[str] = None
  functions: Optional[Sequence[str]] = None
  max_length: int = 512
  learned_mixture_weights: bool = True
  function_settings: Mapping[str, Mapping[str, Any]] = dataclasses.field(
      default_factory=dict)
  dropout_rate: float = 0.0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @property
  def function_names(self) -> Tuple[str, ...]:
    """The functions composed, in the mixture's order."""
    if self.variant is not None:
      if self.functions is not None:
        raise ValueError("Give SynthesizerAttention a variant or functions, "
                         "not both (got variant=%r, functions=%r)." % (
                             self.variant, self.functions))
      return variant_functions(self.variant)
    names = tuple(self.functions or ("dot_product",))
    for name in names:
      functions_lib.function_settings(name)  # raises for an unknown name
    return names

  def _settings(self, name: str) -> Mapping[str, Any]:
    return functions_lib.function_settings(
        name, self.function_settings.get(name))

  @nn.compact
  def __call__(self, inputs_q: Array, inputs_kv: Array,
               mask: Optional[Array] = None, bias: Optional[Array] = None,
               *, precomputed_qkv: Optional[Array] = None,
               decode: bool = False, enable_dropout: bool = True,
               prefill: bool = False,
               prefill_lengths: Optional[Array] = None) -> Array:
    """Attends: flaxformer's MultiHeadDotProductAttention call.

    Args:
      inputs_q: [batch, q_length, embed].
      inputs_kv: [batch, kv_length, embed]: `inputs_q` itself for a
        self-attention (any function), the encoder output for an
        encoder-decoder attention (the dot product alone).
      mask: [batch, heads or 1, q_length, kv_length], 1 where a query may
        attend to a memory position; None: all. In a decoding step the
        cache's positions written so far are the mask too, and a full
        [.., L, L] mask is read at the step's row.
      bias: added to the logits before the mask (T5's relative position
        bias), [batch or 1, heads or 1, q_length, kv_length] (in a step,
        one row, or the full [.., L, L], read at the step's row).
      precomputed_qkv: not supported (the synthesizing functions read the
        inputs themselves).
      decode: incremental decoding with the cache (self-attention).
      enable_dropout: apply dropout (needs the "dropout" rng).
      prefill: fill the cache with a prompt's keys and values at once.
      prefill_lengths: not supported: the prompt fills every position of
        inputs_q (one cache index for the batch).

    Returns:
      [batch, q_length, embed].

    Raises:
      ValueError: a sequence longer than `max_length` for a function with
        tables, a decoding step past the cache's length, or a
        synthesizing function in an encoder-decoder attention.
      NotImplementedError: precomputed_qkv or prefill_lengths.
    """
    if precomputed_qkv is not None:
      raise NotImplementedError(
          "SynthesizerAttention does not take precomputed_qkv: its "
          "synthesizing functions read the inputs; pass inputs_q and "
          "inputs_kv.")
    if prefill_lengths is not None:
      raise NotImplementedError(
          "SynthesizerAttention's cache has one index for the batch: "
          "prefill_lengths (a length per example) is not supported; pad "
          "the prompts to one length and prefill them whole.")
    names = self.function_names
    settings = {n: self._settings(n) for n in names}
    synthesized = [n for n in names if functions_lib.reads_max_length(n)]
    embed = inputs_q.shape[-1]
    if synthesized and inputs_q.shape[1] != inputs_kv.shape[1]:
      raise ValueError(
          "synthesizing functions %s attend within one sequence "
          "(self-attention); got %d queries and %d memory positions. An "
          "encoder-decoder attention takes the dot product alone." % (
              synthesized, inputs_q.shape[1], inputs_kv.shape[1]))
    h, d = self.num_heads, self.head_dim
    reads_queries = any(functions_lib.needs_queries(n, settings[n])
                        for n in names)
    needs_keys = any(functions_lib.declaration(n).needs_keys for n in names)
    projection = dict(features=(h, d), axes=("embed", "heads", "kv"),
                      dtype=self.dtype, param_dtype=self.param_dtype)
    queries = None
    if reads_queries:
      # mesh folds the 1/sqrt(d_kv) query scale into the initializer.
      queries = DenseGeneral(stddev=(embed * d)**-0.5, name="query",
                             **projection)(inputs_q)
    keys = None
    if needs_keys:
      keys = DenseGeneral(stddev=embed**-0.5, name="key",
                          **projection)(inputs_kv)
    values = DenseGeneral(stddev=embed**-0.5, name="value",
                          **projection)(inputs_kv)

    start = 0
    memory_length = inputs_kv.shape[1]
    if decode or prefill:
      keys, values, start, mask, bias, memory_length = self._use_cache(
          keys, values, mask, bias, inputs_q.shape[1], prefill)
    if synthesized and memory_length > self.max_length:
      raise ValueError(
          "SynthesizerAttention got a sequence of length %d but its "
          "max_length is %d (the positions of the tables of %s); valid: "
          "lengths up to %d. Raise max_length or shorten the sequences." % (
              memory_length, self.max_length, synthesized, self.max_length))

    inputs = functions_lib.SynthesisInputs(
        x=inputs_q, start=start, memory_length=memory_length,
        queries=queries, keys=keys)
    alpha = None
    if len(names) > 1 and self.learned_mixture_weights:
      alpha = Mixture(len(names), h, self.param_dtype, name="mixture")()
    logits = None
    for i, name in enumerate(names):
      module = functions_lib.MODULES[name]
      if name == "dot_product":
        term = module(name=None)(inputs)
      else:
        term = module(num_heads=h, head_dim=d, max_length=self.max_length,
                      settings=settings[name], dtype=self.dtype,
                      param_dtype=self.param_dtype, name=name)(inputs)
      if alpha is not None:
        term = term * alpha[i][None, :, None, None]
      logits = term if logits is None else logits + term
    if bias is not None:
      logits = logits + bias.astype(jnp.float32)
    if mask is not None:
      # Selected, not added: a masked logit is exactly the minimum.
      logits = jnp.where(mask > 0, logits, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(logits, axis=-1)
    batch = inputs_q.shape[0]
    if enable_dropout and self.dropout_rate > 0.0:
      # A mask per example, also where the weights are shared (R, FR).
      weights = jnp.broadcast_to(weights, (batch,) + weights.shape[1:])
      weights = nn.Dropout(self.dropout_rate)(weights, deterministic=False)
    out = jnp.einsum("bhqs,bshd->bqhd", weights.astype(values.dtype), values)
    return DenseGeneral(features=(embed,), axes=("heads", "kv", "embed"),
                        stddev=(h * d)**-0.5, in_dims=2, dtype=self.dtype,
                        param_dtype=self.param_dtype, name="out")(out)

  def _use_cache(self, keys, values, mask, bias, length, prefill):
    """Reads and writes the cache: (keys, values, start, mask, bias, L).

    The first call (the cache's creation, from inputs of the whole decode
    length L) attends as a plain call; a prefill writes positions
    0..length-1; a step writes its position `cache_index`.
    """
    initialized = self.has_variable("cache", "cached_value")
    batch, total = values.shape[0], values.shape[1]
    shape = (batch, total) + values.shape[2:]
    cached_value = self.variable("cache", "cached_value", jnp.zeros, shape,
                                 values.dtype)
    cached_key = None
    if keys is not None:
      cached_key = self.variable("cache", "cached_key", jnp.zeros, shape,
                                 keys.dtype)
    index = self.variable("cache", "cache_index",
                          lambda: jnp.array(0, jnp.int32))
    if not initialized:
      return keys, values, 0, mask, bias, total
    cache_length = cached_value.value.shape[1]
    if prefill:
      if length > cache_length:
        raise ValueError("a prompt of %d positions is longer than the "
                         "cache's %d." % (length, cache_length))
      cached_value.value = lax.dynamic_update_slice_in_dim(
          cached_value.value, values.astype(cached_value.value.dtype), 0, 1)
      if cached_key is not None:
        cached_key.value = lax.dynamic_update_slice_in_dim(
            cached_key.value, keys.astype(cached_key.value.dtype), 0, 1)
      index.value = jnp.array(length, jnp.int32)
      return keys, values, 0, mask, bias, length
    if length != 1:
      raise ValueError("a decoding step takes one token, got %d (prefill "
                       "a prompt with prefill=True)." % length)
    cur = index.value
    known = _concrete_int(cur)
    if known is not None and known >= cache_length:
      raise ValueError(
          "decoding step at position %d past the cache's length %d; valid "
          "positions: 0..%d (create the cache with a longer decode "
          "length)." % (known, cache_length, cache_length - 1))
    cached_value.value = lax.dynamic_update_slice_in_dim(
        cached_value.value, values.astype(cached_value.value.dtype), cur, 1)
    if cached_key is not None:
      cached_key.value = lax.dynamic_update_slice_in_dim(
          cached_key.value, keys.astype(cached_key.value.dtype), cur, 1)
      keys = cached_key.value
    values = cached_value.value
    index.value = cur + 1
    written = (jnp.arange(cache_length) <= cur)[None, None, None, :]
    mask = _row(mask, cur)
    mask = written if mask is None else jnp.logical_and(mask > 0, written)
    return keys, values, cur, mask, _row(bias, cur), cache_length

