# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""gin files, flaxformer's call signature, imports and bad input."""

import glob
import inspect
import os
import subprocess
import sys
import types

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flax_helpers
from mtf_synthesizer import attentions
from mtf_synthesizer.flax_model import attention as attention_lib
from mtf_synthesizer.flax_model import decoding
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.jobs import experiments

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GIN_DIR = os.path.join(ROOT, "gin", "flax")
GIN_FILES = sorted(glob.glob(os.path.join(GIN_DIR, "*.gin")))
# The trainer's runs (gin/flax/train/), each tried with a model: the
# paper's (T5.1.0 base, a variant) for its experiments, a variant before
# the tiny offline run.
TRAIN_GIN_FILES = sorted(glob.glob(os.path.join(GIN_DIR, "train", "*.gin")))
PAPER_MODEL = ("t5_1_0.gin", "base.gin", "dense_vanilla.gin")
TINY_RUN_MODEL = ("random.gin",)
# The paper's runs and the mesh side's experiment each stands for
# (mtf_synthesizer.jobs.experiments): (mixture, lengths, steps).
_PAPER = experiments.EXPERIMENTS["c4_glue_superglue"]
_FINETUNE = (_PAPER.finetune_lengths, experiments.DEFAULT_FINETUNE_STEPS)
PAPER_RUNS = {
    "c4_pretrain.gin": (_PAPER.train_mixture, _PAPER.train_lengths,
                        _PAPER.train_steps),
    "glue_super_glue_finetune.gin": (_PAPER.finetune_mixture,) + _FINETUNE,
    "glue_finetune.gin": ("synth_glue_proportional",) + _FINETUNE,
    "superglue_finetune.gin": ("synth_super_glue_proportional",) + _FINETUNE,
}
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


class _Prepared(Exception):
  """train.prepare's result, raised before anything is written."""


def test_every_train_gin_file_is_tested():
  names = {os.path.basename(f) for f in TRAIN_GIN_FILES}
  assert names == set(PAPER_RUNS) | {"tiny_offline.gin"}


@pytest.mark.parametrize("path", TRAIN_GIN_FILES, ids=os.path.basename)
def test_train_gin_file_prepares_its_run(path, tmp_path, monkeypatch):
  """With its model, the file's run passes train.prepare's checks, offline.

  The run's task is looked up in the registry; a TFDS task's splits, which
  seqio reads from the prepared data, are the train and validation splits
  GLUE, SuperGLUE and C4 have.
  """
  # pylint: disable=g-import-not-at-top
  from mtf_synthesizer.flax_train import data
  from mtf_synthesizer.flax_train import schedules
  from mtf_synthesizer.flax_train import train as train_lib
  # pylint: enable=g-import-not-at-top
  data.import_modules(data.DEFAULT_MODULES)
  name = os.path.basename(path)
  real_get_task, real_prepare = data.get_task, train_lib.prepare

  def get_task(task_name):
    task = real_get_task(task_name)
    try:
      task.splits  # pylint: disable=pointless-statement
    except ValueError:  # no TFDS data here
      assert name in PAPER_RUNS, task_name
      return types.SimpleNamespace(splits=("train", "validation"))
    return task

  setups = []

  def prepare(*args, **kwargs):
    setups.append(real_prepare(*args, **kwargs))
    raise _Prepared()

  monkeypatch.setattr(data, "get_task", get_task)
  monkeypatch.setattr(train_lib, "prepare", prepare)
  model = PAPER_MODEL if name in PAPER_RUNS else TINY_RUN_MODEL
  model_dir = str(tmp_path / "md")
  gin.clear_config()
  try:
    gin.parse_config_files_and_bindings(
        [os.path.join(GIN_DIR, f) for f in model] + [path],
        ["train.model_dir = %r" % model_dir])
    with pytest.raises(_Prepared):
      train_lib.train()
    settings = {k: gin.query_parameter("train." + k) for k in (
        "mixture_or_task_name", "task_feature_lengths", "train_steps",
        "batch_size")}
    schedule = gin.query_parameter("train.learning_rate_schedule").selector
    # The schedule as bound, at a few steps.
    last = settings["train_steps"] - 1
    rates = [float(getattr(schedules, schedule.split(".")[-1])(
        step, settings["train_steps"])) for step in (0, 10000, 40000, last)]
  finally:
    gin.clear_config()
  assert not os.path.exists(model_dir)
  (setup,) = setups
  config = setup.trainer.model.config
  if name not in PAPER_RUNS:
    assert (config.variant, config.vocab_size) == ("random", 384)
    assert settings["mixture_or_task_name"] == "pydocs_span_corruption"
    return
  assert (config.variant, config.d_model, config.dropout_rate) == (
      "dense_vanilla", 768, 0.1)
  mixture, lengths, steps = PAPER_RUNS[name]
  assert settings == {
      "mixture_or_task_name": mixture,
      "task_feature_lengths": {"inputs": lengths[0], "targets": lengths[1]},
      "train_steps": steps,
      "batch_size": experiments.TOKENS_PER_BATCH // lengths[0]}
  if name == "c4_pretrain.gin":  # t5's rsqrt_no_ramp_down.gin
    want = [0.01, 0.01, 0.005, 1 / np.sqrt(last)]
  else:  # t5's constant_0_001.gin
    want = [0.001] * 4
  np.testing.assert_allclose(rates, want, rtol=1e-6)
