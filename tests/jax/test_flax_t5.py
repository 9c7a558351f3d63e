# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Flax T5: shapes and trees of both layouts, ties, decoding, the loss."""

import flax.linen as nn
from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import flax_helpers
from mtf_synthesizer import attentions
from mtf_synthesizer.flax_model import decoding
from mtf_synthesizer.flax_model import functions
from mtf_synthesizer.flax_model import losses
from mtf_synthesizer.flax_model import t5

ENC = jnp.array([[3, 4, 5, 6, 0], [7, 8, 0, 0, 0]], jnp.int32)
DEC = jnp.array([[0, 3, 4, 5], [0, 9, 10, 0]], jnp.int32)
LAYOUTS = {
    "t5_1_0": dict(activations=("relu",), logits_via_embedding=True),
    "t5_1_1": dict(activations=("gelu", "linear"),
                   logits_via_embedding=False),
}


def _init(model, decoder_only):
  args = (DEC,) if decoder_only else (ENC, DEC)
  variables = model.init(jax.random.PRNGKey(0), *args, enable_dropout=False)
  return flax_helpers.perturbed(variables["params"], scale=0.1), args


def _tree(params):
  return {k: v.shape for k, v in
          traverse_util.flatten_dict(params, sep="/").items()}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("decoder_only", [False, True],
                         ids=["encoder_decoder", "decoder_only"])
def test_shapes_and_tree(layout, decoder_only):
  config = flax_helpers.tiny_config(variant="random_vanilla",
                                    **LAYOUTS[layout])
  model = t5.make_model(decoder_only, config)
  params, args = _init(model, decoder_only)
  logits = model.apply({"params": params}, *args, enable_dropout=False)
  assert logits.shape == DEC.shape + (config.vocab_size,)
  assert logits.dtype == jnp.float32
  tree = _tree(params)
  prefix = "decoder/" if decoder_only else ""
  assert tree[prefix + "token_embedder/embedding"] == (23, 8)
  assert ("decoder/logits_dense/kernel" in tree) == (layout == "t5_1_1")
  if layout == "t5_1_1":
    assert tree["decoder/logits_dense/kernel"] == (8, 23)
    assert tree["decoder/layers_0/mlp/wi_0/kernel"] == (8, 16)
    assert tree["decoder/layers_0/mlp/wi_1/kernel"] == (8, 16)
  else:
    assert tree["decoder/layers_0/mlp/wi/kernel"] == (8, 16)
  assert tree["decoder/layers_1/mlp/wo/kernel"] == (16, 8)
  assert tree["decoder/relpos_bias/rel_embedding"] == (2, 32)
  attention = "decoder/layers_0/self_attention/"
  assert tree[attention + "random/R"] == (2, 8, 8)
  assert tree[attention + "mixture/alpha_logits"] == (2, 2)
  assert tree[attention + "query/kernel"] == (8, 2, 4)
  assert tree[attention + "out/kernel"] == (2, 4, 8)
  for name in ("pre_self_attention_layer_norm", "pre_mlp_layer_norm"):
    assert tree["decoder/layers_1/%s/scale" % name] == (8,)
  assert tree["decoder/decoder_norm/scale"] == (8,)
  if decoder_only:
    assert all(k.startswith("decoder/") for k in tree)
    assert not any("encoder_decoder_attention" in k or "cross" in k
                   for k in tree)
  else:
    assert tree["encoder/relpos_bias/rel_embedding"] == (2, 32)
    assert tree["encoder/layers_1/attention/random/R"] == (2, 8, 8)
    assert tree["encoder/layers_0/pre_attention_layer_norm/scale"] == (8,)
    assert tree["encoder/encoder_norm/scale"] == (8,)
    cross = "decoder/layers_0/encoder_decoder_attention/"
    assert {k[len(cross):] for k in tree if k.startswith(cross)} == {
        "query/kernel", "key/kernel", "value/kernel", "out/kernel"}
    assert tree["decoder/layers_0/pre_cross_attention_layer_norm/scale"] == (
        8,)


def test_relative_bias_per_layer():
  config = flax_helpers.tiny_config(relative_attention_type="bias")
  params, _ = _init(t5.make_model(False, config), False)
  tree = _tree(params)
  assert "encoder/relpos_bias/rel_embedding" not in tree
  for stack in ("encoder", "decoder"):
    for i in range(2):
      assert tree["%s/layers_%d/relpos_bias/rel_embedding" % (stack, i)] == (
          2, 32)


def test_tied_logits_are_the_scaled_embedding():
  config = flax_helpers.tiny_config(**LAYOUTS["t5_1_0"])
  model = t5.make_model(False, config)
  params, args = _init(model, False)
  logits, state = model.apply(
      {"params": params}, *args, enable_dropout=False,
      capture_intermediates=lambda m, _: isinstance(m, t5.RMSNorm),
      mutable=["intermediates"])
  normed = state["intermediates"]["decoder"]["decoder_norm"]["__call__"][0]
  embedding = params["token_embedder"]["embedding"]
  np.testing.assert_allclose(logits, (normed * 8**-0.5) @ embedding.T,
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", attentions.VARIANT_NAMES)
@pytest.mark.parametrize("decoder_only", [False, True],
                         ids=["encoder_decoder", "decoder_only"])
def test_greedy_decoding_equals_teacher_forcing(variant, decoder_only):
  relative = "bias" if variant == "dense" else "bias_shared"
  config = flax_helpers.tiny_config(variant=variant,
                                    relative_attention_type=relative,
                                    **LAYOUTS["t5_1_1"])
  model = t5.make_model(decoder_only, config)
  params, _ = _init(model, decoder_only)
  steps = 6
  tokens, step_logits = jax.jit(
      lambda p: decoding.greedy_decode(
          model, p, steps, None if decoder_only else ENC,
          batch_size=2))(params)
  assert tokens.shape == (2, steps)
  inputs = jnp.concatenate([jnp.zeros((2, 1), jnp.int32), tokens[:, :-1]], 1)
  args = (inputs,) if decoder_only else (ENC, inputs)
  full = model.apply({"params": params}, *args, enable_dropout=False)
  np.testing.assert_allclose(step_logits, full, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(tokens, jnp.argmax(full, -1))


def test_forced_tokens():
  model = t5.make_model(True, flax_helpers.tiny_config(variant="random"))
  params, _ = _init(model, True)
  prompt = jnp.array([[5, 6], [7, 8]], jnp.int32)
  tokens, _ = decoding.greedy_decode(model, params, 4, forced_tokens=prompt)
  np.testing.assert_array_equal(tokens[:, :2], prompt)


def _numpy_loss(logits, targets, z_loss, denominator):
  logits = np.asarray(logits, np.float64)
  top = logits.max(-1, keepdims=True)
  log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
  picked = np.take_along_axis(logits, np.maximum(targets, 0)[..., None],
                              -1)[..., 0]
  per_position = log_z - picked + z_loss * log_z**2
  return (per_position * (targets > 0)).sum() / denominator


@pytest.mark.parametrize("decoder_only", [False, True],
                         ids=["encoder_decoder", "decoder_only"])
def test_loss_is_mesh_formula(decoder_only):
  model = t5.make_model(decoder_only, flax_helpers.tiny_config(
      variant="dense_vanilla"))
  params, args = _init(model, decoder_only)
  logits = model.apply({"params": params}, *args, enable_dropout=False)
  targets = jnp.array([[3, 4, 5, 1], [9, 10, 1, 0]], jnp.int32)
  got = losses.loss(logits, targets)
  assert np.isfinite(got)
  np.testing.assert_allclose(got, _numpy_loss(logits, targets, 1e-4, 8),
                             rtol=1e-6)
  np.testing.assert_allclose(losses.loss(logits, targets, train=False),
                             _numpy_loss(logits, targets, 0.0, 8), rtol=1e-6)
  np.testing.assert_allclose(
      losses.loss(logits, targets, loss_denominator=2.0),
      _numpy_loss(logits, targets, 1e-4, 2.0), rtol=1e-6)
  metrics = losses.eval_metrics(logits, targets)
  xent = _numpy_loss(logits, targets, 0.0, 1.0)
  np.testing.assert_allclose(metrics["neg_log_perplexity"], -xent / 7,
                             rtol=1e-6)
  np.testing.assert_allclose(metrics["loss"], xent / 8, rtol=1e-6)


def test_fixed_random_is_excluded_from_the_optimizer():
  model = t5.make_model(True, flax_helpers.tiny_config(
      variant="fixed_random", num_decoder_layers=1))
  params, args = _init(model, True)
  targets = jnp.array([[3, 4, 5, 1], [9, 10, 1, 0]], jnp.int32)

  def objective(p):
    return losses.loss(model.apply({"params": p}, *args,
                                   enable_dropout=False), targets)
  grads = jax.grad(objective)(params)
  fixed = grads["decoder"]["layers_0"]["self_attention"]["fixed_random"]["R"]
  assert not np.any(fixed)
  optimizer = optax.masked(optax.adam(1e-2),
                           functions.trainable_mask(params))
  state = optimizer.init(params)
  updates, _ = optimizer.update(grads, state, params)
  updated = optax.apply_updates(params, updates)
  path = ("decoder", "layers_0", "self_attention", "fixed_random", "R")
  before = traverse_util.flatten_dict(params)
  after = traverse_util.flatten_dict(updated)
  np.testing.assert_array_equal(after[path], before[path])


def test_dtype_knob():
  model = t5.make_model(True, flax_helpers.tiny_config(dtype="bfloat16"))
  params, args = _init(model, True)
  logits = model.apply({"params": params}, *args, enable_dropout=False)
  assert logits.dtype == jnp.float32
  assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(
      nn.unbox(params)))


def test_dropout_needs_rng_and_varies():
  model = t5.make_model(True, flax_helpers.tiny_config(dropout_rate=0.3))
  params, args = _init(model, True)
  a = model.apply({"params": params}, *args,
                  rngs={"dropout": jax.random.PRNGKey(1)})
  b = model.apply({"params": params}, *args,
                  rngs={"dropout": jax.random.PRNGKey(2)})
  assert not np.allclose(a, b)
