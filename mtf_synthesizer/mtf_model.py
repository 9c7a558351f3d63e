# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""T5's Python API (`t5.models.MtfModel`) with a Synthesizer variant.

`t5.models.MtfModel` parses an operative config before most of its
methods: `finetune` the pretrained model's, `eval`, `predict`, `score` and
`export` the model directory's. A released T5 checkpoint's operative config
binds the layer stacks to mesh's `SelfAttention`, so a variant chosen before
`finetune` is silently undone. Every one of those methods then builds its
estimator through `MtfModel.estimator`; this subclass applies the variant's
gin file there, that is after whatever operative config T5 has just parsed
and before the constructor's `extra_gin_bindings` (which still win). When
the estimator starts from a checkpoint (`finetune`, `train(init_checkpoint=
...)`), `synthesizer/init_from_t5.gin` is applied too, so that q/k/v/o come
from a vanilla T5 checkpoint's `SelfAttention` (or from a Synthesizer's own
names) and nothing else is re-initialised silently (`checkpoints/from_t5.py`).

T5's own default schedule works here: `t5.models.MtfModel` hands its
`learning_rate_schedule` (mesh's `learning_rate_schedule_noam` unless given)
to the estimator without the run's `total_train_steps`, which mesh's
`utils.run` (the stock CLI) binds. `train` and `finetune` here bind it as
the CLI does: the absolute step the run trains to, and a list of factors
becomes mesh's `product_learning_rate`.

  model = mtf_synthesizer.MtfModel(
      variant="random_vanilla", model_dir=..., tpu=None, ...)
  model.finetune("glue_sst2_v002", finetune_steps=...,
                 pretrained_model_dir="gs://t5-data/pretrained_models/small")
  model.predict(input_file=..., output_file=...)
  model.export(export_dir=...)
"""

import functools
import os
from typing import Any, List, Optional, Sequence, Tuple, Union

import gin
from mesh_tensorflow.transformer import learning_rate_schedules
from mesh_tensorflow.transformer import utils as mtf_utils
import t5.models
import tensorflow.compat.v1 as tf

from mtf_synthesizer import attentions
from mtf_synthesizer.checkpoints import from_t5
from mtf_synthesizer.stock_cli import gin_path

INIT_FROM_T5_GIN = "synthesizer/init_from_t5.gin"


def variant_gin_file(variant: Optional[str]) -> Optional[str]:
  """The gin file that selects a variant.

  Args:
    variant: a variant's name (`random_vanilla`, the stem of its file under
      `gin/synthesizer/`) or paper label (`R+V`); None or
      `attentions.MESH_SELF_ATTENTION.name` for mesh's own attention.

  Returns:
    "synthesizer/<name>.gin", or None for mesh's own attention.

  Raises:
    ValueError: an unknown variant (the message lists the known ones).
  """
  if variant is None:
    return None
  if variant.endswith(".gin"):
    variant = variant[:-len(".gin")]
  if variant.startswith(gin_path.VARIANT_FOLDER + "/"):
    variant = variant[len(gin_path.VARIANT_FOLDER) + 1:]
  return attentions.get(variant).gin_file


def schedule_with_total_steps(schedule: Any, total_train_steps: int) -> Any:
  """A learning-rate schedule as mesh's `utils.run` hands it to the model.

  Args:
    schedule: a number (a constant rate), a list of factors for mesh's
      `product_learning_rate`, or a function of `step` and
      `total_train_steps` (e.g. mesh's `learning_rate_schedule_noam`).
    total_train_steps: the absolute step the run trains to.

  Returns:
    The number unchanged, or a function of `step` alone.
  """
  if isinstance(schedule, list):
    return functools.partial(learning_rate_schedules.product_learning_rate,
                             total_train_steps=total_train_steps,
                             factors=schedule)
  if callable(schedule):
    return functools.partial(schedule, total_train_steps=total_train_steps)
  return schedule


class MtfModel(t5.models.MtfModel):
  """`t5.models.MtfModel` that keeps a Synthesizer variant (see module doc).

  Every method and argument is T5's; `variant` and `extra_gin_files` are
  the only additions.
  """

  def __init__(self,
               model_dir: str,
               tpu: Optional[str],
               *args,
               variant: Optional[str] = None,
               extra_gin_files: Sequence[str] = (),
               **kwargs):
    """Builds the model.

    Args:
      model_dir: as in `t5.models.MtfModel`.
      tpu: as in `t5.models.MtfModel` (None: the local CPU or GPU).
      *args: `t5.models.MtfModel`'s other positional arguments.
      variant: a variant's name (`"random_vanilla"`: the stem of a file
        under `gin/synthesizer/`) or paper label (`"R+V"`). None (or
        `"t5_attention"`) keeps whatever the parsed configs say, e.g. to
        evaluate, decode or export a model directory trained with a variant
        (its operative config names it).
      extra_gin_files: gin files applied after the variant's each time, e.g.
        `["synthesizer/keep_decoder_self_attention.gin"]`.
      **kwargs: `t5.models.MtfModel`'s other keyword arguments, e.g.
        `batch_size`, `sequence_length`, `mesh_shape`, `extra_gin_bindings`.

    Raises:
      ValueError: an unknown variant.
    """
    self._variant_gin_file = variant_gin_file(variant)
    self._extra_gin_files = tuple(extra_gin_files)
    self._total_train_steps = None  # set while `train` builds its estimator
    super().__init__(model_dir, tpu, *args, **kwargs)

  @property
  def variant_gin_files(self) -> Sequence[str]:
    """The gin files applied before each estimator is built."""
    head = (self._variant_gin_file,) if self._variant_gin_file else ()
    return head + self._extra_gin_files

  def estimator(self, vocabulary, init_checkpoint=None, disable_tpu=False,
                score_in_predict_mode=False, sequence_length=None):
    """T5's estimator, after applying the variant (see module doc).

    Args:
      vocabulary: as in `t5.models.MtfModel.estimator`.
      init_checkpoint: as there; when set (and a variant is chosen), the
        checkpoint is read through `synthesizer/init_from_t5.gin`, whose
        mapping is told this checkpoint.
      disable_tpu: as there.
      score_in_predict_mode: as there.
      sequence_length: as there.

    Returns:
      A `tf.estimator` (TPUEstimator) for the chosen variant.
    """
    files = list(self.variant_gin_files)
    if init_checkpoint and self._variant_gin_file:
      files.append(INIT_FROM_T5_GIN)
    with gin.unlock_config():
      for path in files:
        gin.parse_config_file(path)
      if init_checkpoint:  # mesh hands it to the mapping only as an argument
        gin.bind_parameter(from_t5.MAPPING + ".checkpoint", init_checkpoint)
    schedule = self._learning_rate_schedule
    if self._total_train_steps is not None:
      self._learning_rate_schedule = schedule_with_total_steps(
          schedule, self._total_train_steps)
    try:
      return super().estimator(
          vocabulary, init_checkpoint=init_checkpoint,
          disable_tpu=disable_tpu,
          score_in_predict_mode=score_in_predict_mode,
          sequence_length=sequence_length)
    finally:
      self._learning_rate_schedule = schedule

  def train(self, mixture_or_task_name: str, steps: int,
            init_checkpoint: Optional[str] = None,
            split: str = "train") -> None:
    """T5's `train`, whose schedule knows the run's length (see module doc).

    Args:
      mixture_or_task_name: as in `t5.models.MtfModel.train`.
      steps: as there: the absolute step to train to (`finetune` passes the
        checkpoint's step plus its `finetune_steps`); also the schedule's
        `total_train_steps`, as `utils.run.train_steps` is the CLI's.
      init_checkpoint: as there.
      split: as there.
    """
    self._total_train_steps = steps
    try:
      super().train(mixture_or_task_name, steps,
                    init_checkpoint=init_checkpoint, split=split)
    finally:
      self._total_train_steps = None

  def score(self,
            inputs: Union[None, str, Sequence[str]] = None,
            targets: Union[None, str, Sequence[str]] = None,
            mixture_or_task_name: Optional[str] = None,
            mixture_or_task_split: Optional[str] = None,
            scores_file: Optional[str] = None,
            checkpoint_steps: int = -1,
            vocabulary=None
            ) -> Tuple[List[float], Optional[List[str]]]:
    """T5's `score`, which also works off TPU.

    Off TPU, mesh 0.1.21 hands the scoring loop already-decoded strings,
    which `save_scores` then fails to decode again ("'bytes' object has no
    attribute 'tolist'"), for every model. Here the example text is not
    re-decoded off TPU (`save_scores.save_example_text = False`); the
    targets returned are the given ones.

    Args:
      inputs: as in `t5.models.MtfModel.score`: a file name or strings.
      targets: as there.
      mixture_or_task_name: as there.
      mixture_or_task_split: as there.
      scores_file: as there (`<scores_file>.scores`, one per line).
      checkpoint_steps: as there.
      vocabulary: as there.

    Returns:
      (scores, targets): a log-likelihood per example, in order, and the
      scored target strings (None when scoring a task off TPU).
    """
    off_tpu = not self._tpu
    if off_tpu:
      with gin.unlock_config():
        gin.bind_parameter("save_scores.save_example_text", False)
    result = super().score(
        inputs=inputs, targets=targets,
        mixture_or_task_name=mixture_or_task_name,
        mixture_or_task_split=mixture_or_task_split, scores_file=scores_file,
        checkpoint_steps=checkpoint_steps, vocabulary=vocabulary)
    if not off_tpu:
      return result[0], result[-1]
    if targets is None:
      return list(result), None
    if isinstance(targets, str):
      targets = mtf_utils.get_inputs_from_file(targets)
    targets = list(targets)
    if len(targets) < len(result):  # one target for every input
      targets = targets * len(result)
    return list(result), targets

  def eval(self, mixture_or_task_name: str, checkpoint_steps=None,
           summary_dir: Optional[str] = None, split: str = "validation",
           eval_with_score: bool = False,
           compute_sequence_length: bool = True) -> None:
    """T5's `eval`, which also works in a local model directory.

    T5 writes the targets and predictions into `summary_dir` without
    creating it, which only a bucket forgives; here it is created first.

    Args:
      mixture_or_task_name: as in `t5.models.MtfModel.eval`.
      checkpoint_steps: as there.
      summary_dir: as there (default `<model_dir>/<split>_eval`).
      split: as there.
      eval_with_score: as there.
      compute_sequence_length: as there; with True the longest example sets
        the length, which must not exceed `SynthesizerAttention.max_length`.
    """
    summary_dir = summary_dir or os.path.join(self._model_dir,
                                              "%s_eval" % split)
    tf.io.gfile.makedirs(summary_dir)
    super().eval(mixture_or_task_name, checkpoint_steps=checkpoint_steps,
                 summary_dir=summary_dir, split=split,
                 eval_with_score=eval_with_score,
                 compute_sequence_length=compute_sequence_length)
