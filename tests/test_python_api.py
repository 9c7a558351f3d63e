# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""T5's Python API with a variant, end to end: tools/python_api_example.py.

The example finetunes conftest's plain T5 model (mesh's SelfAttention, no
variant file, trained by the stock CLI) into R+V with
`mtf_synthesizer.MtfModel(variant="random_vanilla").finetune`, then
predicts, scores and exports. The same process then trains one more step
(T5's `train` resumes from the model directory), whose TensorBoard events
must hold the mixture weights alpha of every layer, and evaluates the
result on a small task. The SavedModel is
served in a process that can import nothing but TensorFlow.
"""

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import conftest
from mtf_synthesizer.jobs import events

# Trains and decodes through T5's MtfModel: `make test-fast` skips it.
pytestmark = pytest.mark.slow

STEPS = conftest.TRAIN_STEPS
FINETUNE_STEPS = 2
ATTN = "encoder/block_000/layer_000/"
SCRIPT = textwrap.dedent("""\
    import json, os, runpy, sys
    import gin
    import numpy as np
    import tensorflow.compat.v1 as tf
    import mtf_synthesizer
    sys.path.insert(0, os.path.dirname(sys.argv[1]))  # as python <tool>
    example = runpy.run_path(sys.argv[1])
    results = example["run"](sys.argv[2], "random_vanilla",
                             "pydocs_span_corruption", %d,
                             pretrained_model_dir=sys.argv[3])
    # Two steps of Adafactor move alpha by about 1e-6 from 0.5: give the
    # last checkpoint alpha logits far from 0, so that the summary written
    # next shows whether it really is this checkpoint's alpha.
    prefix = os.path.join(results["model_dir"],
                          "model.ckpt-%%d" %% results["checkpoint_step"])
    reader = tf.train.load_checkpoint(prefix)
    names = sorted(reader.get_variable_to_shape_map())
    values = [reader.get_tensor(n) for n in names]
    alphas = [n for n in names if n.endswith("mixture/alpha_logits")]
    for i, name in enumerate(alphas):  # [functions, heads]; one per layer
      k = names.index(name)
      logits = np.zeros(values[k].shape)
      logits[0] = 0.5 * (i + 1) + 0.25 * np.arange(logits.shape[1])
      values[k] = logits.astype(values[k].dtype)  # bfloat16 masters
    with tf.Graph().as_default(), tf.Session() as sess:
      sess.run(tf.raw_ops.SaveV2(
          prefix=prefix, tensor_names=names,
          shape_and_slices=[""] * len(names),
          tensors=[tf.constant(v) for v in values]))
    # Then one more step: train() resumes from the model directory.
    model = mtf_synthesizer.MtfModel(model_dir=results["model_dir"],
                                     **example["model_kwargs"](64))
    model.train("pydocs_span_corruption",
                steps=results["checkpoint_step"] + 1)
    # And eval, on a task small enough to decode whole (8 examples).
    gin.bind_parameter("recall_config.num_validation", 8)
    model.eval("key_value_recall", checkpoint_steps=-1,
               compute_sequence_length=False)
    print("RESULTS " + json.dumps(results))
""" % FINETUNE_STEPS)


@pytest.fixture(scope="module")
def example(trained_models, tmp_path_factory):
  pretrained, trained = trained_models[conftest.MESH_ATTENTION]
  assert trained.returncode == 0, trained.stderr[-3000:]
  out = str(tmp_path_factory.mktemp("python_api"))
  proc = subprocess.run(
      [sys.executable, "-c", SCRIPT,
       os.path.join(conftest.TOOLS, "python_api_example.py"), out, pretrained],
      capture_output=True, text=True, timeout=1200)
  assert proc.returncode == 0, proc.stderr[-3000:]
  (line,) = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS ")]
  return dict(json.loads(line[len("RESULTS "):]), pretrained=pretrained,
              stderr=proc.stderr)


def _values(model_dir, step):
  reader = tf.train.load_checkpoint(
      os.path.join(model_dir, "model.ckpt-%d" % step))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_finetune_starts_the_variant_from_the_plain_checkpoint(example):
  assert example["checkpoint_step"] == STEPS + FINETUNE_STEPS
  start = _values(example["model_dir"], STEPS)
  source = _values(example["pretrained"], STEPS)
  assert not any("SynthesizerAttention" in n for n in source)
  for name in ("q", "k", "v", "o", "relative_attention_bias"):
    np.testing.assert_array_equal(
        start[ATTN + "SynthesizerAttention/" + name],
        source[ATTN + "SelfAttention/" + name], err_msg=name)
  assert start[ATTN + "SynthesizerAttention/random/R"].shape == (2, 64, 64)
  np.testing.assert_array_equal(
      start[ATTN + "SynthesizerAttention/mixture/alpha_logits"], 0.0)
  assert "init_from_t5: " in example["stderr"]
  operative = open(os.path.join(example["model_dir"],
                                "operative_config.gin")).read()
  assert "SynthesizerAttention.synthesizers" in operative
  # And it trained: R moved.
  end = _values(example["model_dir"], STEPS + FINETUNE_STEPS)
  assert not np.array_equal(end[ATTN + "SynthesizerAttention/random/R"],
                            start[ATTN + "SynthesizerAttention/random/R"])


def test_predict_and_score(example):
  assert len(example["decodes"]) == len(example["inputs"])
  assert all(d.startswith("b'") or d.startswith('b"')
             for d in example["decodes"])
  scores = example["scores"]
  assert len(scores) == len(example["targets"])
  assert all(math.isfinite(s) and s < 0 for s in scores)


def test_exported_model_serves_the_predictions(example):
  served = conftest.tf_only_predict(
      [(example["saved_model"], example["inputs"], 1)])
  outputs = [r["output"] for r in served[example["saved_model"]]]
  predicted = conftest.cli_decodes_from_lines(example["decodes"])
  assert outputs == predicted


def test_mixture_weights_reach_tensorboard_on_cpu(example):
  """alpha per layer and function = softmax(alpha_logits), head average."""
  step = example["checkpoint_step"]
  logits = _values(example["model_dir"], step)
  scalars = events.read_scalars(example["model_dir"])
  layers = sorted(n[:-len("/alpha_logits")] for n in logits
                  if n.endswith("mixture/alpha_logits"))
  assert len(layers) == 4  # 2 encoder, 2 decoder self-attention layers
  moved = 0
  for layer in layers:
    w = logits[layer + "/alpha_logits"].astype(np.float64)  # [2, heads]
    alpha = np.exp(w) / np.exp(w).sum(axis=0, keepdims=True)
    for i, name in enumerate(("random", "dot_product")):
      points = {s: v for s, _, v in scalars["%s/alpha_%s" % (layer, name)]}
      # Written at the first step of each run: the resumed run's first step
      # reads the last checkpoint.
      assert step + 1 in points, sorted(points)
      np.testing.assert_allclose(points[step + 1], alpha[i].mean(),
                                 atol=1e-6)
      moved += abs(alpha[i].mean() - 0.5) > 1e-2
  # The comparison can fail: the logits were set far from their start 0.
  assert moved == 2 * len(layers)
  assert "loss" in scalars


def test_eval_writes_the_task_metric(example):
  scalars = events.read_scalars(
      os.path.join(example["model_dir"], "validation_eval"))
  (step, _, accuracy), = scalars["eval/key_value_recall/accuracy"]
  assert step == example["checkpoint_step"] + 1
  assert 0 <= accuracy <= 100
  # One target per example (letters; the byte decodes of a barely trained
  # model hold control characters, newlines among them, so their file is
  # not counted by lines).
  folder = os.path.join(example["model_dir"], "validation_eval")
  with open(os.path.join(folder, "key_value_recall_targets")) as f:
    assert len(f.read().rstrip("\n").split("\n")) == 8
  assert os.path.getsize(os.path.join(
      folder, "key_value_recall_%d_predictions" % step)) > 0
