# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The training loop: `train()`, configured by gin as T5X's `train` is.

  train.model_dir                   where checkpoints, config and metrics go
  train.mixture_or_task_name        a seqio task or mixture (t5_tasks')
  train.task_feature_lengths        {"inputs": 512, "targets": 114}
  train.batch_size                  sequences per step (all hosts)
  train.train_steps                 the last step (mesh's train_steps)
  train.learning_rate_schedule      @learning_rate_schedules.<one of mesh's>
  train.init_checkpoint             a mesh model directory, a converted
                                    directory or a trainer checkpoint
  train.eval_every_steps / train.eval_steps   teacher-forced evaluation
  train.decode_eval_every_steps     evaluation with the task's metrics
                                    (decoding, `evaluation`); also
                                    train.decode_eval_examples,
                                    train.decode_beam_size
  train.log_every_steps             the progress line and metrics

The model is `flax_model.make_model()` (gin/flax/ files), the optimizer
`optimizer.AdafactorOptimizer`, the mesh `partitioning.mesh_shape`, the
checkpoints `checkpoints.checkpoint_options`: each its own gin binding.

Resuming: when the model directory holds a checkpoint, training restarts
from the newest one (its state whole: step, parameters, optimizer state);
the input restarts at the batch that step would read next, and dropout's
bits depend on the step only, so the losses are those of a run that was
never stopped. Otherwise the parameters start from `init_checkpoint`
(mesh's `init_from_t5` rule for a mesh checkpoint: T5's weights restored,
the Synthesizer's own drawn) or from the initializers, the optimizer from
zero at step 0.
"""

import dataclasses
import functools
import os
import sys
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence

from etils import epath
import gin
import jax
import numpy as np

from mtf_synthesizer.flax_model import checkpointing
from mtf_synthesizer.flax_model import mesh_checkpoint
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.flax_train import checkpoints as checkpoints_lib
from mtf_synthesizer.flax_train import data as data_lib
from mtf_synthesizer.flax_train import evaluation as evaluation_lib
from mtf_synthesizer.flax_train import optimizer as optimizer_lib
from mtf_synthesizer.flax_train import partitioning
from mtf_synthesizer.flax_train import progress as progress_lib
from mtf_synthesizer.flax_train import schedules  # pylint: disable=unused-import
from mtf_synthesizer.flax_train import trainer as trainer_lib

CONFIG = "config.gin"
OPERATIVE_CONFIG = "operative_config.gin"
MODEL_CONFIG = "model.gin"
# Bindings that change no parameter: an init checkpoint may differ in them.
_DROPOUT = ("T5Config.dropout_rate ", "T5Config.attention_dropout_rate ")


class TrainError(ValueError):
  """A run that cannot start as configured (nothing has been written)."""


@dataclasses.dataclass
class Run:
  """What `train` set up and did (for callers and tests).

  Attributes:
    trainer: the Trainer.
    state: the final train state.
    start_step: the step training started (or resumed) from.
    losses: step -> the training loss of that step's batch.
    init: where the parameters came from ("checkpoint_N", a path, "fresh").
    decode_metrics: step -> the task's metrics of the decoding evaluation
      at that step (`<task>/<metric>` -> value).
  """
  trainer: trainer_lib.Trainer
  state: Any
  start_step: int
  losses: Dict[int, float]
  init: str
  decode_metrics: Dict[int, Dict[str, float]] = dataclasses.field(
      default_factory=dict)


def model_config_text(model: Any) -> str:
  """The gin bindings that rebuild the model (compared on resume)."""
  return checkpointing.config_gin(model.config,
                                  isinstance(model, t5.DecoderOnly))


def check_model_dir(model_dir: str, model: Any) -> None:
  """Refuses a model directory that holds another model's checkpoints.

  Args:
    model_dir: the run's model directory.
    model: the model the gin files build.

  Raises:
    TrainError: the directory's model.gin describes another model.
  """
  path = epath.Path(model_dir) / MODEL_CONFIG
  if not path.exists():
    if _has_checkpoints(model_dir):
      raise TrainError("%s holds checkpoints but no %s: not a directory "
                       "this trainer wrote" % (model_dir, MODEL_CONFIG))
    return
  theirs = path.read_text()
  ours = model_config_text(model)
  if theirs != ours:
    differ = sorted(set(ours.splitlines()) ^ set(theirs.splitlines()))
    raise TrainError(
        "%s holds another model than the gin files build (%s); choose "
        "another --model_dir, or the gin files of that model" % (
            model_dir, "; ".join(differ)[:400]))


def _parameters_text(model: Any) -> str:
  """model_config_text without dropout, which the parameters do not show."""
  return "\n".join(line for line in model_config_text(model).splitlines()
                   if not line.startswith(_DROPOUT))


def _has_checkpoints(model_dir: str) -> bool:
  directory = epath.Path(model_dir)
  return directory.is_dir() and any(
      child.name.startswith(checkpoints_lib.STEP_PREFIX)
      for child in directory.iterdir())


def initial_params(model: Any, init_checkpoint: Optional[str],
                   seed: int) -> Any:
  """The parameters a fresh run starts from, and where they came from.

  Args:
    model: the model.
    init_checkpoint: None (the initializers), a mesh model directory or
      checkpoint prefix (read without TensorFlow, `init_from_t5`'s rule), a
      directory `mtf-synthesizer-flax-from-mesh` wrote, or one of this
      trainer's `checkpoint_N` directories.
    seed: the initializers' seed.

  Returns:
    (host parameters or None, a description).

  Raises:
    TrainError: a checkpoint that is not there or does not fit the model.
  """
  if not init_checkpoint:
    return None, "fresh"
  path = init_checkpoint.rstrip("/")
  try:
    if (epath.Path(path) / checkpointing.CONFIG).exists():
      other, params = checkpointing.restore(path)
      if _parameters_text(other) != _parameters_text(model):
        raise TrainError("%s holds another model than the gin files build"
                         % path)
      return params, path
    if (epath.Path(path) / checkpoints_lib.STATE).exists():
      return _trainer_checkpoint_params(model, path), path
    loaded = mesh_checkpoint.load(model, path, seed=seed)
  except TrainError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise TrainError("init_checkpoint=%s: %s" % (path, e)) from e
  return loaded.params, "%s (restored %d, drawn %d: %s)" % (
      loaded.checkpoint, len(loaded.restored), len(loaded.fresh),
      ", ".join(loaded.fresh) or "none")


def _trainer_checkpoint_params(model: Any, path: str) -> Any:
  """The parameters of one of this trainer's checkpoint_N directories."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  target = jax.eval_shape(lambda: mesh_checkpoint.init_params(model))
  restored = ocp.StandardCheckpointer().restore(
      _absolute(os.path.join(path, checkpoints_lib.STATE)))
  params = restored["params"]
  want = jax.tree.map(lambda x: x.shape, target)
  have = jax.tree.map(lambda x: np.shape(x), params)
  if jax.tree.structure(want) != jax.tree.structure(have) or want != have:
    raise TrainError("%s holds another model than the gin files build"
                     % path)
  return params




@gin.configurable(module="mtf_synthesizer.flax_train")
def train(model_dir: str = gin.REQUIRED,
          mixture_or_task_name: str = gin.REQUIRED,
          task_feature_lengths: Mapping[str, int] = gin.REQUIRED,
          batch_size: int = gin.REQUIRED,
          train_steps: int = gin.REQUIRED,
          learning_rate_schedule: Callable[..., Any] = gin.REQUIRED,
          init_checkpoint: Optional[str] = None,
          train_split: str = "train",
          eval_split: str = "validation",
          eval_every_steps: int = 0,
          eval_steps: int = 10,
          log_every_steps: int = 100,
          decode_eval_every_steps: int = 0,
          decode_eval_examples: Optional[int] = None,
          decode_eval_split: Optional[str] = None,
          decode_beam_size: int = 1,
          decode_alpha: float = 0.6,
          shuffle: bool = True,
          data_seed: Optional[int] = 0,
          seed: int = 0,
          z_loss: float = 1e-4,
          loss_denominator: Optional[float] = None,
          module_imports: Sequence[str] = data_lib.DEFAULT_MODULES,
          batches: Optional[Callable[..., Iterator[Dict[str, np.ndarray]]]
                        ] = None,
          stream=sys.stderr,
          check_only: bool = False) -> Any:
  """Trains the gin-configured model to `train_steps`, resuming if it can.

  Args:
    model_dir: checkpoints (`checkpoint_N/`), `model.gin` (the model),
      `config.gin` (the run's gin config), `operative_config.gin` (what
      the run used), `train/` and `eval/` metrics.
    mixture_or_task_name: a registered seqio task or mixture.
    task_feature_lengths: the features' lengths.
    batch_size: sequences per step, over all hosts.
    train_steps: the step to stop at (mesh's train_steps: a finetune from
      a step-N checkpoint still counts from 0 here).
    learning_rate_schedule: one of `schedules` (step, total_train_steps).
    init_checkpoint: where a fresh run's parameters come from (see
      `initial_params`); ignored when model_dir holds a checkpoint.
    train_split: the training split.
    eval_split: the teacher-forced evaluation's split.
    eval_every_steps: evaluate every this many steps and at the end; 0:
      never.
    eval_steps: the evaluation's batches (None: the whole split).
    log_every_steps: the progress line's and metrics' period.
    decode_eval_every_steps: evaluate with the task's metrics (decoding,
      `evaluation.DecodeEvaluator`) every this many steps and at the end;
      0: never.
    decode_eval_examples: the examples of each task it decodes (None: the
      whole split).
    decode_eval_split: its split (None: eval_split).
    decode_beam_size: 1: greedy decoding; more: beam search's best beam.
    decode_alpha: beam search's length penalty exponent.
    shuffle: shuffle the training examples.
    data_seed: the shuffle's seed.
    seed: the initializers' and dropout's seed.
    z_loss: mesh's z_loss.
    loss_denominator: mesh's; None: batch x length.
    module_imports: modules that register the tasks.
    batches: the input (`data.batches` by default; the same arguments).
    stream: where the progress line goes.
    check_only: check the configuration, read the init checkpoint and
      build the trainer, then return its Setup (nothing written or
      compiled).

  Returns:
    The Run (the Setup with check_only).

  Raises:
    TrainError: a configuration that cannot run (before anything is
      written).
  """
  setup = prepare(model_dir, mixture_or_task_name, task_feature_lengths,
                  batch_size, train_steps, learning_rate_schedule,
                  init_checkpoint, train_split,
                  eval_split if eval_every_steps else None, seed, z_loss,
                  loss_denominator, module_imports)
  if check_only:
    return setup
  trainer = setup.trainer
  decoder = None
  if decode_eval_every_steps:
    try:  # reads the split before anything is written
      decoder = evaluation_lib.DecodeEvaluator(
          trainer, mixture_or_task_name, decode_eval_split or eval_split,
          task_feature_lengths, batch_size, decode_eval_examples,
          decode_beam_size, decode_alpha)
    except (evaluation_lib.EvaluationError, data_lib.TaskError) as e:
      raise TrainError(str(e)) from None
  batches = batches or data_lib.batches
  is_chief = jax.process_index() == 0
  if is_chief:
    epath.Path(model_dir).mkdir(parents=True, exist_ok=True)
    _write(os.path.join(model_dir, MODEL_CONFIG),
           model_config_text(trainer.model))
    _write(os.path.join(model_dir, CONFIG), gin.config_str())
  manager = checkpoints_lib.manager(model_dir)
  latest = manager.latest_step()
  if latest is not None:
    state = checkpoints_lib.restore(manager, latest, trainer.abstract_state)
    init = "checkpoint_%d" % latest
  else:
    state = trainer.init_state(setup.params, seed)
    init = setup.init
  start = int(jax.device_get(state.step))
  print("mtf-synthesizer-jax-train: %s from %s at step %d on a %s mesh of "
        "%d devices" % (model_dir, init, start,
                        "x".join(map(str, trainer.mesh.devices.shape)),
                        trainer.mesh.devices.size), file=stream, flush=True)
  progress = progress_lib.Progress(model_dir if is_chief else None,
                                   train_steps, batch_size, stream)
  decoder_only = isinstance(trainer.model, t5.DecoderOnly)
  inputs = batches(
      mixture_or_task_name, train_split, task_feature_lengths, batch_size,
      decoder_only=decoder_only, shuffle=shuffle, seed=data_seed,
      repeat=True, skip_batches=start,
      shard_index=jax.process_index(), num_shards=jax.process_count())
  losses = {}
  decode_metrics = {}
  pending = []
  progress.start(start)
  schedule = functools.partial(learning_rate_schedule,
                               total_train_steps=train_steps)
  try:
    for step in range(start, train_steps):
      batch = trainer.global_batch(next(inputs))
      state, metrics = trainer.train_step(state, batch)
      pending.append((step, metrics))
      done = step + 1
      if done % max(log_every_steps, 1) == 0 or done == train_steps:
        for s, m in jax.device_get(pending):
          losses[s] = float(m["loss"])
        progress.log(done, {k: float(v) for k, v in
                            jax.device_get(pending[-1][1]).items()},
                     float(schedule(step)))
        pending = []
      if done == start + 1 and is_chief:
        _write(os.path.join(model_dir, OPERATIVE_CONFIG),
               gin.operative_config_str())
      checkpoints_lib.save(manager, done, state, force=done == train_steps)
      if eval_every_steps and (done % eval_every_steps == 0 or
                               done == train_steps):
        progress.log_eval(done, evaluate(
            trainer, state.params, batches, mixture_or_task_name,
            eval_split, task_feature_lengths, batch_size, eval_steps))
      if decoder is not None and (done % decode_eval_every_steps == 0 or
                                  done == train_steps):
        decode_metrics[done] = decoder.evaluate(state.params, done)
        progress.log_eval(done, decode_metrics[done])
  finally:
    if decoder is not None:
      decoder.close()
    manager.wait_until_finished()
    manager.close()
    progress.close()
  for s, m in jax.device_get(pending):
    losses[s] = float(m["loss"])
  return Run(trainer, state, start, losses, init, decode_metrics)


@dataclasses.dataclass
class Setup:
  """A run's checked configuration, nothing written.

  Attributes:
    trainer: the Trainer, built.
    params: a fresh run's initial parameters (None: the initializers').
    init: where they come from.
  """
  trainer: trainer_lib.Trainer
  params: Any = None
  init: str = "fresh"


def prepare(model_dir: str, mixture_or_task_name: str,
            task_feature_lengths: Mapping[str, int], batch_size: int,
            train_steps: int, learning_rate_schedule: Callable[..., Any],
            init_checkpoint: Optional[str], train_split: str,
            eval_split: Optional[str], seed: int,
            z_loss: float, loss_denominator: Optional[float],
            module_imports: Sequence[str]) -> Setup:
  """Checks the configuration and builds the trainer; writes nothing.

  Raises:
    TrainError: no variant chosen, an unknown task or split, a mesh shape
      or batch that the devices do not divide, a model directory of
      another model, an init checkpoint that is missing or does not fit.
  """
  try:
    gin.query_parameter("T5Config.variant")
  except ValueError:
    raise TrainError(
        "no variant chosen: include one of gin/flax/<variant>.gin (e.g. "
        "flax/dense_vanilla.gin) or bind T5Config.variant") from None
  try:
    model = t5.make_model()
  except ValueError as e:
    raise TrainError(str(e)) from None
  if train_steps <= 0 or batch_size <= 0:
    raise TrainError("train_steps and batch_size must be positive, got %d "
                     "and %d" % (train_steps, batch_size))
  try:
    data_lib.import_modules(module_imports)
    task = data_lib.get_task(mixture_or_task_name)
  except (data_lib.TaskError, ImportError) as e:
    raise TrainError(str(e)) from None
  try:
    splits = task.splits
  except ValueError as e:  # seqio: a TFDS task whose data is not there
    raise TrainError("%s: %s; is its TFDS data prepared and TFDS_DATA_DIR "
                     "set? (docs/tpu.md#the-data)" % (
                         mixture_or_task_name, e)) from None
  for split in (train_split,) + ((eval_split,) if eval_split else ()):
    if split not in splits:
      raise TrainError("%s has no split %r (it has %s)" % (
          mixture_or_task_name, split, ", ".join(sorted(task.splits))))
  try:
    mesh = partitioning.make_mesh(partitioning.mesh_shape())
  except partitioning.MeshShapeError as e:
    raise TrainError(str(e)) from None
  ways = mesh.shape[partitioning.DATA]
  if batch_size % ways:
    raise TrainError("a batch of %d sequences does not divide over the %d "
                     "devices of the mesh's data axis" % (batch_size, ways))
  check_model_dir(model_dir, model)
  schedule = functools.partial(learning_rate_schedule,
                               total_train_steps=train_steps)
  trainer = trainer_lib.Trainer(
      model, optimizer_lib.AdafactorOptimizer(learning_rate=schedule), mesh,
      z_loss=z_loss, loss_denominator=loss_denominator)
  if _has_checkpoints(model_dir):
    return Setup(trainer)
  # Read (and so checked) before anything is written.
  params, init = initial_params(model, init_checkpoint, seed)
  return Setup(trainer, params, init)


def evaluate(trainer: trainer_lib.Trainer, params: Any,
             batches: Callable[..., Iterator[Dict[str, np.ndarray]]],
             mixture_or_task_name: str, split: str,
             task_feature_lengths: Mapping[str, int], batch_size: int,
             eval_steps: Optional[int]) -> Dict[str, float]:
  """The teacher-forced metrics of the split (mesh's perplexity eval).

  Args:
    trainer: the Trainer.
    params: the parameters.
    batches: the input function.
    mixture_or_task_name: the task.
    split: its split.
    task_feature_lengths: the lengths.
    batch_size: sequences per batch.
    eval_steps: batches (None: the whole split).

  Returns:
    The metrics, weighted over the batches: "loss" (per position, mesh's
    denominator), "neg_log_perplexity", "token_accuracy",
    "sequence_accuracy".
  """
  totals, count = {}, 0
  inputs = batches(mixture_or_task_name, split, task_feature_lengths,
                   batch_size,
                   decoder_only=isinstance(trainer.model, t5.DecoderOnly),
                   shuffle=False, seed=0, repeat=False,
                   shard_index=jax.process_index(),
                   num_shards=jax.process_count())
  for i, batch in enumerate(inputs):
    if eval_steps is not None and i >= eval_steps:
      break
    out = jax.device_get(trainer.eval_step(params,
                                           trainer.global_batch(batch)))
    for name, value in out.items():
      totals[name] = totals.get(name, 0.0) + float(value)
    count += 1
  return {name: value / max(count, 1) for name, value in totals.items()}


def _absolute(path: str) -> str:
  """A local path made absolute (orbax's need); a URL (gs://) as it is."""
  return path if "://" in path else os.path.abspath(path)


def _write(path: str, text: str) -> None:
  """Writes a file whole: locally a temporary name renamed over the path."""
  if "://" in path:  # a bucket's object appears whole when written
    epath.Path(path).write_text(text)
    return
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    f.write(text)
  os.replace(tmp, path)
