# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""gin files, flaxformer's call signature, imports and bad input."""

import glob
import inspect
import os
import subprocess
import sys

import gin
import jax
import jax.numpy as jnp
import pytest

import flax_helpers
from mtf_synthesizer import attentions
from mtf_synthesizer.flax_model import attention as attention_lib
from mtf_synthesizer.flax_model import decoding
from mtf_synthesizer.flax_model import t5

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GIN_DIR = os.path.join(ROOT, "gin", "flax")
GIN_FILES = sorted(glob.glob(os.path.join(GIN_DIR, "*.gin")))
# Small enough to build any file's model in a moment.
TINY = ["T5Config.vocab_size = 11", "T5Config.d_model = 8",
        "T5Config.num_heads = 2", "T5Config.head_dim = 4",
        "T5Config.d_ff = 8", "T5Config.num_encoder_layers = 1",
        "T5Config.num_decoder_layers = 1", "T5Config.max_length = 6"]
# flaxformer's MultiHeadDotProductAttention.__call__ parameters.
FLAXFORMER_SIGNATURE = (
    "(self, inputs_q, inputs_kv, mask=None, bias=None, *, "
    "precomputed_qkv=None, decode=False, enable_dropout=True, "
    "prefill=False, prefill_lengths=None)")


def _parsed(files, bindings=()):
  gin.clear_config()
  gin.parse_config_files_and_bindings(files, list(bindings))
  try:
    return t5.make_model()
  finally:
    gin.clear_config()


def test_a_gin_file_per_variant():
  names = {os.path.basename(f)[:-4] for f in GIN_FILES}
  for variant in attentions.VARIANTS:
    assert variant.name in names, variant.name


@pytest.mark.parametrize("path", GIN_FILES, ids=os.path.basename)
def test_gin_file_builds_a_model(path):
  model = _parsed([path], TINY)
  name = os.path.basename(path)[:-4]
  if name in attentions.VARIANT_NAMES:
    assert model.config.variant == name
  tokens = jnp.array([[3, 4, 0]], jnp.int32)
  args = (tokens,) if isinstance(model, t5.DecoderOnly) else (tokens, tokens)
  variables = model.init(jax.random.PRNGKey(0), *args, enable_dropout=False)
  assert model.apply(variables, *args, enable_dropout=False).shape == (
      1, 3, 11)


def test_layout_and_sizes_combine():
  model = _parsed([os.path.join(GIN_DIR, f) for f in (
      "t5_1_1.gin", "t5_1_1_small.gin", "random_vanilla.gin")])
  config = model.config
  assert (config.d_model, config.num_heads, config.d_ff) == (512, 6, 1024)
  assert config.activations == ("gelu", "linear")
  assert not config.logits_via_embedding
  assert config.variant == "random_vanilla"


def _parameters(signature):
  return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def test_flaxformer_signature():
  """Checked by signature only: flaxformer cannot be installed here."""
  namespace = {}
  exec("def call%s: pass" % FLAXFORMER_SIGNATURE, namespace)  # pylint: disable=exec-used
  want = _parameters(inspect.signature(namespace["call"]))
  got = _parameters(inspect.signature(
      attention_lib.SynthesizerAttention.__call__))
  assert got == want


def test_import_loads_no_other_framework():
  code = ("import sys, mtf_synthesizer.flax_model; "
          "print([m for m in ('tensorflow', 'torch', 'mesh_tensorflow') "
          "if m in sys.modules])")
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                       capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": ROOT})
  assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _attention_call(variant, length, **kwargs):
  layer = attention_lib.SynthesizerAttention(
      num_heads=2, head_dim=4, variant=variant, max_length=8, **kwargs)
  x = jnp.ones((1, length, 8))
  return layer.init(jax.random.PRNGKey(0), x, x, enable_dropout=False)


def test_unknown_variant():
  with pytest.raises(ValueError, match="'nope'.*known: vanilla, random"):
    _attention_call("nope", 4)
  with pytest.raises(ValueError, match="'nope'"):
    flax_helpers.tiny_config(variant="nope")
  with pytest.raises(ValueError, match="'t5_attention'"):
    flax_helpers.tiny_config(variant="t5_attention")  # not a variant


@pytest.mark.parametrize("variant", [v.name for v in attentions.VARIANTS
                                     if v.components != ("dot_product",)])
def test_longer_than_max_length(variant):
  with pytest.raises(ValueError, match="length 9 but its max_length is 8"):
    _attention_call(variant, 9)


def test_the_dot_product_alone_takes_any_length():
  _attention_call("vanilla", 9)


def test_factors_must_multiply_to_max_length():
  with pytest.raises(ValueError, match="a=3, b=3 .*max_length=8"):
    _attention_call("factorized_dense", 4, function_settings={
        "factorized_dense": {"a": 3, "b": 3}})
  with pytest.raises(ValueError, match="cannot factorize max_length 7"):
    attention_lib.SynthesizerAttention(
        num_heads=2, head_dim=4, variant="factorized_dense",
        max_length=7).init(jax.random.PRNGKey(0), jnp.ones((1, 4, 8)),
                           jnp.ones((1, 4, 8)), enable_dropout=False)
  with pytest.raises(ValueError, match="Unknown setting 'c'"):
    _attention_call("factorized_dense", 4, function_settings={
        "factorized_dense": {"c": 3}})


def test_decoding_past_the_cache():
  model = t5.make_model(True, flax_helpers.tiny_config(variant="random"))
  params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 3), jnp.int32),
                      enable_dropout=False)["params"]
  cache = decoding.init_cache(model, params, 1, 3)
  token = jnp.zeros((1, 1), jnp.int32)
  for _ in range(3):
    _, cache = decoding.decode_step(model, params, cache, token, 3)
  with pytest.raises(ValueError, match="position 3 past the cache's length "
                     "3; valid positions: 0..2"):
    decoding.decode_step(model, params, cache, token, 3)


def test_precomputed_qkv_and_prefill_lengths_say_so():
  layer = attention_lib.SynthesizerAttention(num_heads=2, head_dim=4)
  x = jnp.ones((1, 3, 8))
  with pytest.raises(NotImplementedError, match="precomputed_qkv"):
    layer.init(jax.random.PRNGKey(0), x, x, precomputed_qkv=x)
  with pytest.raises(NotImplementedError, match="prefill_lengths"):
    layer.init(jax.random.PRNGKey(0), x, x, prefill=True,
               prefill_lengths=jnp.array([2]))
