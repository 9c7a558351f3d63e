# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The stock CLI's training losses from a step-0 checkpoint: trainers' target.

Each case (`CASES`: V and D+V) is a tiny encoder-decoder in T5.1.0's layout
with the sizes of `mesh_reference` (`DIMS`, `LENGTH`, `BATCH`, the byte
vocabulary, float32 variables and activations, no dropout) that the stock
`t5_mesh_transformer` trains for STEPS steps on `pydocs_span_corruption`,
unpacked (`mesh_train_dataset_fn.pack = False`: every example is padded to
its length, so the features are `inputs` and `targets` only), unshuffled,
with a fixed seed, with t5's `learning_rate_schedules/rsqrt_no_ramp_down.gin`
(`learning_rate_schedule_noam` with no linear decay: rsqrt(max(step,
10000)), 0.01 at every one of the steps) and the CLI's default optimizer,
mesh's `AdafactorOptimizer` with its defaults (the operative config's
values are in case.json).

The command trains through the package's `deterministic_train_model`
(`utils.run.train_model_fn`, docs/preemption.md): resource variables, so
that each step reads its weights before Adafactor updates them in place
(with TF 1's reference variables the stock CLI's losses change from run to
run and drift from the step's arithmetic, 1e-3 by step 20 here), and the
step counter's increment ordered after the step's updates, so that the
schedule and Adafactor's decay read the step's own number, as `replay`
does.

`generate_case` makes a case's folder in two runs of the same command:

  1. from scratch: the CLI saves `model.ckpt-0` (the initial variables,
     Adafactor's slots zero, global step 0) before its first step; it is
     kept with the run's `operative_config.gin`;
  2. from a copy of the kept checkpoint (the estimator restores it): the
     losses of its STEPS steps are the reference, and must be those of the
     first run (the kept checkpoint is where that run started).

The loss of each step is the training loss the CLI computed before that
step's update: mesh's model function prints it (`tf.Print` on CPU: "step,
tf_loss[<loss>][<global step>]", nine significant digits, a float32
exactly); the estimator's summary of the first step (`loss` in the event
file, its only one within 100 steps) must equal the first.

The batches are the CLI's input pipeline rebuilt in this process from the
operative config (`mesh_train_dataset_fn` with its bindings, `.repeat()
.batch(batch, drop_remainder=True)` as mesh's `utils.train_model` does),
its first STEPS batches. `replay` runs mesh's training steps in this
process on them from the kept checkpoint (the model, schedule and optimizer
the operative config builds, resource variables, the global step
incremented after each step's updates): its losses must be the CLI's
(REPLAY_TOLERANCE), which shows the batches are the ones the CLI consumed,
in order.

`write_case` keeps in `<root>/<case>/`: the checkpoint (`checkpoint`,
`model.ckpt-0.index`, its data shards, `operative_config.gin`),
`batches.npz` (`inputs`, `targets`: int32 [steps, batch, length]) and
`case.json` (`metadata`).
"""

import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner
from workbench import mesh_reference

STEPS = 20
VARIANTS = ("vanilla", "dense_vanilla")
CASES = tuple(mesh_reference.Case(v) for v in VARIANTS)
BY_NAME = {c.name: c for c in CASES}
LEARNING_RATE_GIN = "learning_rate_schedules/rsqrt_no_ramp_down.gin"
SEED = 1
DATA_PARAMS = ("mesh_train_dataset_fn.shuffle = False",
               "mesh_train_dataset_fn.seed = %d" % SEED,
               "mesh_train_dataset_fn.pack = False")
ENV = {"MTF_SYNTH_VOCAB": "byte"}
# The package's deterministic training (docs/preemption.md): resource
# variables (each step reads its weights before Adafactor updates them in
# place) and the step counter's increment after the step's updates.
DETERMINISTIC_PARAMS = (
    "utils.run.train_model_fn = @mtf_synthesizer.deterministic_train_model",
    "mtf_synthesizer.deterministic_train_model.tf_random_seed = %d" % SEED)
# mesh's printed losses are TF's INFO logs: shown whatever the caller's
# environment says.
LOG_ENV = {"TF_CPP_MIN_LOG_LEVEL": "0"}
INITIAL_STEP = 0
FEATURES = ("inputs", "targets")
BATCHES = "batches.npz"
METADATA = mesh_reference.METADATA
CHECKPOINT_FILES = ("model.ckpt-0.index", "model.ckpt-0.data-00000-of-00002",
                    "model.ckpt-0.data-00001-of-00002",
                    mesh_reference.CHECKPOINT_STATE,
                    mesh_reference.OPERATIVE_CONFIG)
# The operative config's settings that case.json repeats.
OPTIMIZER_PARAMETERS = ("beta1", "clipping_threshold", "decay_rate",
                        "epsilon1", "epsilon2", "exclude_from_parameter_scale",
                        "factored", "min_dim_size_to_factor",
                        "multiply_by_parameter_scale", "stacked_dim_names")
SCHEDULE_PARAMETERS = ("linear_decay_fraction", "multiplier", "offset",
                       "warmup_steps")
# The losses of mesh's steps replayed in process against the CLI's
# (relative; they are equal on the machine that made them).
REPLAY_TOLERANCE = 1e-6
# What mesh's model function prints at every training step on a CPU.
LOSS_LINE = re.compile(r"step, tf_loss\[([^\]]+)\]\[(-?\d+)\]")


def train_command(case: mesh_reference.Case,
                  model_dir: str) -> commands.Command:
  """The stock CLI's command of a case: STEPS steps into `model_dir`.

  Args:
    case: a case of CASES.
    model_dir: the model directory (holding `model.ckpt-0` to start from
      it).

  Returns:
    The Command (one checkpoint at the end; the CLI saves `model.ckpt-0`
    first when it starts from scratch).
  """
  command = commands.local_train(
      model_dir, case.variant, STEPS, length=mesh_reference.LENGTH,
      batch_size=mesh_reference.BATCH, dims=mesh_reference.DIMS,
      base_gin_files=(commands.DATASET_GIN,
                      mesh_reference.LAYOUT_GIN[case.layout],
                      LEARNING_RATE_GIN),
      gin_params=[mesh_reference.ZERO_DROPOUT] + list(DATA_PARAMS) +
      mesh_reference.FLOAT32 + list(DETERMINISTIC_PARAMS),
      env=dict(ENV, **LOG_ENV))
  return command


def printed_losses(output: str) -> List[float]:
  """The training losses mesh's model function printed, in step order.

  The global step printed beside each is read with no order against the
  step's own increment (0 or 1 at the first step), so the lines' order is
  the steps'.

  Args:
    output: the CLI's output (stdout and stderr).

  Returns:
    One float per line (a float32's value).
  """
  return [float(np.float32(v)) for v, _ in LOSS_LINE.findall(output)]


def run_cli(case: mesh_reference.Case, model_dir: str,
            timeout: float = 900) -> List[float]:
  """Runs the case's command; its STEPS losses.

  Args:
    case: a case of CASES.
    model_dir: the model directory (from scratch, or holding the kept
      checkpoint).
    timeout: seconds.

  Returns:
    The training loss of each step, in order.

  Raises:
    RuntimeError: the CLI failed, or printed another number of losses, or
      its first loss is not its summary's.
  """
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.jobs import events
  command = train_command(case, model_dir)
  result = runner.run(command, timeout=timeout)
  if result.returncode:
    raise RuntimeError("%s: training failed:\n%s" % (
        case.name, result.output[-3000:]))
  losses = printed_losses(result.output)
  if len(losses) != STEPS:
    raise RuntimeError("%s: %d losses printed, not %d:\n%s" % (
        case.name, len(losses), STEPS, result.output[-3000:]))
  summaries = events.read_scalars(model_dir).get("loss", [])
  if [v for _, _, v in summaries] != losses[:1]:
    raise RuntimeError("%s: the loss summaries %s are not the first printed "
                       "loss %r" % (case.name, summaries, losses[0]))
  return losses


def start_from(case_dir: str, model_dir: str) -> None:
  """Copies a kept checkpoint into a new model directory to train from it.

  Args:
    case_dir: a case's folder.
    model_dir: created; must not exist.
  """
  os.makedirs(model_dir)
  for name in CHECKPOINT_FILES:
    if name != mesh_reference.OPERATIVE_CONFIG:
      shutil.copyfile(os.path.join(case_dir, name),
                      os.path.join(model_dir, name))


def batches(case_dir: str) -> Dict[str, np.ndarray]:
  """The CLI's first STEPS training batches, from its operative config.

  Args:
    case_dir: a folder with the run's `operative_config.gin`.

  Returns:
    Every feature of the batches (FEATURES): int32 [steps, batch, length].
  """
  with mesh_reference.GIN_LOCK:
    return _batches(case_dir)


def _parse_operative_config(case_dir: str) -> None:
  """Parses a run's operative config (with every configurable registered)."""
  # pylint: disable=g-import-not-at-top,unused-import
  import gin
  import mtf_synthesizer  # its configurables
  import t5.models
  import t5_tasks  # its tasks
  # pylint: enable=g-import-not-at-top,unused-import
  gin.clear_config()
  gin.parse_config_file(
      os.path.join(case_dir, mesh_reference.OPERATIVE_CONFIG),
      skip_unknown=True)


def _batches(case_dir: str) -> Dict[str, np.ndarray]:
  """`batches`, holding the gin lock."""
  # pylint: disable=g-import-not-at-top
  import gin
  import mesh_tensorflow as mtf
  from mesh_tensorflow.transformer import utils as mtf_utils
  import tensorflow.compat.v1 as tf
  from t5.models import mesh_transformer
  # pylint: enable=g-import-not-at-top
  _parse_operative_config(case_dir)
  try:
    sequence_length = gin.query_parameter("utils.run.sequence_length")
    batch_size = mtf_utils.compute_batch_size(
        sequence_length, mtf.convert_to_shape(""),
        mtf.convert_to_layout_rules(""),
        gin.query_parameter("utils.run.batch_size"))
    split = gin.query_parameter("utils.run.dataset_split")
    with tf.Graph().as_default():
      # As mesh's utils.train_model makes the estimator's input.
      dataset = mesh_transformer.mesh_train_dataset_fn(
          sequence_length=sequence_length, vocabulary=None,
          dataset_split=split)
      dataset = dataset.repeat().batch(batch_size, drop_remainder=True)
      features = tf.data.make_one_shot_iterator(
          dataset.take(STEPS)).get_next()
      with tf.Session() as session:
        steps = [session.run(features) for _ in range(STEPS)]
  finally:
    gin.clear_config()
  if sorted(steps[0]) != sorted(FEATURES):
    raise ValueError("the pipeline's features are %s, not %s" % (
        sorted(steps[0]), sorted(FEATURES)))
  return {k: np.stack([s[k] for s in steps]).astype(np.int32)
          for k in FEATURES}


def replay(case_dir: str, arrays: Dict[str, np.ndarray]) -> List[float]:
  """Mesh's training steps in this process, on the batches, from the kept
  checkpoint: the losses the CLI's steps must give.

  The model and the optimizer as the operative config builds them (TRAIN
  mode, z_loss included, dropout 0; `utils.run.optimizer` and its
  schedule), lowered on one device with resource variables (each step reads
  its weights before it updates them), the global step incremented after
  each step's updates.

  Args:
    case_dir: a case's folder (checkpoint and operative config).
    arrays: the batches (`batches`).

  Returns:
    The loss of each batch (float32 values), in order.
  """
  with mesh_reference.GIN_LOCK:
    return _replay(case_dir, arrays)


def _replay(case_dir: str, arrays: Dict[str, np.ndarray]) -> List[float]:
  """`replay`, holding the gin lock."""
  # pylint: disable=g-import-not-at-top
  import gin
  import mesh_tensorflow as mtf
  from mesh_tensorflow.transformer import utils as mtf_utils
  import tensorflow.compat.v1 as tf
  from mtf_synthesizer.checkpoints import tf_format
  from workbench import tiny_model
  # pylint: enable=g-import-not-at-top
  prefix = tf_format.latest_checkpoint(case_dir)
  vocab = _vocab_size(case_dir)
  _parse_operative_config(case_dir)
  try:
    steps, batch, length = arrays["targets"].shape
    with tf.Graph().as_default():
      global_step = tf.train.get_or_create_global_step()
      graph = mtf.Graph()
      mesh = mtf.Mesh(graph, "mesh")
      feeds = {k: tf.placeholder(tf.int32, [batch, length]) for k in FEATURES}
      dims = [mtf.Dimension("batch", batch), mtf.Dimension("length", length)]
      model = mtf_utils.build_model(
          model_type=gin.query_parameter("utils.run.model_type"),
          input_vocab_size=vocab, output_vocab_size=vocab,
          layout_rules=mtf.convert_to_layout_rules(""),
          mesh_shape=mtf.convert_to_shape(""))
      _, loss = model.call_simple(
          inputs=mtf.import_fully_replicated(mesh, feeds["inputs"], dims),
          targets=mtf.import_fully_replicated(mesh, feeds["targets"], dims),
          compute_loss=True, mode=tf.estimator.ModeKeys.TRAIN,
          variable_dtype=mtf_utils.get_variable_dtype())
      variables = graph.trainable_variables
      grads = mtf.gradients([loss], [v.outputs[0] for v in variables])
      learning_rate = _bound("utils.run.learning_rate_schedule")(
          step=global_step, total_train_steps=steps)
      optimizer = _bound("utils.run.optimizer")(learning_rate=learning_rate)
      updates = optimizer.apply_grads(grads, variables)
      lowering = tiny_model.lower(graph, mesh,
                                  tiny_model.placement_mesh_impl())
      tf_loss = lowering.export_to_tf_tensor(mtf.cast(loss, tf.float32))
      tf_updates = [lowering.lowered_operation(op) for op in updates]
      with tf.control_dependencies(tf_updates + [tf_loss]):
        step = tf.assign_add(global_step, 1)
      saver = tf.train.Saver(
          [v.get_master() for v in graph.all_variables] + [global_step])
      config = tf.ConfigProto(device_count={"CPU": 1})
      config.graph_options.rewrite_options.disable_meta_optimizer = True
      losses = []
      with tf.Session(config=config) as session:
        session.run(tf.global_variables_initializer())
        saver.restore(session, prefix)
        session.run(lowering.copy_masters_to_slices())
        for k in range(steps):
          value, _ = session.run([tf_loss, step], {
              feeds[f]: arrays[f][k] for f in FEATURES})
          losses.append(float(value))
  finally:
    gin.clear_config()
  return losses


def _vocab_size(case_dir: str) -> int:
  """The rows of a kept checkpoint's embedding (the padded vocabulary)."""
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.checkpoints import tf_format
  reader = tf_format.CheckpointReader(tf_format.latest_checkpoint(case_dir))
  return next(reader.shape(n)[0] for n in reader.variable_names()
              if n.split("/")[-1] == "embedding")


def _bound(name: str):
  """The configurable a binding names (`@name`), its own bindings applied."""
  # pylint: disable-next=g-import-not-at-top
  import gin
  value = gin.query_parameter(name)
  return gin.get_configurable(value.selector)


def kept_settings(case_dir: str) -> Dict[str, object]:
  """What case.json repeats of a kept run: its bindings, its vocabulary.

  Args:
    case_dir: a case's folder.

  Returns:
    {"vocab_size" (the checkpoint's embedding rows), "optimizer",
    "optimizer_parameters", "schedule", "schedule_parameters", "z_loss",
    "loss_denominator"} as the operative config binds them (the decoder's
    Unitransformer for the last two: the loss is the decoder's).
  """
  vocab = _vocab_size(case_dir)
  with mesh_reference.GIN_LOCK:
    # pylint: disable-next=g-import-not-at-top
    import gin
    _parse_operative_config(case_dir)
    try:
      def query(name):
        value = gin.query_parameter(name)
        return value.selector if hasattr(value, "selector") else value

      return {
          "vocab_size": vocab,
          "optimizer": query("utils.run.optimizer"),
          "optimizer_parameters": {
              k: query("AdafactorOptimizer." + k)
              for k in OPTIMIZER_PARAMETERS},
          "schedule": query("utils.run.learning_rate_schedule"),
          "schedule_parameters": {
              k: query("learning_rate_schedule_noam." + k)
              for k in SCHEDULE_PARAMETERS},
          "z_loss": query("decoder/Unitransformer.z_loss"),
          "loss_denominator": query(
              "decoder/Unitransformer.loss_denominator"),
      }
    finally:
      gin.clear_config()


def metadata(case: mesh_reference.Case, losses: Sequence[float],
             settings: Dict[str, object]) -> Dict[str, object]:
  """case.json's contents.

  Args:
    case: a case of CASES.
    losses: the CLI's STEPS training losses.
    settings: `kept_settings` of the case's folder.

  Returns:
    A JSON-ready dict (see docs/development.md for every key).
  """
  dims = mesh_reference.DIMS
  length = mesh_reference.LENGTH
  argv = [commands.CLI_NAME] + train_command(case, "$MODEL_DIR").argv()[1:]
  return {
      "case": dataclasses.asdict(case),
      "variant": case.variant,
      "label": attentions.get(case.variant).label,
      "components": list(attentions.get(case.variant).components),
      "dims": dims,
      "length": length,
      "vocab_size": settings["vocab_size"],
      "vocabulary": "byte (seqio.ByteVocabulary with 100 extra ids, padded "
                    "to a multiple of 128 by mesh)",
      "layout_gin_file": mesh_reference.LAYOUT_GIN[case.layout],
      # The same model as the Flax port names it (T5.1.0's layout: ReLU,
      # the softmax is the shared embedding, one relative attention bias
      # per stack shared by its layers).
      "t5_config": {
          "vocab_size": settings["vocab_size"], "d_model": dims["d_model"],
          "num_heads": dims["num_heads"], "head_dim": dims["d_kv"],
          "d_ff": dims["d_ff"], "num_encoder_layers": dims["num_layers"],
          "num_decoder_layers": dims["num_layers"],
          "activations": ["relu"], "logits_via_embedding": True,
          "dropout_rate": 0.0, "relative_attention_type": "bias_shared",
          "relative_attention_num_buckets": 32, "variant": case.variant,
          "max_length": length, "dtype": "float32",
          "param_dtype": "float32"},
      "sequence_length": {"inputs": length, "targets": length},
      "batch_size": mesh_reference.BATCH,
      "steps": STEPS,
      "data": {"mixture": commands.SPAN_CORRUPTION, "split": "train",
               "pack": False, "shuffle": False, "seed": SEED,
               "features": list(FEATURES)},
      "learning_rate_schedule": {
          "gin_file": LEARNING_RATE_GIN, "name": settings["schedule"],
          "parameters": settings["schedule_parameters"],
          "formula": "multiplier * rsqrt(max(step - offset, warmup_steps)); "
                     "no linear decay (linear_decay_fraction 0)",
          "value_at_every_step": float(np.float32(10000 ** -0.5)),
      },
      "optimizer": {
          "name": settings["optimizer"],
          "parameters": settings["optimizer_parameters"],
          "decay_rate_when_none": "mesh's adafactor_decay_rate_pow(0.8): "
                                  "1 - (global_step + 1) ** -0.8"},
      "z_loss": settings["z_loss"],
      "loss_denominator": settings["loss_denominator"],
      "loss": "the training loss of each step, before its update: the "
              "softmax cross entropy summed over the positions whose target "
              "is not 0, plus z_loss * log(Z)^2 at each of them, divided by "
              "batch * length (every position: loss_denominator None)",
      "losses": [float(x) for x in losses],
      "initial_checkpoint": "model.ckpt-%d" % INITIAL_STEP,
      "train_argv": argv,
      "train_env": dict(ENV),
      "train_command": commands.format_command(argv),
  }


def write_case(case_dir: str, case: mesh_reference.Case,
               arrays: Dict[str, np.ndarray], losses: Sequence[float]
               ) -> None:
  """Writes `batches.npz` and `case.json` beside the kept checkpoint."""
  np.savez(os.path.join(case_dir, BATCHES), **arrays)
  with open(os.path.join(case_dir, METADATA), "w") as f:
    json.dump(metadata(case, losses, kept_settings(case_dir)), f,
              indent=1, sort_keys=True)
    f.write("\n")


def read_batches(case_dir: str) -> Dict[str, np.ndarray]:
  """The kept `batches.npz` of a case."""
  with np.load(os.path.join(case_dir, BATCHES)) as data:
    return {k: data[k] for k in data.files}


def read_metadata(case_dir: str) -> Dict[str, object]:
  """The kept `case.json` of a case."""
  with open(os.path.join(case_dir, METADATA)) as f:
    return json.load(f)


def generate_case(case: mesh_reference.Case, out_root: str,
                  work_dir: str) -> Dict[str, object]:
  """Makes a case's folder with two runs of the stock CLI.

  Args:
    case: a case of CASES.
    out_root: the folder of all cases; the case goes to `<out_root>/<name>`.
    work_dir: a scratch folder.

  Returns:
    {"case", "seconds", "bytes", "losses"}.

  Raises:
    RuntimeError: a run failed, the two runs' losses differ, or mesh's loss
      of the first batch from the kept checkpoint is not the CLI's.
  """
  start = time.time()
  scratch = os.path.join(work_dir, case.name + "-scratch")
  first = run_cli(case, scratch)
  case_dir = os.path.join(out_root, case.name)
  shutil.rmtree(case_dir, ignore_errors=True)
  mesh_reference.keep_checkpoint(scratch, case_dir, step=INITIAL_STEP)
  restarted = os.path.join(work_dir, case.name + "-restarted")
  start_from(case_dir, restarted)
  losses = run_cli(case, restarted)
  if losses != first:
    raise RuntimeError("%s: from the kept checkpoint %s, from scratch %s" % (
        case.name, losses, first))
  arrays = batches(case_dir)
  replayed = replay(case_dir, arrays)
  if not np.allclose(replayed, losses, rtol=REPLAY_TOLERANCE, atol=0):
    raise RuntimeError("%s: mesh's steps in process %s, the CLI's %s" % (
        case.name, replayed, losses))
  write_case(case_dir, case, arrays, losses)
  size = sum(os.path.getsize(os.path.join(case_dir, e))
             for e in os.listdir(case_dir))
  return {"case": case.name, "seconds": round(time.time() - start, 1),
          "bytes": size, "losses": losses}


def generate(out_root: str,
             cases: Sequence[mesh_reference.Case] = CASES,
             on_done: Optional[Callable[[Dict[str, object]], None]] = None
             ) -> List[Dict[str, object]]:
  """Regenerates the cases' folders, one CLI run at a time.

  Args:
    out_root: the folder of all cases (tests/data/mesh_training).
    cases: which cases.
    on_done: called with each case's summary as it finishes.

  Returns:
    The summaries, in the order of `cases`.
  """
  os.makedirs(out_root, exist_ok=True)
  summaries = []
  with tempfile.TemporaryDirectory() as work_dir:
    for case in cases:
      summaries.append(generate_case(case, out_root, work_dir))
      if on_done:
        on_done(summaries[-1])
  return summaries
