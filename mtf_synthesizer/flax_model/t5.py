# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A Flax T5 whose self-attention is SynthesizerAttention: mesh's layouts.

An encoder-decoder (`EncoderDecoder`, mesh's Bitransformer) or a decoder
alone (`DecoderOnly`, mesh's Unitransformer language model), in T5X's
parameter names (see the package docstring for the tree):

  * pre-norm layers, RMS norm (mesh's epsilon 1e-6) before each sublayer,
    dropout on each sublayer's output before the residual sum, on the
    embeddings, inside the feed-forward layer, on the attention weights
    and after the final norm;
  * T5.1.0: ReLU feed-forward, the output layer the token embedding
    (logits of x * d_model^-1/2); T5.1.1: gated GELU (tanh approximation,
    mesh's), an untied `logits_dense`;
  * T5's relative position bias, added to every self-attention's logits:
    one table per stack shared by its layers (mesh's "bias_shared"), one
    per layer ("bias"), or none; the encoder-decoder attention has none;
  * the encoder masks padding (token 0) among its memory positions, the
    decoder is causal, the encoder-decoder attention masks the encoder's
    padding.

`T5Config` holds every size and choice, gin-configurable; `make_model`
builds the model from it.
"""

import dataclasses
import math
from typing import Any, Mapping, Optional, Tuple

import flax.linen as nn
import gin
import jax
from jax import lax
import jax.numpy as jnp

from mtf_synthesizer.flax_model import attention as attention_lib
from mtf_synthesizer.flax_model import functions as functions_lib

Array = jax.Array

RELATIVE_ATTENTION_TYPES = ("bias_shared", "bias", None)
# mesh's activation names; gelu is the tanh approximation.
ACTIVATIONS = {
    "relu": jax.nn.relu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=True),
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "linear": lambda x: x,
}


@gin.configurable(module="mtf_synthesizer.flax_model")
@dataclasses.dataclass(frozen=True)
class T5Config:
  """A model's sizes and choices (mesh's gin knobs, T5X's names).

  Attributes:
    vocab_size: the vocabulary.
    d_model: the embedding width.
    num_heads: attention heads.
    head_dim: d_kv.
    d_ff: the feed-forward width.
    num_encoder_layers: the encoder's layers.
    num_decoder_layers: the decoder's layers.
    activations: the feed-forward layer's: ("relu",) (T5.1.0), or two,
      gated: ("gelu", "linear") (T5.1.1).
    logits_via_embedding: the output layer is the token embedding (mesh's
      `shared_embedding_and_softmax_weights`), its input scaled by
      d_model^-1/2; else an untied `logits_dense`.
    dropout_rate: every dropout's rate (mesh's %dropout_rate).
    attention_dropout_rate: the attention weights' dropout; None: the
      dropout_rate.
    layer_norm_epsilon: the RMS norm's epsilon.
    relative_attention_type: "bias_shared" (one table per stack), "bias"
      (one per layer) or None.
    relative_attention_num_buckets: the relative bias's buckets.
    relative_attention_max_distance: distances from here share a bucket.
    variant: the self-attention of every stack: a row of
      `attentions.VARIANTS` by name ("vanilla" is the dot product).
    encoder_variant: the encoder's, where it differs from `variant`.
    decoder_variant: the decoder's, where it differs from `variant`.
    max_length: N, the positions of the synthesizing functions' tables.
    learned_mixture_weights: eq. 8's alpha for mixtures, else weight one.
    function_settings: function name -> settings other than the defaults.
    dtype: the activations' dtype ("float32", "bfloat16").
    param_dtype: the parameters' dtype.
  """
  vocab_size: int = 32128
  d_model: int = 512
  num_heads: int = 8
  head_dim: int = 64
  d_ff: int = 2048
  num_encoder_layers: int = 6
  num_decoder_layers: int = 6
  activations: Tuple[str, ...] = ("relu",)
  logits_via_embedding: bool = True
  dropout_rate: float = 0.1
  attention_dropout_rate: Optional[float] = None
  layer_norm_epsilon: float = 1e-6
  relative_attention_type: Optional[str] = "bias_shared"
  relative_attention_num_buckets: int = 32
  relative_attention_max_distance: int = 128
  variant: str = "vanilla"
  encoder_variant: Optional[str] = None
  decoder_variant: Optional[str] = None
  max_length: int = 512
  learned_mixture_weights: bool = True
  function_settings: Mapping[str, Mapping[str, Any]] = dataclasses.field(
      default_factory=dict)
  dtype: str = "float32"
  param_dtype: str = "float32"

  def __post_init__(self):
    for name in (self.variant, self.encoder_variant, self.decoder_variant):
      if name is not None:
        attention_lib.variant_functions(name)  # raises for an unknown one
    if self.relative_attention_type not in RELATIVE_ATTENTION_TYPES:
      raise ValueError("relative_attention_type must be one of %s, got %r." %
                       (RELATIVE_ATTENTION_TYPES, self.relative_attention_type))
    if not 1 <= len(self.activations) <= 2 or any(
        a not in ACTIVATIONS for a in self.activations):
      raise ValueError("activations must be one or two (gated) of %s, got "
                       "%r." % (tuple(ACTIVATIONS), self.activations))
    for name, settings in self.function_settings.items():
      functions_lib.function_settings(name, settings)

  def self_attention(self, stack: str) -> Tuple[str, ...]:
    """The functions of a stack's self-attention ("encoder", "decoder")."""
    own = self.encoder_variant if stack == "encoder" else self.decoder_variant
    return attention_lib.variant_functions(own or self.variant)


def _dtype(name: Any) -> Any:
  return jnp.dtype(name)


def _partitioned(init, axes):
  return nn.with_logical_partitioning(init, axes)


class RMSNorm(nn.Module):
  """mesh's layer norm: x rsqrt(mean(x^2) + epsilon) scale, in float32.

  Attributes:
    epsilon: added to the mean square.
    dtype: the output's dtype.
    param_dtype: the scale's.
  """
  epsilon: float = 1e-6
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: Array) -> Array:
    scale = self.param("scale", _partitioned(nn.initializers.ones,
                                             ("embed",)),
                       (x.shape[-1],), self.param_dtype)
    x = x.astype(jnp.float32)
    y = x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + self.epsilon)
    return (y * scale.astype(jnp.float32)).astype(self.dtype)


class Embed(nn.Module):
  """The token embedding [vocab, embed], N(0, 1) as mesh's.

  Attributes:
    num_embeddings: the vocabulary.
    features: the width.
    dtype: the output's dtype.
    param_dtype: the table's.
  """
  num_embeddings: int
  features: int
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def setup(self):
    self.embedding = self.param(
        "embedding", _partitioned(nn.initializers.normal(1.0),
                                  ("vocab", "embed")),
        (self.num_embeddings, self.features), self.param_dtype)

  def __call__(self, tokens: Array) -> Array:
    return jnp.take(self.embedding, tokens, axis=0).astype(self.dtype)

  def attend(self, x: Array) -> Array:
    """x [..., embed] times the table's transpose: [..., vocab]."""
    return jnp.einsum("...e,ve->...v", x.astype(self.dtype),
                      self.embedding.astype(self.dtype))


def relative_position_bucket(relative_position: Array, bidirectional: bool,
                             num_buckets: int = 32,
                             max_distance: int = 128) -> Array:
  """T5's (and mesh's) relative position buckets.

  Args:
    relative_position: memory position minus query position (int32).
    bidirectional: an encoder's (True) or a causal stack's.
    num_buckets: buckets (half per direction when bidirectional).
    max_distance: distances from here share the last bucket.

  Returns:
    int32 bucket ids like relative_position.
  """
  n = -relative_position
  ret = jnp.zeros_like(n)
  if bidirectional:
    num_buckets //= 2
    ret = ret + (n < 0).astype(n.dtype) * num_buckets
    n = jnp.abs(n)
  else:
    n = jnp.maximum(n, 0)
  max_exact = num_buckets // 2
  large = max_exact + (
      jnp.log(jnp.maximum(n, 1).astype(jnp.float32) / max_exact) /
      math.log(max_distance / max_exact) * (num_buckets - max_exact)
  ).astype(n.dtype)
  large = jnp.minimum(large, num_buckets - 1)
  return ret + jnp.where(n < max_exact, n, large)


class RelativePositionBias(nn.Module):
  """T5's relative position bias: `rel_embedding` [heads, buckets].

  Attributes:
    num_heads: h.
    num_buckets: buckets.
    max_distance: distances from here share a bucket.
    param_dtype: the table's dtype.
  """
  num_heads: int
  num_buckets: int = 32
  max_distance: int = 128
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, q_length: int, k_length: int,
               bidirectional: bool) -> Array:
    """The bias of queries 0..q_length-1 and memory 0..k_length-1.

    Args:
      q_length: queries.
      k_length: memory positions.
      bidirectional: an encoder's.

    Returns:
      float32 [1, heads, q_length, k_length].
    """
    limit = math.sqrt(6.0 / (self.num_heads + self.num_buckets))
    table = self.param(
        "rel_embedding", _partitioned(functions_lib.uniform(limit),
                                      ("heads", "relpos_buckets")),
        (self.num_heads, self.num_buckets), self.param_dtype)
    relative = (jnp.arange(k_length, dtype=jnp.int32)[None, :] -
                jnp.arange(q_length, dtype=jnp.int32)[:, None])
    buckets = relative_position_bucket(relative, bidirectional,
                                       self.num_buckets, self.max_distance)
    return jnp.take(table.astype(jnp.float32), buckets, axis=1)[None]


class MlpBlock(nn.Module):
  """The feed-forward layer: wo(act(wi x)), or gated wo(a0(wi_0 x) a1(wi_1 x)).

  Kernels truncated-normal (two deviations) with deviation fan_in^-1/2.

  Attributes:
    d_ff: the hidden width.
    activations: one, or two (gated).
    dropout_rate: on the hidden layer.
    dtype: the computation's dtype.
    param_dtype: the kernels'.
  """
  d_ff: int
  activations: Tuple[str, ...] = ("relu",)
  dropout_rate: float = 0.0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: Array, enable_dropout: bool = True) -> Array:
    d = x.shape[-1]
    leading = x.shape[:-1]
    # One [tokens, embed] matrix: each weight's gradient is then a single
    # 2-D matmul over the tokens (on the CPU, no [batch, length, ...]
    # transposes around it); the same sums, so the same values.
    x = x.astype(self.dtype).reshape(-1, d)
    hidden = None
    names = ["wi"] if len(self.activations) == 1 else [
        "wi_%d" % i for i in range(len(self.activations))]
    for name, act in zip(names, self.activations):
      kernel = _Kernel(((d, self.d_ff), ("embed", "mlp"), self.param_dtype,
                        self.dtype), name=name)()
      h = ACTIVATIONS[act](x @ kernel)
      hidden = h if hidden is None else hidden * h
    hidden = nn.Dropout(self.dropout_rate)(
        hidden, deterministic=not enable_dropout)
    wo = _Kernel(((self.d_ff, d), ("mlp", "embed"), self.param_dtype,
                  self.dtype), name="wo")()
    return (hidden @ wo).reshape(leading + (d,))


class _Kernel(nn.Module):
  """A module holding one `kernel`: (shape, axes, param_dtype, dtype)."""
  spec: Tuple[Any, ...]

  @nn.compact
  def __call__(self) -> Array:
    shape, axes, param_dtype, dtype = self.spec
    init = nn.initializers.truncated_normal(shape[0]**-0.5)
    return self.param("kernel", _partitioned(init, axes), tuple(shape),
                      param_dtype).astype(dtype)


def _attention(config: T5Config, functions: Tuple[str, ...],
               name: str) -> attention_lib.SynthesizerAttention:
  rate = config.attention_dropout_rate
  return attention_lib.SynthesizerAttention(
      num_heads=config.num_heads, head_dim=config.head_dim,
      functions=functions, max_length=config.max_length,
      learned_mixture_weights=config.learned_mixture_weights,
      function_settings=config.function_settings,
      dropout_rate=config.dropout_rate if rate is None else rate,
      dtype=_dtype(config.dtype), param_dtype=_dtype(config.param_dtype),
      name=name)


def _norm(config: T5Config, name: str) -> RMSNorm:
  return RMSNorm(config.layer_norm_epsilon, _dtype(config.dtype),
                 _dtype(config.param_dtype), name=name)


def _mlp(config: T5Config) -> MlpBlock:
  return MlpBlock(config.d_ff, tuple(config.activations), config.dropout_rate,
                  _dtype(config.dtype), _dtype(config.param_dtype),
                  name="mlp")


def _relpos(config: T5Config) -> RelativePositionBias:
  return RelativePositionBias(
      config.num_heads, config.relative_attention_num_buckets,
      config.relative_attention_max_distance, _dtype(config.param_dtype),
      name="relpos_bias")


class EncoderLayer(nn.Module):
  """Self-attention and feed-forward, each x + dropout(f(norm(x))).

  Attributes:
    config: the model's.
  """
  config: T5Config

  @nn.compact
  def __call__(self, x: Array, mask: Optional[Array], bias: Optional[Array],
               enable_dropout: bool = True) -> Array:
    config = self.config
    if config.relative_attention_type == "bias":
      bias = _relpos(config)(x.shape[1], x.shape[1], True)
    dropout = nn.Dropout(config.dropout_rate)
    y = _norm(config, "pre_attention_layer_norm")(x)
    y = _attention(config, config.self_attention("encoder"), "attention")(
        y, y, mask, bias, enable_dropout=enable_dropout)
    x = x + dropout(y, deterministic=not enable_dropout)
    y = _norm(config, "pre_mlp_layer_norm")(x)
    y = _mlp(config)(y, enable_dropout)
    return x + dropout(y, deterministic=not enable_dropout)


class DecoderLayer(nn.Module):
  """Causal self-attention, encoder-decoder attention (with an encoder),
  feed-forward, each x + dropout(f(norm(x))).

  Attributes:
    config: the model's.
    cross_attention: with an encoder-decoder attention.
  """
  config: T5Config
  cross_attention: bool = True

  @nn.compact
  def __call__(self, x: Array, encoded: Optional[Array],
               mask: Optional[Array], bias: Optional[Array],
               encoder_decoder_mask: Optional[Array],
               enable_dropout: bool = True, decode: bool = False,
               bias_length: Optional[int] = None,
               prefill: bool = False) -> Array:
    config = self.config
    if config.relative_attention_type == "bias":
      length = bias_length or x.shape[1]
      bias = _relpos(config)(length, length, False)
    dropout = nn.Dropout(config.dropout_rate)
    y = _norm(config, "pre_self_attention_layer_norm")(x)
    y = _attention(config, config.self_attention("decoder"),
                   "self_attention")(
                       y, y, mask, bias, enable_dropout=enable_dropout,
                       decode=decode, prefill=prefill)
    x = x + dropout(y, deterministic=not enable_dropout)
    if self.cross_attention:
      y = _norm(config, "pre_cross_attention_layer_norm")(x)
      y = _attention(config, ("dot_product",), "encoder_decoder_attention")(
          y, encoded, encoder_decoder_mask, None,
          enable_dropout=enable_dropout)
      x = x + dropout(y, deterministic=not enable_dropout)
    y = _norm(config, "pre_mlp_layer_norm")(x)
    y = _mlp(config)(y, enable_dropout)
    return x + dropout(y, deterministic=not enable_dropout)


def padding_mask(tokens: Array) -> Array:
  """[batch, 1, 1, length]: True at the memory positions of tokens (> 0)."""
  return (tokens > 0)[:, None, None, :]


def causal_mask(length: int) -> Array:
  """[1, 1, length, length]: True where memory j <= query i."""
  return jnp.tril(jnp.ones((length, length), bool))[None, None]


class Encoder(nn.Module):
  """The encoder stack: embedding, layers, final norm.

  Attributes:
    config: the model's.
    token_embedder: the shared token embedding.
  """
  config: T5Config
  token_embedder: nn.Module

  @nn.compact
  def __call__(self, tokens: Array, enable_dropout: bool = True) -> Array:
    config = self.config
    dropout = nn.Dropout(config.dropout_rate)
    x = dropout(self.token_embedder(tokens),
                deterministic=not enable_dropout)
    length = tokens.shape[1]
    bias = None
    if config.relative_attention_type == "bias_shared":
      bias = _relpos(config)(length, length, True)
    mask = padding_mask(tokens)
    for i in range(config.num_encoder_layers):
      x = EncoderLayer(config, name="layers_%d" % i)(x, mask, bias,
                                                    enable_dropout)
    x = _norm(config, "encoder_norm")(x)
    return dropout(x, deterministic=not enable_dropout)


class Decoder(nn.Module):
  """The decoder stack: embedding, layers, final norm, logits.

  Attributes:
    config: the model's.
    token_embedder: the shared token embedding, or None: its own
      (`token_embedder`, a decoder-only model's).
    cross_attention: layers with an encoder-decoder attention.
  """
  config: T5Config
  token_embedder: Optional[nn.Module] = None
  cross_attention: bool = True

  @nn.compact
  def __call__(self, encoded: Optional[Array], decoder_input_tokens: Array,
               encoder_decoder_mask: Optional[Array] = None,
               enable_dropout: bool = True, decode: bool = False,
               max_decode_length: Optional[int] = None,
               prefill: bool = False) -> Array:
    """Logits [batch, length, vocab] (float32).

    Args:
      encoded: the encoder's output, or None (a decoder-only model).
      decoder_input_tokens: [batch, length].
      encoder_decoder_mask: [batch, 1, 1, encoder length] or None.
      enable_dropout: apply dropout.
      decode: a decoding step (one token), or the cache's creation.
      max_decode_length: the cache's length, in decoding.
      prefill: fill the cache with these tokens (a prompt).

    Returns:
      The logits.
    """
    config = self.config
    embedder = self.token_embedder
    if embedder is None:
      embedder = Embed(config.vocab_size, config.d_model,
                       _dtype(config.dtype), _dtype(config.param_dtype),
                       name="token_embedder")
    dropout = nn.Dropout(config.dropout_rate)
    x = dropout(embedder(decoder_input_tokens),
                deterministic=not enable_dropout)
    length = decoder_input_tokens.shape[1]
    if decode and not prefill:
      # A step (or the cache's creation): the attention masks the cache's
      # unwritten positions and reads the bias at its row.
      bias_length = max_decode_length or length
      mask = None
    else:
      bias_length = length
      mask = causal_mask(length)
    bias = None
    if config.relative_attention_type == "bias_shared":
      bias = _relpos(config)(bias_length, bias_length, False)
    for i in range(config.num_decoder_layers):
      x = DecoderLayer(config, self.cross_attention, name="layers_%d" % i)(
          x, encoded, mask, bias, encoder_decoder_mask, enable_dropout,
          decode or prefill, bias_length, prefill)
    x = _norm(config, "decoder_norm")(x)
    x = dropout(x, deterministic=not enable_dropout)
    if config.logits_via_embedding:
      # mesh scales the tied output layer's input by d_model^-1/2.
      logits = embedder.attend(x * config.d_model**-0.5)
    else:
      kernel = _Kernel(((config.d_model, config.vocab_size),
                        ("embed", "vocab"), _dtype(config.param_dtype),
                        _dtype(config.dtype)), name="logits_dense")()
      logits = x @ kernel
    return logits.astype(jnp.float32)


class EncoderDecoder(nn.Module):
  """The encoder-decoder T5 (mesh's Bitransformer), one token embedding.

  Attributes:
    config: the model's.
  """
  config: T5Config

  def setup(self):
    config = self.config
    self.token_embedder = Embed(config.vocab_size, config.d_model,
                                _dtype(config.dtype),
                                _dtype(config.param_dtype))
    self.encoder = Encoder(config, self.token_embedder)
    self.decoder = Decoder(config, self.token_embedder, True)

  def encode(self, encoder_input_tokens: Array,
             enable_dropout: bool = True) -> Array:
    """The encoder's output [batch, length, embed]."""
    return self.encoder(encoder_input_tokens, enable_dropout)

  def decode(self, encoded: Array, encoder_input_tokens: Array,
             decoder_input_tokens: Array, enable_dropout: bool = True,
             decode: bool = False, max_decode_length: Optional[int] = None,
             prefill: bool = False) -> Array:
    """The decoder's logits [batch, length, vocab] from the encoder's output.

    Args:
      encoded: [batch, encoder length, embed].
      encoder_input_tokens: [batch, encoder length] (their padding).
      decoder_input_tokens: [batch, length].
      enable_dropout: apply dropout.
      decode: a decoding step, or the cache's creation.
      max_decode_length: the cache's length, in decoding.
      prefill: fill the cache with a prompt.

    Returns:
      The logits.
    """
    return self.decoder(encoded, decoder_input_tokens,
                        padding_mask(encoder_input_tokens), enable_dropout,
                        decode, max_decode_length, prefill)

  def __call__(self, encoder_input_tokens: Array,
               decoder_input_tokens: Array, *, enable_dropout: bool = True,
               decode: bool = False,
               max_decode_length: Optional[int] = None) -> Array:
    """Teacher-forced logits [batch, decoder length, vocab].

    Args:
      encoder_input_tokens: [batch, encoder length], 0 is padding.
      decoder_input_tokens: [batch, length]: the targets shifted right.
      enable_dropout: apply dropout (needs the "dropout" rng).
      decode: create the cache (with the decode length's inputs).
      max_decode_length: the cache's length, in decoding.

    Returns:
      The logits.
    """
    encoded = self.encode(encoder_input_tokens, enable_dropout)
    return self.decode(encoded, encoder_input_tokens, decoder_input_tokens,
                       enable_dropout, decode, max_decode_length)


class DecoderOnly(nn.Module):
  """A decoder alone, a causal language model (mesh's Unitransformer).

  Attributes:
    config: the model's (its decoder's sizes; num_decoder_layers layers).
  """
  config: T5Config

  def setup(self):
    self.decoder = Decoder(self.config, None, False)

  def __call__(self, decoder_input_tokens: Array, *,
               enable_dropout: bool = True, decode: bool = False,
               max_decode_length: Optional[int] = None,
               prefill: bool = False) -> Array:
    """Logits [batch, length, vocab].

    Args:
      decoder_input_tokens: [batch, length]: the targets shifted right.
      enable_dropout: apply dropout.
      decode: a decoding step, or the cache's creation.
      max_decode_length: the cache's length, in decoding.
      prefill: fill the cache with a prompt.

    Returns:
      The logits.
    """
    return self.decoder(None, decoder_input_tokens, None, enable_dropout,
                        decode, max_decode_length, prefill)


@gin.configurable(module="mtf_synthesizer.flax_model")
def make_model(decoder_only: bool = False,
               config: Optional[T5Config] = None) -> nn.Module:
  """The model of a configuration (by default the gin-bound T5Config).

  Args:
    decoder_only: a DecoderOnly language model, else an EncoderDecoder.
    config: the configuration; None: `T5Config()` with gin's bindings.

  Returns:
    The linen module (unbound).
  """
  config = T5Config() if config is None else config
  return DecoderOnly(config) if decoder_only else EncoderDecoder(config)
