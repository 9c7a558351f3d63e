# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Beam search with the cache against greedy decoding and brute force.

One beam without an end token is greedy decoding; a beam wide enough to
keep every prefix returns the best sequences of an exhaustive search over
all of them, scored with the model's teacher-forced log-probabilities (no
cache) and mesh's length penalty and EOS rule; every returned score is its
sequence's teacher-forced score, for every variant of the table.
"""

import functools
import itertools
import math
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flax_helpers
from mtf_synthesizer import attentions
from mtf_synthesizer.flax_model import decoding
from mtf_synthesizer.flax_model import t5

EOS = 1
ENC = jnp.array([[3, 4, 5, 2, 0], [5, 2, 0, 0, 0]], jnp.int32)
# A filler place scores -1e7 (mesh's -INF).
FILLER = -decoding.INF / 2
MODELS = [False, True]
MODEL_IDS = ["encoder_decoder", "decoder_only"]


class _Model(NamedTuple):
  model: nn.Module
  params: Any
  apply: Callable[..., jax.Array]  # jitted: (params, *inputs) -> logits


@functools.lru_cache(maxsize=None)
def _model(decoder_only, variant="random_vanilla", vocab_size=6, layers=2):
  """A tiny T5.1.1 model, its random parameters and its jitted call."""
  config = flax_helpers.tiny_config(
      variant=variant, vocab_size=vocab_size, num_encoder_layers=layers,
      num_decoder_layers=layers, activations=("gelu", "linear"),
      logits_via_embedding=False)
  model = t5.make_model(decoder_only, config)
  dec = jnp.zeros((2, 4), jnp.int32)
  args = (dec,) if decoder_only else (ENC, dec)
  # The tree's shapes only, filled from NumPy (compiling the initializers
  # takes seconds): weights N(0, 0.5^2), large enough that the
  # distributions are peaked and EOS ends some sequences and not others;
  # the norms' scales 1 + N(0, 0.1^2).
  shapes = nn.unbox(jax.eval_shape(
      lambda: model.init(jax.random.PRNGKey(0), *args,
                         enable_dropout=False))["params"])
  rng = np.random.default_rng(
      [vocab_size, layers, decoder_only, *variant.encode()])

  def fill(path, leaf):
    noise = rng.normal(size=leaf.shape)
    if path[-1].key == "scale":
      return jnp.asarray(1 + 0.1 * noise, leaf.dtype)
    return jnp.asarray(0.5 * noise, leaf.dtype)
  params = jax.tree_util.tree_map_with_path(fill, shapes)
  apply = jax.jit(lambda p, *a: model.apply({"params": p}, *a,
                                            enable_dropout=False))
  return _Model(model, params, apply)


def _log_probs(m, encoder_tokens, sequences):
  """Teacher-forced log p(y_t | y_<t) [n, L] (float64) of sequences [n, L].

  Args:
    m: the model (a _Model), called on whole sequences (no cache).
    encoder_tokens: [length], one example's (an encoder-decoder's), or None.
    sequences: [n, L] int.

  Returns:
    The log-probability of each token given those before it.
  """
  sequences = np.asarray(sequences)
  inputs = np.concatenate([np.zeros_like(sequences[:, :1]),
                           sequences[:, :-1]], axis=1)
  args = (jnp.asarray(inputs),)
  if encoder_tokens is not None:
    args = (jnp.tile(jnp.asarray(encoder_tokens)[None], (len(inputs), 1)),
            ) + args
  logits = np.asarray(m.apply(m.params, *args), np.float64)
  top = logits.max(-1, keepdims=True)
  log_z = np.log(np.exp(logits - top).sum(-1, keepdims=True)) + top
  return np.take_along_axis(logits - log_z, sequences[..., None], -1)[..., 0]


def _penalty(length, alpha):
  return ((5.0 + length) / 6.0)**alpha


def _score(log_probs, tokens, alpha, finished, eos=EOS):
  """mesh's score of a sequence from its tokens' log-probabilities."""
  if not finished:
    return log_probs.sum()
  end = list(tokens).index(eos) + 1
  return log_probs[:end].sum() / _penalty(end, alpha)


def _brute_force(m, encoder_tokens, vocab, length, alpha, prompt=()):
  """Every finished sequence of up to `length` tokens, best first.

  Args:
    m: the model (a _Model).
    encoder_tokens: one example's (an encoder-decoder's), or None.
    vocab: the vocabulary.
    length: the longest sequence.
    alpha: the length penalty's exponent.
    prompt: the forced first tokens (0: free).

  Returns:
    [(score, tokens padded with 0 to length)], best first.
  """
  every = np.array(list(itertools.product(range(vocab), repeat=length)))
  log_probs = _log_probs(m, encoder_tokens, every)
  found = {}
  for tokens, lp in zip(every, log_probs):
    if EOS not in tokens or any(g and t != g for t, g in zip(tokens, prompt)):
      continue
    end = list(tokens).index(EOS) + 1
    key = tuple(tokens[:end]) + (0,) * (length - end)
    found[key] = _score(lp, tokens, alpha, True)
  return sorted(((s, k) for k, s in found.items()), reverse=True)


def _check_scores(m, tokens, scores, alpha, encoder_tokens=None, eos=EOS):
  """Each returned sequence's score is its teacher-forced score."""
  tokens, scores = np.asarray(tokens), np.asarray(scores)
  for b in range(tokens.shape[0]):
    real = scores[b] > FILLER
    assert real[0]
    assert (np.diff(scores[b]) <= 0).all()  # best first
    enc = None if encoder_tokens is None else encoder_tokens[b]
    log_probs = _log_probs(m, enc, tokens[b])[real]
    # All finished (each has its EOS), or none (an example without one).
    finished = bool((tokens[b][real] == eos).any(-1).all())
    expected = [_score(lp, t, alpha, finished, eos)
                for lp, t in zip(log_probs, tokens[b][real])]
    np.testing.assert_allclose(scores[b][real], expected, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("decoder_only", MODELS, ids=MODEL_IDS)
def test_one_beam_without_an_end_is_greedy_decoding(decoder_only):
  m = _model(decoder_only)
  steps = 5
  enc = None if decoder_only else ENC
  # The decoder-only model with a prompt: forced tokens alike.
  prompt = jnp.array([[4, 2], [0, 3]], jnp.int32) if decoder_only else None

  @jax.jit
  def both(p):
    greedy = decoding.greedy_decode(m.model, p, steps, enc, batch_size=2,
                                    forced_tokens=prompt)
    beam = decoding.beam_search(m.model, p, steps, beam_size=1,
                                encoder_input_tokens=enc,
                                decoder_prompt=prompt, batch_size=2,
                                eos_id=None)
    return greedy, beam

  (greedy, step_logits), (tokens, scores) = both(m.params)
  assert tokens.shape == (2, 1, steps) and scores.shape == (2, 1)
  np.testing.assert_array_equal(tokens[:, 0], greedy)
  picked = jnp.take_along_axis(jax.nn.log_softmax(step_logits),
                               greedy[..., None], -1)[..., 0]
  np.testing.assert_allclose(scores[:, 0], picked.sum(-1), rtol=1e-5)
  _check_scores(m, tokens, scores, 0.0, enc, eos=-1)
  if decoder_only:
    np.testing.assert_array_equal(greedy[0, :2], [4, 2])
    assert greedy[1, 1] == 3


@pytest.mark.parametrize("decoder_only", MODELS, ids=MODEL_IDS)
def test_a_wide_beam_is_the_exhaustive_search(decoder_only):
  vocab, length, alpha = 6, 3, 0.6
  # Wide enough to keep every prefix: 2k >= (vocab - 1)^(length - 1) vocab
  # candidates, all sum_t (vocab - 1)^t finished sequences.
  beam = (vocab - 1)**(length - 1) * vocab // 2
  m = _model(decoder_only, vocab_size=vocab)
  enc = None if decoder_only else ENC
  # The decoder-only model: the first example's first token is forced.
  prompt = jnp.array([[4], [0]], jnp.int32) if decoder_only else None
  tokens, scores = jax.jit(lambda p: decoding.beam_search(
      m.model, p, length, beam_size=beam, alpha=alpha,
      encoder_input_tokens=enc, decoder_prompt=prompt, batch_size=2))(
          m.params)
  assert tokens.shape == (2, beam, length)
  tokens, scores = np.asarray(tokens), np.asarray(scores)
  for b in range(2):
    expected = _brute_force(
        m, None if enc is None else ENC[b], vocab, length, alpha,
        () if prompt is None else tuple(np.asarray(prompt[b])))
    real = int((scores[b] > FILLER).sum())
    # The search stops once no alive sequence can beat the worst finished
    # one: then it holds the best `real` of them.
    assert 3 <= real <= len(expected) <= beam
    np.testing.assert_allclose(scores[b, :real],
                               [s for s, _ in expected[:real]], rtol=1e-5)
    np.testing.assert_array_equal(tokens[b, :real],
                                  [t for _, t in expected[:real]])
    # The places left: empty, mesh's -INF.
    assert (tokens[b, real:] == 0).all()
    assert (scores[b, real:] == -decoding.INF).all()
  if decoder_only:
    assert (tokens[0, scores[0] > FILLER, 0] == 4).all()


@pytest.mark.parametrize("variant", attentions.VARIANT_NAMES)
def test_scores_are_the_sequences_teacher_forced_scores(variant):
  # Per variant, one beam search: R and FR read their tables' rows at the
  # cache's index, D and FD their columns; the cache's rows follow the
  # beams. Every other variant is the decoder-only model.
  decoder_only = attentions.VARIANT_NAMES.index(variant) % 2 == 1
  m = _model(decoder_only, variant, vocab_size=8, layers=1)
  enc = None if decoder_only else ENC
  alpha = 0.8
  tokens, scores = jax.jit(lambda p: decoding.beam_search(
      m.model, p, 6, beam_size=4, alpha=alpha, encoder_input_tokens=enc,
      batch_size=2))(m.params)
  assert tokens.shape == (2, 4, 6) and scores.shape == (2, 4)
  _check_scores(m, tokens, scores, alpha, enc)


def test_without_a_finished_sequence_the_alive_ones_return():
  m = _model(True)
  # An end token the model never produces: mesh returns the alive beams
  # with their log-probabilities, no length penalty.
  tokens, scores = jax.jit(lambda p: decoding.beam_search(
      m.model, p, 4, beam_size=3, batch_size=2, eos_id=99))(m.params)
  assert (np.asarray(scores) > FILLER).all()
  _check_scores(m, tokens, scores, 0.6, eos=99)


def test_length_penalty_and_bad_beam():
  np.testing.assert_allclose(decoding.length_penalty(3, 0.6),
                             math.pow(8 / 6, 0.6), rtol=1e-6)
  assert decoding.length_penalty(7, 0.0) == 1.0
  m = _model(True)
  with pytest.raises(ValueError, match="beam_size"):
    decoding.beam_search(m.model, m.params, 3, beam_size=0)
