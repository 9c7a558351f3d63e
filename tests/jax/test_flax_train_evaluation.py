# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Evaluation with the task's metrics: seqio's Evaluator, decoding, eval/."""

import functools
import io
import os

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import seqio

from mtf_synthesizer.flax_model import decoding
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.flax_train import data
from mtf_synthesizer.flax_train import evaluation
from mtf_synthesizer.flax_train import partitioning
from mtf_synthesizer.flax_train import summaries
from mtf_synthesizer.flax_train import train as train_lib
from mtf_synthesizer.flax_train import trainer as trainer_lib

TINY = dict(vocab_size=384, d_model=16, num_heads=2, head_dim=8, d_ff=32,
            num_encoder_layers=1, num_decoder_layers=1, max_length=16,
            dropout_rate=0.0, variant="random_dense")
LENGTHS = {"inputs": 16, "targets": 4}
BATCH = 4
# The test task: "x<n>" -> "<n>", n = 0..10 (distinct targets), read back
# as integers by its postprocessor (-1 for anything else).
DIGITS = "evaluation_test_digits"
NUM_DIGITS = 11
SCORED = "evaluation_test_scored"
TARGETS_ONLY = "evaluation_test_targets_only"


def _postprocess(text, example=None, is_target=False):
  del example, is_target
  text = text.strip()
  return int(text) if text.isdigit() else -1


def mean_values(targets, predictions):
  """A metric that shows what the postprocessor gave the metric functions."""
  return {"mean_target": float(np.mean(targets)),
          "mean_prediction": float(np.mean(predictions))}


def _digits_dataset(split, shuffle_files=False, seed=None,
                    with_inputs=True):
  del split, shuffle_files, seed
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  examples = {"targets": [str(n) for n in range(NUM_DIGITS)]}
  if with_inputs:
    examples["inputs"] = ["x%d" % n for n in range(NUM_DIGITS)]
  return tf.data.Dataset.from_tensor_slices(examples)


def _register():
  from t5.evaluation import metrics  # pylint: disable=g-import-not-at-top
  features = {k: seqio.Feature(seqio.ByteVocabulary()) for k in
              ("inputs", "targets")}
  preprocessors = [seqio.preprocessors.tokenize,
                   seqio.preprocessors.append_eos_after_trim]
  for name, fns in ((DIGITS, [metrics.accuracy, mean_values]),
                    (SCORED, [lambda targets, scores: {}]),
                    (TARGETS_ONLY, [metrics.accuracy, mean_values])):
    with_inputs = name != TARGETS_ONLY
    seqio.TaskRegistry.remove(name)
    seqio.TaskRegistry.add(
        name, source=seqio.FunctionDataSource(
            functools.partial(_digits_dataset, with_inputs=with_inputs),
            splits=("validation",)),
        preprocessors=preprocessors,
        output_features=(features if with_inputs else
                         {"targets": features["targets"]}),
        postprocess_fn=_postprocess, metric_fns=fns)


@pytest.fixture(scope="module", autouse=True)
def tasks():
  data.import_modules()  # t5_tasks: listops
  _register()
  yield
  for name in (DIGITS, SCORED, TARGETS_ONLY):
    seqio.TaskRegistry.remove(name)


@pytest.fixture(scope="module")
def trainer():
  model = t5.EncoderDecoder(t5.T5Config(**TINY))
  mesh = partitioning.make_mesh(partitioning.mesh_shape())
  return trainer_lib.Trainer(model, optax.sgd(0.0), mesh)


@pytest.fixture(scope="module")
def params(trainer):
  return trainer.init_state(seed=3).params


def _evaluator(trainer, task=DIGITS, **kwargs):
  return evaluation.DecodeEvaluator(trainer, task, "validation", LENGTHS,
                                    BATCH, **kwargs)


def _batch_reference(values, transform):
  """Applies `transform` to each padded batch of `values` (None: padding)."""
  out = []
  for start in range(0, len(values), BATCH):
    rows = list(values[start:start + BATCH])
    rows += [None] * (BATCH - len(rows))
    out.extend(transform(rows)[:len(values) - start])
  return out


def test_greedy_predictions_are_greedy_decode(trainer, params):
  """Batched, padded, sharded, indexed: greedy_decode's tokens, unshuffled
  or in any order."""
  ev = _evaluator(trainer)
  ds = ev.evaluator.cached_model_datasets[DIGITS]
  got = ev.predict(params, ds)
  assert [i for i, _ in got] == list(range(NUM_DIGITS))
  inputs = np.stack([f["encoder_input_tokens"]
                     for _, f in ds.as_numpy_iterator()])
  want, _ = jax.jit(functools.partial(
      decoding.greedy_decode, trainer.model, max_decode_length=4))(
          params, encoder_input_tokens=jnp.asarray(inputs))
  np.testing.assert_array_equal(np.stack([t for _, t in got]),
                                np.asarray(want))
  shuffled = dict(ev.predict(params, ds.shuffle(NUM_DIGITS, seed=1)))
  assert sorted(shuffled) == list(range(NUM_DIGITS))
  for i, tokens in got:
    np.testing.assert_array_equal(shuffled[i], tokens)


def test_known_outputs_give_known_metrics(trainer, params, monkeypatch):
  """The targets themselves score perfectly; each batch's rows reversed
  score what NumPy says (the padding row predicts "", i.e. -1)."""
  monkeypatch.setattr(evaluation, "decode_batch",
                      lambda model, p, batch, *a: batch[
                          trainer_lib.TARGETS])
  assert _evaluator(trainer).evaluate(params) == {
      DIGITS + "/accuracy": 100.0, DIGITS + "/mean_target": 5.0,
      DIGITS + "/mean_prediction": 5.0}
  monkeypatch.setattr(evaluation, "decode_batch",
                      lambda model, p, batch, *a: batch[
                          trainer_lib.TARGETS][::-1])
  got = _evaluator(trainer).evaluate(params, step=7)
  targets = list(range(NUM_DIGITS))
  predicted = [-1 if p is None else p for p in
               _batch_reference(targets, lambda rows: rows[::-1])]
  assert predicted[-3:] == [-1, 10, 9]
  assert got == pytest.approx({
      DIGITS + "/accuracy": 100 * np.mean(np.equal(predicted, targets)),
      DIGITS + "/mean_target": np.mean(targets),
      DIGITS + "/mean_prediction": np.mean(predicted)})
  assert got[DIGITS + "/accuracy"] < 100


def test_examples_capped(trainer, params, monkeypatch):
  monkeypatch.setattr(evaluation, "decode_batch",
                      lambda model, p, batch, *a: batch[
                          trainer_lib.TARGETS])
  got = _evaluator(trainer, num_examples=5).evaluate(params)
  assert got[DIGITS + "/mean_target"] == 2.0  # 0..4


def test_beam_size_picks_beam_search(trainer, params, monkeypatch):
  """beam_size > 1 calls decoding.beam_search and keeps the best beam."""
  calls = []

  def fake_beam_search(model, p, max_decode_length, *, beam_size, alpha,
                       encoder_input_tokens=None):
    calls.append((max_decode_length, beam_size, alpha))
    # "x<n>" EOS -> "<n>" EOS: the targets, given the second-best score.
    right = encoder_input_tokens[:, 1:1 + max_decode_length]
    wrong = jnp.zeros_like(right)
    tokens = jnp.stack([wrong, right, wrong], axis=1)
    scores = jnp.broadcast_to(jnp.array([-2.0, -1.0, -3.0]),
                              (right.shape[0], 3))
    return tokens, scores

  monkeypatch.setattr(decoding, "beam_search", fake_beam_search,
                      raising=False)
  got = _evaluator(trainer, beam_size=3, alpha=0.8).evaluate(params)
  assert got[DIGITS + "/accuracy"] == 100.0
  assert calls == [(4, 3, 0.8)]  # traced once
  monkeypatch.delattr(decoding, "beam_search")
  with pytest.raises(evaluation.EvaluationError, match="beam_search"):
    _evaluator(trainer, beam_size=3)


def test_decoder_only(monkeypatch):
  """A decoder-only model: seqio's LMFeatureConverter, tasks of targets
  only."""
  model = t5.DecoderOnly(t5.T5Config(**TINY))
  lm = trainer_lib.Trainer(model, optax.sgd(0.0), partitioning.make_mesh(
      partitioning.mesh_shape()))
  monkeypatch.setattr(evaluation, "decode_batch",
                      lambda model, p, batch, *a: batch[
                          trainer_lib.TARGETS])
  ev = evaluation.DecodeEvaluator(lm, TARGETS_ONLY, "validation",
                                  {"targets": 4}, BATCH)
  assert ev.max_decode_length == 4
  zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype),
                       lm.abstract_params)
  assert ev.evaluate(zeros) == {
      TARGETS_ONLY + "/accuracy": 100.0, TARGETS_ONLY + "/mean_target": 5.0,
      TARGETS_ONLY + "/mean_prediction": 5.0}
  with pytest.raises(evaluation.EvaluationError, match="targets only"):
    evaluation.DecodeEvaluator(lm, DIGITS, "validation", LENGTHS, BATCH)


def test_refused_tasks(trainer):
  with pytest.raises(evaluation.EvaluationError, match="score metrics"):
    _evaluator(trainer, task=SCORED)
  with pytest.raises(evaluation.EvaluationError, match="no task"):
    evaluation.DecodeEvaluator(trainer, DIGITS, "train", LENGTHS, BATCH)


def test_train_writes_the_task_metrics(tmp_path):
  """A run on listops decodes at the end: listops/accuracy in eval/."""
  gin.clear_config()
  gin.parse_config(["T5Config.%s = %r" % kv for kv in TINY.items()])
  stream = io.StringIO()
  try:
    run = train_lib.train(
        model_dir=str(tmp_path), mixture_or_task_name="listops",
        task_feature_lengths=LENGTHS, batch_size=BATCH, train_steps=2,
        learning_rate_schedule=lambda step, total_train_steps: 0.01,
        log_every_steps=2, decode_eval_every_steps=2,
        decode_eval_examples=6, stream=stream)
  finally:
    gin.clear_config()
  assert list(run.decode_metrics) == [2]
  assert list(run.decode_metrics[2]) == ["listops/accuracy"]
  accuracy = run.decode_metrics[2]["listops/accuracy"]
  assert accuracy in [100 * k / 6 for k in range(7)]
  scalars = summaries.read_scalars(os.path.join(tmp_path, "eval"))
  assert scalars["listops/accuracy"] == {2: pytest.approx(accuracy)}
  assert "eval at step 2: listops/accuracy %.4f" % accuracy in (
      stream.getvalue())


def test_train_refuses_before_writing(tmp_path):
  gin.clear_config()
  gin.parse_config(["T5Config.%s = %r" % kv for kv in TINY.items()])
  model_dir = os.path.join(tmp_path, "md")
  try:
    with pytest.raises(train_lib.TrainError, match="score metrics"):
      train_lib.train(
          model_dir=model_dir, mixture_or_task_name=SCORED,
          task_feature_lengths=LENGTHS, batch_size=BATCH, train_steps=2,
          learning_rate_schedule=lambda step, total_train_steps: 0.01,
          train_split="validation", decode_eval_every_steps=1)
  finally:
    gin.clear_config()
  assert not os.path.exists(model_dir)
