# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A mixture trains through the stock CLI while mesh accumulates gradients.

With `utils.serialize_num_microbatches.tokens_per_microbatch_per_replica`
below a replica's tokens per batch (T5's gin sets 2048), mesh builds the
training step inside a while loop over microbatches. conftest's D+V model
(trained 2 steps on 4 sequences of 64 tokens) resumes here for one step in
2 microbatches of 128 tokens, from a checkpoint whose mixture logits are set
far from their start: the run must succeed and write, for every layer,
alpha = softmax(those logits) averaged over heads. D+V is the mixture of
the failure this guards against; the mechanism is tested for every mesh and
both of TF's kinds of loop in test_summaries.py.
"""

import os
import shutil

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import conftest
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import events
from mtf_synthesizer.jobs import runner

# Runs the stock CLI: `make test-fast` skips it.
pytestmark = pytest.mark.slow

VARIANT = "dense_vanilla"
MICROBATCH_TOKENS = 2 * conftest.LENGTH  # 2 of the batch's 4 sequences


def _set_alpha_logits(model_dir: str, step: int) -> dict:
  """Rewrites the checkpoint's alpha logits; returns them by layer."""
  prefix = os.path.join(model_dir, "model.ckpt-%d" % step)
  reader = tf.train.load_checkpoint(prefix)
  names = sorted(reader.get_variable_to_shape_map())
  values = [reader.get_tensor(n) for n in names]
  logits = {}
  for i, name in enumerate(names):
    if name.endswith("mixture/alpha_logits"):  # [functions, heads]
      value = np.zeros(values[i].shape)
      value[0] = 0.4 * (len(logits) + 1) + 0.3 * np.arange(value.shape[1])
      values[i] = value.astype(values[i].dtype)  # bfloat16 masters
      logits[name[:-len("/alpha_logits")]] = values[i].astype(np.float64)
  with tf.Graph().as_default(), tf.Session() as sess:
    sess.run(tf.raw_ops.SaveV2(
        prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
        tensors=[tf.constant(v) for v in values]))
  return logits


@pytest.fixture(scope="module")
def resumed(trained_models, tmp_path_factory):
  source, trained = trained_models[VARIANT]
  assert trained.returncode == 0, trained.stderr[-3000:]
  model_dir = str(tmp_path_factory.mktemp("microbatches") / "model")
  shutil.copytree(source, model_dir)
  logits = _set_alpha_logits(model_dir, conftest.TRAIN_STEPS)
  result = runner.run(commands.local_train(
      model_dir, VARIANT, steps=conftest.TRAIN_STEPS + 1,
      length=conftest.LENGTH,
      gin_params=["utils.serialize_num_microbatches."
                  "tokens_per_microbatch_per_replica = %d"
                  % MICROBATCH_TOKENS]), timeout=900)
  return model_dir, result, logits


def test_mixture_trains_in_microbatches(resumed):
  model_dir, result, _ = resumed
  assert result.returncode == 0, result.stderr[-3000:]
  assert "num_microbatches=2" in result.stderr
  assert os.path.exists(os.path.join(
      model_dir, "model.ckpt-%d.index" % (conftest.TRAIN_STEPS + 1)))


def test_alpha_of_every_layer_reaches_tensorboard(resumed):
  model_dir, result, logits = resumed
  assert result.returncode == 0, result.stderr[-3000:]
  scalars = events.read_scalars(model_dir)
  components = attentions.get(VARIANT).components
  assert len(logits) == 4  # 2 encoder, 2 decoder self-attention layers
  for layer, w in logits.items():
    alpha = np.exp(w) / np.exp(w).sum(axis=0, keepdims=True)
    for i, name in enumerate(components):
      points = {s: v for s, _, v in scalars["%s/alpha_%s" % (layer, name)]}
      # Written at the resumed run's first step, from the checkpoint.
      step = conftest.TRAIN_STEPS + 1
      assert step in points, sorted(points)
      np.testing.assert_allclose(points[step], alpha[i].mean(), atol=1e-6)
      assert abs(alpha[i].mean() - 1 / len(components)) > 1e-2
