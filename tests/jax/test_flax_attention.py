# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""SynthesizerAttention against the NumPy reference, for every variant.

Every row of `attentions.VARIANTS` (enumerated, never listed): encoder
self-attention with padding and T5's relative bias, causal self-attention,
no causal leak, cached decoding equal to the causal pass; and the
encoder-decoder attention.
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flax_helpers
from mtf_synthesizer import attentions
from mtf_synthesizer.core import reference
from mtf_synthesizer.flax_model import attention as attention_lib

HEADS, D_KV, D_MODEL, MAX_LENGTH, LENGTH, BATCH = 2, 4, 8, 8, 6, 2
VARIANTS = [v.name for v in attentions.VARIANTS]


def _layer(variant, **kwargs):
  return attention_lib.SynthesizerAttention(
      num_heads=HEADS, head_dim=D_KV, variant=variant, max_length=MAX_LENGTH,
      **kwargs)


def _inputs(seed=0, length=LENGTH):
  return jax.random.normal(jax.random.PRNGKey(seed),
                           (BATCH, length, D_MODEL), jnp.float32)


@functools.lru_cache(maxsize=None)
def _setup(variant, learned=True):
  layer = _layer(variant, learned_mixture_weights=learned)
  x = _inputs()
  params = layer.init(jax.random.PRNGKey(0), x, x,
                      enable_dropout=False)["params"]
  table = np.asarray(jax.random.normal(jax.random.PRNGKey(5), (HEADS, 32)))
  return layer, flax_helpers.perturbed(params), table


def _apply(layer, params, x, mask, bias):
  return jax.jit(lambda p, x, m, b: layer.apply(
      {"params": p}, x, x, m, b, enable_dropout=False))(params, x, mask, bias)


def _reference(variant, params, x, visible, bias, learned=True):
  kinds = attentions.get(variant).components
  v = flax_helpers.to_reference(params)
  x = np.asarray(x, np.float64)
  out = np.zeros_like(x)
  for e in range(x.shape[0]):
    weights = reference.attention_weights(
        kinds, v, x[e], HEADS, D_KV, visible[e], bias=bias,
        learned_weights=learned)
    for h in range(HEADS):
      g = x[e] @ v["v"][:, h * D_KV:(h + 1) * D_KV]
      out[e] += weights[h] @ g @ v["o"][h * D_KV:(h + 1) * D_KV]
  return out


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "causal"])
def test_equals_reference(variant, causal):
  layer, params, table = _setup(variant)
  x = _inputs(1)
  keep = np.ones((BATCH, LENGTH), bool)
  keep[1, 4:] = False  # padding of the second example's memory
  visible = np.broadcast_to(keep[:, None, :], (BATCH, LENGTH, LENGTH))
  if causal:
    visible = visible & reference.causal_mask(LENGTH)[None]
  bias = reference.relative_bias(table, LENGTH, bidirectional=not causal)
  got = _apply(layer, params, x, jnp.asarray(visible[:, None]),
               jnp.asarray(bias[None], jnp.float32))
  want = _reference(variant, params, x, visible, bias)
  np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5,
                             atol=1e-5)


@pytest.mark.parametrize("variant", [v.name for v in attentions.VARIANTS
                                     if len(v.components) > 1])
def test_unlearned_mixture_equals_reference(variant):
  layer, params, _ = _setup(variant, learned=False)
  assert "mixture" not in params
  x = _inputs(2)
  visible = np.ones((BATCH, LENGTH, LENGTH), bool)
  got = _apply(layer, params, x, None, None)
  want = _reference(variant, params, x, visible, 0.0, learned=False)
  np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5,
                             atol=1e-5)


def _causal(layer, params, x, bias):
  mask = jnp.tril(jnp.ones((LENGTH, LENGTH), bool))[None, None]
  return _apply(layer, params, x, mask, bias)


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_causal_leak(variant):
  layer, params, table = _setup(variant)
  bias = jnp.asarray(reference.relative_bias(table, LENGTH, False)[None],
                     jnp.float32)
  x = _inputs(3)
  before = np.asarray(_causal(layer, params, x, bias))
  for t in (1, 3, LENGTH - 1):
    changed = x.at[:, t:].set(_inputs(4)[:, t:])
    after = np.asarray(_causal(layer, params, changed, bias))
    np.testing.assert_array_equal(after[:, :t], before[:, :t])


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_decoding_equals_causal_pass(variant):
  layer, params, table = _setup(variant)
  bias = jnp.asarray(reference.relative_bias(table, LENGTH, False)[None],
                     jnp.float32)
  x = _inputs(5)
  full = np.asarray(_causal(layer, params, x, bias))
  _, state = layer.apply({"params": params}, jnp.zeros_like(x),
                         jnp.zeros_like(x), None, bias, decode=True,
                         enable_dropout=False, mutable=["cache"])
  cache = state["cache"]
  for leaf_name, leaf in cache.items():
    if leaf_name != "cache_index":
      assert leaf.shape[:2] == (BATCH, LENGTH), leaf_name  # batch first
  assert cache["cache_index"].shape == ()

  @jax.jit
  def step(cache, token):
    out, state = layer.apply({"params": params, "cache": cache}, token,
                             token, None, bias, decode=True,
                             enable_dropout=False, mutable=["cache"])
    return out, state["cache"]

  outputs = []
  for t in range(LENGTH):
    out, cache = step(cache, x[:, t:t + 1])
    outputs.append(out)
  np.testing.assert_allclose(np.concatenate(outputs, 1), full, rtol=1e-5,
                             atol=1e-5)
  assert int(cache["cache_index"]) == LENGTH


def test_prefill_then_steps_equal_causal_pass():
  layer, params, table = _setup("random_vanilla")
  bias = jnp.asarray(reference.relative_bias(table, LENGTH, False)[None],
                     jnp.float32)
  x = _inputs(6)
  full = np.asarray(_causal(layer, params, x, bias))
  _, state = layer.apply({"params": params}, jnp.zeros_like(x),
                         jnp.zeros_like(x), None, bias, decode=True,
                         enable_dropout=False, mutable=["cache"])
  prompt = 3
  mask = jnp.tril(jnp.ones((prompt, prompt), bool))[None, None]
  out, state = layer.apply(
      {"params": params, **state}, x[:, :prompt], x[:, :prompt], mask,
      bias[:, :, :prompt, :prompt], decode=True, prefill=True,
      enable_dropout=False, mutable=["cache"])
  outputs = [out]
  for t in range(prompt, LENGTH):
    out, state = layer.apply(
        {"params": params, **state}, x[:, t:t + 1], x[:, t:t + 1], None,
        bias, decode=True, enable_dropout=False, mutable=["cache"])
    outputs.append(out)
  np.testing.assert_allclose(np.concatenate(outputs, 1), full, rtol=1e-5,
                             atol=1e-5)


def test_encoder_decoder_attention():
  layer = attention_lib.SynthesizerAttention(num_heads=HEADS, head_dim=D_KV)
  q, kv = _inputs(7, length=5), _inputs(8, length=7)
  params = flax_helpers.perturbed(
      layer.init(jax.random.PRNGKey(0), q, kv, enable_dropout=False)["params"])
  assert sorted(params) == ["key", "out", "query", "value"]
  keep = np.ones((BATCH, 7), bool)
  keep[0, 5:] = False
  got = layer.apply({"params": params}, q, kv,
                    jnp.asarray(keep[:, None, None, :]), enable_dropout=False)
  v = flax_helpers.to_reference(params)
  q64, kv64 = np.asarray(q, np.float64), np.asarray(kv, np.float64)
  want = np.zeros_like(q64)
  for e in range(BATCH):
    for h in range(HEADS):
      cols = slice(h * D_KV, (h + 1) * D_KV)
      logits = (q64[e] @ v["q"][:, cols]) @ (kv64[e] @ v["k"][:, cols]).T
      weights = reference.softmax(np.where(keep[e][None], logits, -np.inf))
      want[e] += weights @ (kv64[e] @ v["v"][:, cols]) @ v["o"][cols]
  np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5,
                             atol=1e-5)


def test_dropout_on_weights():
  layer = _layer("random", dropout_rate=0.5)
  x = _inputs(9)
  params = layer.init(jax.random.PRNGKey(0), x, x,
                      enable_dropout=False)["params"]
  off = layer.apply({"params": params}, x, x, enable_dropout=False)
  on = [layer.apply({"params": params}, x, x,
                    rngs={"dropout": jax.random.PRNGKey(i)}) for i in (1, 2)]
  assert not np.allclose(on[0], off) and not np.allclose(on[0], on[1])
  # The weights shared by the batch get a dropout mask per example.
  same = jnp.broadcast_to(x[:1], x.shape)
  out = layer.apply({"params": params}, same, same,
                    rngs={"dropout": jax.random.PRNGKey(3)})
  assert not np.allclose(out[0], out[1])


def test_fixed_random_is_not_trained():
  layer = _layer("fixed_random")
  x = _inputs(10)
  params = nn.unbox(layer.init(jax.random.PRNGKey(0), x, x,
                               enable_dropout=False)["params"])
  grads = jax.grad(lambda p: jnp.sum(layer.apply(
      {"params": p}, x, x, enable_dropout=False)**2))(params)
  assert not np.any(grads["fixed_random"]["R"])
  assert np.any(grads["value"]["kernel"])
  mask = attention_lib.functions_lib.trainable_mask(params)
  assert mask["fixed_random"]["R"] is False
  assert mask["value"]["kernel"] is True


def test_logical_axes():
  layer = _layer("dense_vanilla")
  x = _inputs()
  boxed = layer.init(jax.random.PRNGKey(0), x, x, enable_dropout=False)
  specs = nn.get_partition_spec(boxed)["params"]
  assert tuple(specs["query"]["kernel"]) == ("embed", "heads", "kv")
  assert tuple(specs["out"]["kernel"]) == ("heads", "kv", "embed")
  assert tuple(specs["dense"]["w2"]) == ("heads", "kv", "length")
  assert tuple(specs["mixture"]["alpha_logits"]) == (None, "heads")
