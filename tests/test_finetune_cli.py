# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Finetuning through the stock CLI: from vanilla T5, and a synthesizer."""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import conftest
from mtf_synthesizer.tools_lib import stock_cli

STEPS = conftest.TRAIN_STEPS
ATTN = "encoder/block_000/layer_000/"
BYTES = {"MTF_SYNTH_VOCAB": "byte"}


@pytest.fixture(scope="module")
def pretrained(trained_models):
  """A plain T5 (mesh SelfAttention) model and an R model."""
  out = {}
  for name, key in (("vanilla", conftest.T5_VANILLA), ("random", "random")):
    model_dir, proc = trained_models[key]
    assert proc.returncode == 0, proc.stderr[-3000:]
    out[name] = model_dir
  return out


def _values(model_dir, step):
  reader = tf.train.load_checkpoint(
      os.path.join(model_dir, "model.ckpt-%d" % step))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_random_vanilla_starts_from_vanilla_checkpoint(pretrained, tmp_path):
  model_dir = str(tmp_path / "rv")
  init = os.path.join(pretrained["vanilla"], "model.ckpt-%d" % STEPS)
  proc = stock_cli.run(stock_cli.local_train(
      model_dir, "random_vanilla", steps=STEPS + 1,
      gin_files=["synthesizer/init_from_t5.gin"],
      gin_params=["utils.run.init_checkpoint = '%s'" % init]), timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  # The first checkpoint is written before the first step (global_step is
  # restored: STEPS), so it holds the initial values.
  start = _values(model_dir, STEPS)
  source = _values(pretrained["vanilla"], STEPS)
  for name in ("q", "k", "v", "o", "relative_attention_bias"):
    np.testing.assert_array_equal(
        start[ATTN + "SynthesizerAttention/" + name],
        source[ATTN + "SelfAttention/" + name])
  assert ATTN + "SynthesizerAttention/random/R" in start
  assert not any("random/R" in n for n in source)
  np.testing.assert_array_equal(
      start[ATTN + "SynthesizerAttention/mixture/alpha_logits"], 0.0)
  assert ("init_from_t5: %sSynthesizerAttention/q <- %sSelfAttention/q"
          % (ATTN, ATTN)) in proc.stderr
  assert ("init_from_t5: %sSynthesizerAttention/random/R is fresh"
          % ATTN) in proc.stderr
  # And training went on from there.
  end = _values(model_dir, STEPS + 1)
  assert not np.array_equal(end[ATTN + "SynthesizerAttention/random/R"],
                            start[ATTN + "SynthesizerAttention/random/R"])


def test_synthesizer_finetunes_on_another_task(pretrained, tmp_path):
  model_dir = str(tmp_path / "r_listops")
  init = os.path.join(pretrained["random"], "model.ckpt-%d" % STEPS)
  command = stock_cli.local_train(
      model_dir, "random", steps=STEPS + 1, mixture="listops",
      gin_params=["utils.run.init_checkpoint = '%s'" % init], env=BYTES)
  proc = stock_cli.run(command, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  start = _values(model_dir, STEPS)
  source = _values(pretrained["random"], STEPS)
  for name in ("random/R", "kv", "o"):
    key = ATTN + "SynthesizerAttention/" + name
    np.testing.assert_array_equal(start[key], source[key])
  operative = open(os.path.join(model_dir, "operative_config.gin")).read()
  assert "SynthesizerAttention.synthesizers" in operative
