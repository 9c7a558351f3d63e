# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Greedy decoding and beam search with the attention cache, both T5 models.

The cache is created by one call with `decode=True` on inputs of the whole
decode length L (`init_cache`); each step then feeds one token
(`decode_step`), and `greedy_decode` runs L steps in one `lax.scan`.
`beam_search` is mesh's beam search with its length penalty in one
`lax.while_loop`, on the cache tiled beam-wise (`tile_cache`: batch * beam
rows) whose rows follow their beams each step. Decoder inputs start with
token 0 (mesh's and T5's start of the targets).
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


def _encoded(model: nn.Module, params: Any,
             encoder_input_tokens: Optional[Array]) -> Optional[Array]:
  """An encoder-decoder's encoder output (None for a decoder-only model)."""
  if not _is_encoder_decoder(model):
    return None
  if encoder_input_tokens is None:
    raise ValueError("an encoder-decoder decodes encoder_input_tokens; "
                     "got None.")
  return model.apply({"params": params}, encoder_input_tokens,
                     enable_dropout=False, method=t5.EncoderDecoder.encode)


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
  encoded = _encoded(model, params, encoder_input_tokens)
  if encoded is not None:
    batch_size = encoder_input_tokens.shape[0]
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


# mesh's beam search's "infinity" (beam_search.INF): the score of an empty
# place, and what a candidate that cannot be taken loses.
INF = 1e7
# Cache entries that are not per example (T5X's cache_map leaves them).
_SHARED_CACHE_ENTRIES = ("cache_index", "cached_bias",
                         "position_embedder_index")


def length_penalty(length: Any, alpha: float) -> Array:
  """mesh's (GNMT's) length penalty ((5 + length) / 6) ** alpha.

  Args:
    length: the tokens of the sequence, its EOS included.
    alpha: the exponent (0: no penalty).

  Returns:
    float32, the divisor of a sequence's log-probability.
  """
  return ((5.0 + jnp.asarray(length, jnp.float32)) / 6.0)**alpha


def _map_cache(fn, cache: Any) -> Any:
  """fn applied to every per-example entry of the cache (batch first)."""
  def apply(path, x):
    name = getattr(path[-1], "key", None)
    return x if name in _SHARED_CACHE_ENTRIES else fn(x)
  return jax.tree_util.tree_map_with_path(apply, cache)


def tile_cache(cache: Any, beam_size: int) -> Any:
  """Each example's cache repeated beam_size times (batch * beam first).

  Args:
    cache: a cache batch first (from `init_cache`).
    beam_size: the copies of each example.

  Returns:
    The cache of batch * beam_size rows, example b's beams at rows
    b * beam_size .. (b + 1) * beam_size - 1; `cache_index` as it was.
  """
  return _map_cache(lambda x: jnp.repeat(x, beam_size, axis=0), cache)


def _gather_beams(x: Array, beams: Array) -> Array:
  """x [batch, beam, ...] at beams [batch, k]: [batch, k, ...]."""
  return jnp.take_along_axis(
      x, beams.reshape(beams.shape + (1,) * (x.ndim - 2)), axis=1)


def beam_search(model: nn.Module, params: Any, max_decode_length: int, *,
                beam_size: int, alpha: float = 0.6,
                encoder_input_tokens: Optional[Array] = None,
                decoder_prompt: Optional[Array] = None,
                batch_size: Optional[int] = None,
                eos_id: Optional[int] = 1) -> Tuple[Array, Array]:
  """Beam search with the cache, mesh's `beam_search.beam_search`.

  Step t (0-based) extends each of the beam_size alive sequences by every
  token; a candidate's score is its log-probability divided by
  `length_penalty(t + 1, alpha)`. Of the 2 * beam_size best candidates,
  those ending in `eos_id` compete with the finished sequences kept so far
  for the beam_size finished places (by score), the others for the
  beam_size alive places (by score, keeping their log-probabilities). The
  first step's input is token 0; the cache's rows follow their beams. The
  search stops after max_decode_length steps, or once, for every example,
  the worst finished score beats the best alive log-probability divided by
  the longest length's penalty (mesh's stop_early). mesh's decode runs
  greedy decoding at beam_size 1; here it is this search with one beam.

  Args:
    model: an EncoderDecoder or a DecoderOnly.
    params: its parameters.
    max_decode_length: L, the steps at most and the cache's length; at most
      the synthesizing functions' max_length.
    beam_size: the beams, k.
    alpha: the length penalty's exponent (mesh's decode: 0.6).
    encoder_input_tokens: [batch, length] (an encoder-decoder's).
    decoder_prompt: [batch, P], 0-padded: the token of step t < P is
      decoder_prompt[:, t] where it is not 0, scored by the model as any
      other (greedy_decode's forced_tokens); None: none.
    batch_size: the examples of a decoder-only model without a prompt
      (default 1).
    eos_id: the end of a sequence; None: no end, every sequence runs L
      steps (then one beam is greedy decoding).

  Returns:
    (tokens [batch, k, L], scores [batch, k]), best first: the finished
    sequences (their EOS, then 0s) and their length-penalized scores; a
    place no finished sequence filled has tokens 0 and score -1e7 (mesh's
    -INF). An example with no finished sequence at all has its alive
    sequences and their log-probabilities, without the penalty (mesh's);
    there a score below -INF / 2 is a filler.
  """
  if beam_size < 1:
    raise ValueError("beam_size must be >= 1, got %d." % beam_size)
  encoded = _encoded(model, params, encoder_input_tokens)
  if encoded is not None:
    batch_size = encoder_input_tokens.shape[0]
  elif decoder_prompt is not None:
    batch_size = decoder_prompt.shape[0]
  elif batch_size is None:
    batch_size = 1
  k, length = beam_size, max_decode_length
  cache = tile_cache(init_cache(model, params, batch_size, length, encoded,
                                encoder_input_tokens), k)
  if encoded is not None:
    encoded = jnp.repeat(encoded, k, axis=0)
    encoder_input_tokens = jnp.repeat(encoder_input_tokens, k, axis=0)
  prompt = decoder_prompt if decoder_prompt is not None else jnp.zeros(
      (batch_size, 0), jnp.int32)
  num_forced = prompt.shape[1]
  if num_forced:
    prompt = jnp.pad(prompt, ((0, 0), (0, max(length - num_forced, 0))))
  max_penalty = length_penalty(length, alpha)
  positions = jnp.arange(length)

  def top(scores, n):
    return lax.top_k(scores, n)[1]

  def step(state):
    (t, alive_seq, alive_log_probs, finished_seq, finished_scores,
     finished_flags, cache) = state
    token = jnp.where(
        t == 0, 0,
        lax.dynamic_index_in_dim(alive_seq, jnp.maximum(t - 1, 0), axis=2,
                                 keepdims=False))
    logits, cache = decode_step(model, params, cache,
                                token.reshape(batch_size * k, 1), length,
                                encoded, encoder_input_tokens)
    log_probs = jax.nn.log_softmax(logits.reshape(batch_size, k, -1))
    vocab = log_probs.shape[-1]
    if num_forced:
      given = prompt[:, jnp.minimum(t, length - 1)]
      forced = (t < num_forced) & (given != 0)
      other = jnp.arange(vocab)[None, :] != given[:, None]
      log_probs = log_probs - INF * (forced[:, None] & other)[:, None, :]
    log_probs = (log_probs + alive_log_probs[:, :, None]).reshape(
        batch_size, k * vocab)
    penalty = length_penalty(t + 1, alpha)
    # The 2k best candidates: at most k end (one EOS per beam), so at
    # least k do not.
    candidates = top(log_probs / penalty, 2 * k)
    cand_log_probs = jnp.take_along_axis(log_probs, candidates, axis=1)
    cand_scores = cand_log_probs / penalty
    cand_beams = candidates // vocab
    cand_tokens = (candidates % vocab).astype(jnp.int32)
    cand_seq = jnp.where(positions == t, cand_tokens[:, :, None],
                         _gather_beams(alive_seq, cand_beams))
    if eos_id is None:
      cand_ended = jnp.zeros_like(cand_tokens, bool)
    else:
      cand_ended = cand_tokens == eos_id
    # Alive: the k best that did not end. An ended candidate (its score
    # less INF) can still outrank a filler's descendant (about -INF, when
    # k beams outnumber the first step's tokens or a token is forced):
    # then it takes the place with -INF, a filler (T5X's rule; mesh would
    # extend it past its EOS).
    alive = top(cand_scores - INF * cand_ended, k)
    alive_seq = _gather_beams(cand_seq, alive)
    alive_log_probs = jnp.take_along_axis(
        cand_log_probs - INF * cand_ended, alive, axis=1)
    parents = jnp.take_along_axis(cand_beams, alive, axis=1)
    rows = (jnp.arange(batch_size)[:, None] * k + parents).reshape(-1)
    cache = _map_cache(lambda x: jnp.take(x, rows, axis=0), cache)
    # Finished: the k best of those kept and those that ended now. Only
    # true sequences: not the -INF fillers' descendants (mesh keeps them
    # when the finished places outnumber the true ones).
    ended = cand_ended & (cand_log_probs > -INF / 2)
    pool_seq = jnp.concatenate([finished_seq, cand_seq], axis=1)
    pool_scores = jnp.concatenate(
        [finished_scores, jnp.where(ended, cand_scores, -INF)], axis=1)
    pool_flags = jnp.concatenate([finished_flags, ended], axis=1)
    kept = top(pool_scores, k)
    finished_seq = _gather_beams(pool_seq, kept)
    finished_scores = jnp.take_along_axis(pool_scores, kept, axis=1)
    finished_flags = jnp.take_along_axis(pool_flags, kept, axis=1)
    return (t + 1, alive_seq, alive_log_probs, finished_seq, finished_scores,
            finished_flags, cache)

  def running(state):
    t, _, alive_log_probs, _, finished_scores, finished_flags, _ = state
    best_alive = alive_log_probs[:, 0] / max_penalty
    worst_finished = jnp.min(jnp.where(finished_flags, finished_scores, 0.0),
                             axis=1)
    worst_finished = jnp.where(jnp.any(finished_flags, axis=1),
                               worst_finished, -INF)
    return (t < length) & ~jnp.all(worst_finished > best_alive)

  seq = jnp.zeros((batch_size, k, length), jnp.int32)
  # One live beam at first: the others start at -INF (mesh's).
  initial_log_probs = jnp.broadcast_to(
      jnp.where(jnp.arange(k) == 0, 0.0, -INF).astype(jnp.float32),
      (batch_size, k))
  state = (jnp.array(0, jnp.int32), seq, initial_log_probs, seq,
           jnp.full((batch_size, k), -INF, jnp.float32),
           jnp.zeros((batch_size, k), bool), cache)
  (_, alive_seq, alive_log_probs, finished_seq, finished_scores,
   finished_flags, _) = lax.while_loop(running, step, state)
  any_finished = jnp.any(finished_flags, axis=1)
  tokens = jnp.where(any_finished[:, None, None], finished_seq, alive_seq)
  scores = jnp.where(any_finished[:, None], finished_scores, alive_log_probs)
  return tokens, scores
