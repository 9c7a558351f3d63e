# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Evaluation with the task's own metrics: decoding, as T5X's infer_eval.

`seqio.Evaluator` reads the task's (or each of a mixture's tasks') eval
split once, converts it with the model's feature converter (`data.converter`:
`EncDecFeatureConverter(pack=False)` or `LMFeatureConverter(pack=False)`)
and keeps it in memory. Each evaluation then decodes every example with the
Flax model and the attention cache (`flax_model.decoding`: greedy at
`beam_size` 1, `beam_search` with its best beam above), seqio decodes the
tokens with the targets' vocabulary (up to the first EOS), applies the
task's postprocessor to the predictions and the targets, and calls the
task's metric functions (t5's accuracy, F1, BLEU, ROUGE, ...). The scalars
come back named as T5X names them, `<task>/<metric>` (e.g.
`listops/accuracy`); the trainer writes them to `model_dir/eval/`.

The examples are decoded in batches of the training's global batch, the
last one padded with empty rows whose predictions are dropped; the decode
length is the targets' feature length. Several hosts: each decodes its
shard of the split (`tf.data.Dataset.shard` by process index), every host
runs the same number of batches, and the predictions are gathered on every
host (`multihost_utils.process_allgather`); the chief computes the metrics.

Only predictions are computed: a task that declares score metrics (a
`(targets, scores)` metric such as `t5_tasks.metrics.perplexity`) or
metrics of predictions with auxiliary values is refused; its teacher-forced
evaluation (`train.eval_every_steps`) reports `neg_log_perplexity`.

Imports TensorFlow and seqio when an Evaluator is built, not when imported.
"""

import math
import numbers
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import jax
from jax.experimental import multihost_utils
import jax.numpy as jnp
import numpy as np

from mtf_synthesizer.flax_model import decoding
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.flax_train import data as data_lib
from mtf_synthesizer.flax_train import partitioning
from mtf_synthesizer.flax_train import trainer as trainer_lib

BEAM_SEARCH = "beam_search"


class EvaluationError(ValueError):
  """A task or setting that decoding evaluation cannot evaluate."""


def decode_batch(model: Any, params: Any, batch: Mapping[str, jax.Array],
                 max_decode_length: int, beam_size: int = 1,
                 alpha: float = 0.6) -> jax.Array:
  """The predicted target tokens of a batch (traced inside jit).

  Args:
    model: an EncoderDecoder or a DecoderOnly.
    params: its parameters.
    batch: the model features (`encoder_input_tokens` for an
      encoder-decoder; the rows of `decoder_target_tokens`).
    max_decode_length: the decode steps, the targets' length.
    beam_size: 1: greedy decoding; more: `decoding.beam_search`'s best beam.
    alpha: beam search's length penalty exponent.

  Returns:
    [batch, max_decode_length] int32 tokens (seqio's vocabularies decode
    them up to the first EOS).

  Raises:
    EvaluationError: beam_size > 1 and `decoding` has no beam search.
  """
  encoder_decoder = isinstance(model, t5.EncoderDecoder)
  rows = batch[trainer_lib.TARGETS].shape[0]
  inputs = batch[trainer_lib.ENCODER_INPUTS] if encoder_decoder else None
  if beam_size <= 1:
    tokens, _ = decoding.greedy_decode(
        model, params, max_decode_length, encoder_input_tokens=inputs,
        batch_size=None if encoder_decoder else rows)
    return tokens
  search = beam_search_fn()
  kwargs = {} if encoder_decoder else {"batch_size": rows}
  tokens, scores = search(model, params, max_decode_length,
                          beam_size=beam_size, alpha=alpha,
                          encoder_input_tokens=inputs, **kwargs)
  best = jnp.argmax(scores, axis=-1)
  return jnp.take_along_axis(tokens, best[:, None, None], axis=1)[:, 0]


def beam_search_fn() -> Callable[..., Tuple[jax.Array, jax.Array]]:
  """`flax_model.decoding.beam_search`.

  Raises:
    EvaluationError: this version of `decoding` has none.
  """
  search = getattr(decoding, BEAM_SEARCH, None)
  if search is None:
    raise EvaluationError(
        "decode_beam_size > 1 needs mtf_synthesizer.flax_model.decoding."
        "beam_search, which this version lacks; use decode_beam_size=1 "
        "(greedy decoding)")
  return search


def _scalars(task_name: str, metrics: Mapping[str, Any]) -> Dict[str, float]:
  """A task's scalar metrics as `<task>/<metric>` -> float."""
  out = {}
  for name, value in metrics.items():
    value = getattr(value, "value", value)  # seqio's metrics.Scalar
    if isinstance(value, np.ndarray) and value.shape == ():
      value = value.item()
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
      out["%s/%s" % (task_name, name)] = float(value)
  return out


class DecodeEvaluator:
  """seqio's Evaluator of a task's eval split, with the Flax model decoding.

  Attributes:
    trainer: the Trainer (its model, mesh and shardings).
    evaluator: the seqio.Evaluator (its cached datasets).
    batch_size: the global batch of a decode.
    max_decode_length: the targets' feature length.
    beam_size: 1: greedy; more: beam search.
    alpha: beam search's length penalty exponent.
  """

  def __init__(self, trainer: trainer_lib.Trainer, mixture_or_task_name: str,
               split: str, task_feature_lengths: Mapping[str, int],
               batch_size: int, num_examples: Optional[int] = None,
               beam_size: int = 1, alpha: float = 0.6):
    """Reads and caches the split (each task's first `num_examples`).

    Args:
      trainer: the Trainer.
      mixture_or_task_name: a registered task or mixture.
      split: the split evaluated.
      task_feature_lengths: the features' lengths; the targets' is the
        decode length.
      batch_size: the global batch of a decode (all hosts).
      num_examples: the examples of each task (None: the whole split).
      beam_size: 1: greedy decoding; more: beam search.
      alpha: beam search's length penalty exponent.

    Raises:
      EvaluationError: no task with this split and metrics, a task with
        score metrics, a task with inputs for a decoder-only model, a batch
        the hosts or the data axis do not divide, beam search asked for and
        absent.
    """
    import seqio  # pylint: disable=g-import-not-at-top
    self.trainer = trainer
    self.batch_size = batch_size
    self.beam_size = int(beam_size)
    self.alpha = float(alpha)
    if self.beam_size < 1:
      raise EvaluationError("decode_beam_size must be at least 1, got %d"
                            % self.beam_size)
    if self.beam_size > 1:
      beam_search_fn()
    hosts = jax.process_count()
    ways = trainer.mesh.shape[partitioning.DATA]
    if batch_size % hosts or batch_size % ways:
      raise EvaluationError(
          "a decode batch of %d sequences does not divide over %d hosts and "
          "the %d devices of the mesh's data axis" % (batch_size, hosts, ways))
    decoder_only = isinstance(trainer.model, t5.DecoderOnly)
    lengths = dict(task_feature_lengths)
    if decoder_only:
      lengths = {"targets": lengths["targets"]}
    self.max_decode_length = int(lengths["targets"])
    task = data_lib.get_task(mixture_or_task_name)
    for sub in seqio.get_subtasks(task):
      if decoder_only and set(sub.output_features) != {"targets"}:
        raise EvaluationError(
            "%s has the features %s: a decoder-only model decodes tasks of "
            "targets only (seqio's LMFeatureConverter)" % (
                sub.name, ", ".join(sorted(sub.output_features))))
      if split in sub.splits and (sub.score_metric_fns or
                                  sub.predict_with_aux_metric_fns):
        raise EvaluationError(
            "%s declares score metrics or metrics with auxiliary values; "
            "decoding evaluation computes metrics of predictions only (the "
            "teacher-forced evaluation reports neg_log_perplexity)"
            % sub.name)
    self.evaluator = seqio.Evaluator(
        mixture_or_task_name, feature_converter=data_lib.converter(
            decoder_only), eval_split=split, sequence_length=lengths,
        num_examples=num_examples, shuffle=False,
        async_compute_metrics=False)
    if not self.evaluator.eval_tasks:
      raise EvaluationError(
          "%s has no task with a %r split and metric functions: nothing to "
          "evaluate by decoding" % (mixture_or_task_name, split))
    self._decode = jax.jit(self._decode_fn,
                           in_shardings=(trainer.params_shardings, None))

  def _decode_fn(self, params, batch):
    return decode_batch(self.trainer.model, params, batch,
                        self.max_decode_length, self.beam_size, self.alpha)

  def predict_fn(self, params: Any
                 ) -> Callable[..., List[Tuple[int, np.ndarray]]]:
    """seqio's predict_fn of the parameters.

    Args:
      params: the parameters (sharded as the train state's).

    Returns:
      A function of an enumerated dataset of model features, (index,
      features) pairs, returning [(index, predicted tokens [length])] for
      every example of the dataset (all hosts').
    """

    def predict(dataset, model_feature_shapes=None):
      del model_feature_shapes
      return self.predict(params, dataset)

    return predict

  def predict(self, params: Any, dataset: Any
              ) -> List[Tuple[int, np.ndarray]]:
    """Decodes an enumerated dataset (see `predict_fn`).

    Args:
      params: the parameters.
      dataset: a tf.data.Dataset of (index, features) pairs.

    Returns:
      [(index, tokens)] of every example, all hosts'.
    """
    hosts, host = jax.process_count(), jax.process_index()
    local = self.batch_size // hosts
    count = int(dataset.cardinality())
    if count < 0:  # unknown: counted
      count = sum(1 for _ in dataset)
    num_batches = math.ceil(count / self.batch_size)
    if hosts > 1:
      dataset = dataset.shard(hosts, host)
    names = trainer_lib.feature_names(self.trainer.model)
    batches = dataset.batch(local).as_numpy_iterator()
    out = []
    for _ in range(num_batches):
      indices, features = next(batches, (np.zeros((0,), np.int64), None))
      rows = len(indices)
      batch = {}
      for name in names:
        if features is None:  # this host's shard is done; the others' not
          value = np.zeros((0, self._length(name)), np.int32)
        else:
          value = np.asarray(features[name], np.int32)
        batch[name] = np.pad(value, ((0, local - rows), (0, 0)))
      ids = np.pad(np.asarray(indices, np.int32), (0, local - rows),
                   constant_values=-1)
      global_batch = self.trainer.global_batch(batch)
      global_ids = jax.make_array_from_process_local_data(
          self.trainer.batch_sharding, ids, (self.batch_size,))
      with self.trainer.mesh:
        tokens = self._decode(params, global_batch)
      tokens, ids = _gather(tokens), _gather(global_ids)
      out.extend((int(i), t) for i, t in zip(ids, tokens) if i >= 0)
    return out

  def _length(self, name: str) -> int:
    shapes = self.evaluator.model_feature_shapes
    return int(shapes[name][-1])

  def evaluate(self, params: Any, step: Optional[int] = None
               ) -> Dict[str, float]:
    """Decodes the cached split and computes the tasks' metrics.

    Args:
      params: the parameters (sharded as the train state's).
      step: the step (seqio's loggers').

    Returns:
      `<task>/<metric>` -> value on the chief host (every scalar metric of
      every task); {} on the others.
    """
    chief = jax.process_index() == 0
    future, _ = self.evaluator.evaluate(
        compute_metrics=chief, step=step, predict_fn=self.predict_fn(params))
    results = future.result() if chief else None
    out = {}
    for task_name, metrics in sorted((results or {}).items()):
      out.update(_scalars(task_name, metrics))
    return out

  def close(self) -> None:
    self.evaluator.close()


def _gather(array: jax.Array) -> np.ndarray:
  """A global array's value on every host."""
  if jax.process_count() == 1:
    return np.asarray(jax.device_get(array))
  return np.asarray(multihost_utils.process_allgather(array, tiled=True))
