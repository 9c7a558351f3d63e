# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Greedy decoding with the attention cache, for both T5 models.

The cache is created by one call with `decode=True` on inputs of the whole
decode length L (`init_cache`); each step then feeds one token
(`decode_step`), and `greedy_decode` runs L steps in one `lax.scan`.
Decoder inputs start with token 0 (mesh's and T5's start of the targets).
"""

from typing import Any, Optional, Tuple

import flax.linen as nn
import jax
from jax import lax
import jax.numpy as jnp

from mtf_synthesizer.flax_model import t5

Array = jax.Array


def _is_encoder_decoder(model: nn.Module) -> bool:
  return isinstance(model, t5.EncoderDecoder)


def _decoder_call(model: nn.Module, params: Any, cache: Optional[Any],
                  tokens: Array, encoded: Optional[Array],
                  encoder_input_tokens: Optional[Array],
                  max_decode_length: int) -> Tuple[Array, Any]:
  variables = {"params": params}
  if cache is not None:
    variables["cache"] = cache
  kwargs = dict(enable_dropout=False, decode=True,
                max_decode_length=max_decode_length)
  if _is_encoder_decoder(model):
    logits, state = model.apply(variables, encoded, encoder_input_tokens,
                                tokens, mutable=["cache"],
                                method=t5.EncoderDecoder.decode, **kwargs)
  else:
    logits, state = model.apply(variables, tokens, mutable=["cache"],
                                **kwargs)
  return logits, state["cache"]


def init_cache(model: nn.Module, params: Any, batch_size: int,
               max_decode_length: int, encoded: Optional[Array] = None,
               encoder_input_tokens: Optional[Array] = None) -> Any:
  """The empty cache of a decode of `max_decode_length` steps.

  Args:
    model: an EncoderDecoder or a DecoderOnly.
    params: its parameters.
    batch_size: the examples.
    max_decode_length: L, the cache's positions.
    encoded: the encoder's output (an encoder-decoder's).
    encoder_input_tokens: the encoder's tokens (an encoder-decoder's).

  Returns:
    The "cache" collection: every entry batch first, `cache_index` 0.
  """
  tokens = jnp.zeros((batch_size, max_decode_length), jnp.int32)
  _, cache = _decoder_call(model, params, None, tokens, encoded,
                           encoder_input_tokens, max_decode_length)
  return cache


def decode_step(model: nn.Module, params: Any, cache: Any, tokens: Array,
                max_decode_length: int, encoded: Optional[Array] = None,
                encoder_input_tokens: Optional[Array] = None
                ) -> Tuple[Array, Any]:
  """One step: the logits of one token per example, and the new cache.

  Args:
    model: an EncoderDecoder or a DecoderOnly.
    params: its parameters.
    cache: the cache (from `init_cache` or the last step).
    tokens: [batch, 1], the step's input tokens.
    max_decode_length: the cache's length.
    encoded: the encoder's output (an encoder-decoder's).
    encoder_input_tokens: the encoder's tokens (an encoder-decoder's).

  Returns:
    (logits [batch, 1, vocab], the cache).

  Raises:
    ValueError: a step past the cache's length (outside compilation).
  """
  return _decoder_call(model, params, cache, tokens, encoded,
                       encoder_input_tokens, max_decode_length)


def greedy_decode(model: nn.Module, params: Any, max_decode_length: int,
                  encoder_input_tokens: Optional[Array] = None,
                  batch_size: Optional[int] = None,
                  forced_tokens: Optional[Array] = None
                  ) -> Tuple[Array, Array]:
  """Greedy decoding: each step's argmax is the next step's input.

  Args:
    model: an EncoderDecoder or a DecoderOnly.
    params: its parameters.
    max_decode_length: the steps (the cache's length); at most the
      synthesizing functions' max_length.
    encoder_input_tokens: [batch, length] (an encoder-decoder's).
    batch_size: the examples (a decoder-only model's).
    forced_tokens: [batch, P]: a prompt, 0-padded: the output of step t < P
      is forced_tokens[:, t] instead of the argmax where it is not 0 (mesh's
      partial sequences); None: none.

  Returns:
    (tokens [batch, L], the logits of each step [batch, L, vocab]).
  """
  encoded = None
  if _is_encoder_decoder(model):
    if encoder_input_tokens is None:
      raise ValueError("an encoder-decoder decodes encoder_input_tokens; "
                       "got None.")
    batch_size = encoder_input_tokens.shape[0]
    encoded = model.apply({"params": params}, encoder_input_tokens,
                          enable_dropout=False,
                          method=t5.EncoderDecoder.encode)
  elif batch_size is None:
    batch_size = 1 if forced_tokens is None else forced_tokens.shape[0]
  cache = init_cache(model, params, batch_size, max_decode_length, encoded,
                     encoder_input_tokens)
  forced = forced_tokens if forced_tokens is not None else jnp.zeros(
      (batch_size, 0), jnp.int32)
  num_forced = forced.shape[1]
  if num_forced:
    forced = jnp.pad(forced, ((0, 0), (0, max_decode_length - num_forced)))

  def step(carry, t):
    cache, token = carry
    logits, cache = decode_step(model, params, cache, token[:, None],
                                max_decode_length, encoded,
                                encoder_input_tokens)
    logits = logits[:, 0]
    chosen = jnp.argmax(logits, axis=-1).astype(jnp.int32)
    if num_forced:
      given = forced[:, jnp.minimum(t, max_decode_length - 1)]
      chosen = jnp.where((t < num_forced) & (given != 0), given, chosen)
    return (cache, chosen), (chosen, logits)

  start = jnp.zeros((batch_size,), jnp.int32)
  _, (tokens, logits) = lax.scan(step, (cache, start),
                                 jnp.arange(max_decode_length))
  return tokens.T, jnp.transpose(logits, (1, 0, 2))
