# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Command lines of the stock `t5_mesh_transformer`, as data.

A command is data (`Command`): the model directory, the gin files and
bindings in order, the modules to import, other flags and environment
additions. `Command.argv()` is for a subprocess (`runner.run`),
`format_command` for printing (one flag per line, quoted for a POSIX shell).

The presets build what the package and its tools run:

  * `local_train`: training on one CPU device (the tests, the demo, the
    reproduction, the mesh check), by default a tiny T5.1.1 on
    `pydocs_span_corruption`;
  * `perplexity_eval`, `decode_eval`, `infer`, `score`: a training command
    turned into an evaluation, a decode of the validation split, a decode of
    a text file, or the scoring of (input, target) pairs;
  * `export_predict`: a SavedModel for serving;
  * `tpu`: the Cloud TPU form that `jobs.tpu` composes.

Variants are names of `mtf_synthesizer.variants` (or a paper label, or
`attentions.MESH_SELF_ATTENTION.name` for mesh's own SelfAttention: no variant
file).
"""

import dataclasses
import os
import re
import sys
from typing import List, Mapping, Optional, Sequence, Union

from mtf_synthesizer import attentions

CLI_NAME = "t5_mesh_transformer"
MODULE_IMPORTS = ("mtf_synthesizer", "t5_tasks")
DATASET_GIN = "dataset.gin"
TINY_MODEL_GIN = "models/t5.1.1.tiny.gin"
SPAN_CORRUPTION = "pydocs_span_corruption"

def cli_path() -> str:
  """The stock CLI of the running interpreter's environment.

  Returns:
    The path of `t5_mesh_transformer` next to `sys.executable`.
  """
  return os.path.join(os.path.dirname(sys.executable), CLI_NAME)


@dataclasses.dataclass(frozen=True)
class Command:
  """One stock-CLI command line, as data.

  Attributes:
    model_dir: `--model_dir`.
    gin_files: `--gin_file` arguments, in order.
    gin_params: `--gin_param` bindings, in order (a later one wins).
    module_imports: `--module_import` arguments.
    flags: other flags, whole ("--tpu=name"), before `--model_dir`.
    env: environment additions for the subprocess.
    program: the executable (default: `cli_path()`; the TPU form uses the
      bare name, found on the TPU VM's PATH).
  """
  model_dir: str
  gin_files: Sequence[str] = ()
  gin_params: Sequence[str] = ()
  module_imports: Sequence[str] = MODULE_IMPORTS
  flags: Sequence[str] = ()
  env: Mapping[str, str] = dataclasses.field(default_factory=dict)
  program: str = dataclasses.field(default_factory=cli_path)

  def __post_init__(self):
    for name in ("gin_files", "gin_params", "module_imports", "flags"):
      object.__setattr__(self, name, tuple(getattr(self, name)))
    object.__setattr__(self, "env", dict(self.env))

  def argv(self) -> List[str]:
    """The argument list for a subprocess.

    Returns:
      [program, flags..., --model_dir, --module_import..., --gin_file...,
      --gin_param...].
    """
    return ([self.program] + list(self.flags) +
            ["--model_dir=" + self.model_dir] +
            ["--module_import=" + m for m in self.module_imports] +
            ["--gin_file=" + f for f in self.gin_files] +
            ["--gin_param=" + p for p in self.gin_params])

  def extended(self, gin_files: Sequence[str] = (),
               gin_params: Sequence[str] = (),
               env: Optional[Mapping[str, str]] = None) -> "Command":
    """This command with more gin files, bindings and environment.

    Args:
      gin_files: appended to the gin files.
      gin_params: appended to the bindings.
      env: environment additions, over this command's.

    Returns:
      A new Command.
    """
    return dataclasses.replace(
        self, gin_files=self.gin_files + tuple(gin_files),
        gin_params=self.gin_params + tuple(gin_params),
        env=dict(self.env, **(env or {})))


def shell_quote(arg: str) -> str:
  """Quotes an argument for a POSIX shell, in double quotes when needed.

  Gin values use single quotes, so double quotes read naturally:
  "--gin_param=MIXTURE_NAME = 'glue_v002_proportional'".

  Args:
    arg: one argument.

  Returns:
    The argument, quoted when the shell would otherwise change it.
  """
  if arg and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", arg):
    return arg
  return '"%s"' % re.sub(r'(["\\$`])', r"\\\1", arg)


def format_command(command: Union[Command, Sequence[str]]) -> str:
  """A shell-ready command: the leading words, then one flag per line.

  Args:
    command: a Command or an argument list.

  Returns:
    Shell text (lines joined by backslash-newline).
  """
  argv = command.argv() if isinstance(command, Command) else list(command)
  words = [shell_quote(a) for a in argv]
  head = 1
  while head < len(words) and not argv[head].startswith("-"):
    head += 1
  return " \\\n    ".join([" ".join(words[:head])] + words[head:])


# --- presets ------------------------------------------------------------------


def variant_gin_files(variant: str) -> List[str]:
  """The gin files that select an attention of the table.

  Args:
    variant: a name or label of `attentions.ATTENTIONS`.

  Returns:
    [its gin file], or [] for mesh's own attention.
  """
  gin_file = attentions.get(variant).gin_file
  return [gin_file] if gin_file else []


def local_train(model_dir: str, variant: str, steps: Optional[int], *,
                mixture: str = SPAN_CORRUPTION, length: int = 64,
                batch_size: int = 4,
                lengths: Optional[Mapping[str, int]] = None,
                dims: Optional[Mapping[str, int]] = None,
                base_gin_files: Sequence[str] = (DATASET_GIN, TINY_MODEL_GIN),
                mesh_shape: str = "",
                mesh_devices: Optional[Sequence[str]] = None,
                gin_files: Sequence[str] = (),
                gin_params: Sequence[str] = (),
                env: Optional[Mapping[str, str]] = None) -> Command:
  """Training on the local CPU (by default one device, a tiny T5.1.1).

  `SynthesizerAttention.max_length` is bound to `length` for every variant
  (unused by mesh's own attention).

  Args:
    model_dir: the model directory.
    variant: a variant name or label, or `attentions.MESH_SELF_ATTENTION.name`.
    steps: training steps, also the checkpoint interval (one checkpoint at
      the end); None binds neither.
    mixture: MIXTURE_NAME.
    length: the sequence length (inputs and targets) and max_length.
    batch_size: sequences per batch (bound as tokens_per_batch).
    lengths: `utils.run.sequence_length` when not {inputs, targets: length}
      (a language model's {'targets': n}).
    dims: model sizes bound as macros first ({"d_model": 32} binds
      `d_model = 32`).
    base_gin_files: the gin files before the variant file.
    mesh_shape: `utils.run.mesh_shape` ("" for one device).
    mesh_devices: `utils.run.mesh_devices` (default [""]).
    gin_files: gin files after the variant file.
    gin_params: bindings after the preset's (they win).
    env: environment additions.

  Returns:
    The Command.
  """
  lengths = dict(lengths or {"inputs": length, "targets": length})
  params = ["%s = %d" % item for item in (dims or {}).items()] + [
      "MIXTURE_NAME = '%s'" % mixture,
      "utils.run.mesh_shape = '%s'" % mesh_shape,
      "utils.run.mesh_devices = %r" % (list(mesh_devices or [""]),),
      "utils.run.sequence_length = %r" % (lengths,),
      "utils.run.batch_size = ('tokens_per_batch', %d)" % (
          batch_size * length),
      "SynthesizerAttention.max_length = %d" % length,
  ]
  if steps is not None:
    params += ["utils.run.train_steps = %d" % steps,
               "utils.run.save_checkpoints_steps = %d" % steps]
  return Command(
      model_dir,
      list(base_gin_files) + variant_gin_files(variant) + list(gin_files),
      params + list(gin_params), env=env or {})


# The seed of the evaluation data's random preprocessing. T5's evaluation
# dataset (`mesh_eval_dataset_fn`) has none by default, so a task with a
# random preprocessor (span corruption's noise, for one) is evaluated on
# other examples at every evaluation: scores of one checkpoint differ, and
# models are not compared on the same examples.
EVAL_DATA_SEED = 0


def eval_seed_params(seed: Optional[int] = EVAL_DATA_SEED) -> List[str]:
  """The gin bindings that seed the evaluation data (none for None).

  Args:
    seed: the seed; None: T5's default, no seed.

  Returns:
    A list of --gin_param values.
  """
  return [] if seed is None else ["mesh_eval_dataset_fn.seed = %d" % seed]


def perplexity_eval(train: Command, eval_steps: int,
                    split: str = "validation",
                    checkpoint_step: int = -1,
                    seed: Optional[int] = EVAL_DATA_SEED) -> Command:
  """The perplexity evaluation (`perplexity_eval.gin`) of a trained model.

  Args:
    train: the model's training command.
    eval_steps: batches evaluated.
    split: the split.
    checkpoint_step: the checkpoint (-1: the last).
    seed: the seed of the evaluation data's random preprocessing (the same
      examples at every evaluation); None: T5's default, none.

  Returns:
    The Command; the scalars go to `<model_dir>/eval_<mixture>_<split>...`.
  """
  return train.extended(["perplexity_eval.gin"], [
      "eval_checkpoint_step = %d" % checkpoint_step,
      "utils.run.dataset_split = '%s'" % split,
      "utils.run.perplexity_eval_steps = %d" % eval_steps,
  ] + eval_seed_params(seed))


def decode_eval(train: Command, checkpoint_step: int,
                split: str = "validation",
                seed: Optional[int] = EVAL_DATA_SEED) -> Command:
  """Decodes a split and scores it with the task's metrics (`eval.gin`).

  Args:
    train: the model's training command.
    checkpoint_step: the checkpoint.
    split: the split.
    seed: the seed of the evaluation data's random preprocessing; None:
      T5's default, none.

  Returns:
    The Command; the files and scalars go to `<model_dir>/<split>_eval`.
  """
  return train.extended(["eval.gin"], [
      "utils.run.dataset_split = '%s'" % split,
      "eval_checkpoint_step = %d" % checkpoint_step,
  ] + eval_seed_params(seed))


def infer(train: Command, input_file: str, output_file: str,
          checkpoint_step: int = -1) -> Command:
  """Decodes the lines of a text file (`infer.gin`).

  Args:
    train: the model's training command.
    input_file: one input per line.
    output_file: the output prefix (mesh appends `-<step>`).
    checkpoint_step: the checkpoint (-1: the last).

  Returns:
    The Command.
  """
  return train.extended(["infer.gin"], [
      "infer_checkpoint_step = %d" % checkpoint_step,
      "input_filename = '%s'" % input_file,
      "output_filename = '%s'" % output_file])


def score(train: Command, inputs_file: str, targets_file: str,
          scores_file: str, checkpoint_step: int) -> Command:
  """Scores (input, target) pairs from two files (`score_from_file.gin`).

  Args:
    train: the model's training command.
    inputs_file: one input per line.
    targets_file: one target per line.
    scores_file: the output prefix (`<scores_file>.scores`).
    checkpoint_step: the checkpoint.

  Returns:
    The Command.
  """
  return train.extended(["score_from_file.gin"], [
      "inputs_filename = '%s'" % inputs_file,
      "targets_filename = '%s'" % targets_file,
      "scores_filename = '%s'" % scores_file,
      "utils.run.eval_checkpoint_step = %d" % checkpoint_step])


def export_predict(model_dir: str, export_dir: str, *,
                   mixture: str = SPAN_CORRUPTION, length: int = 64,
                   batch_size: int = 1, checkpoint_step: int = -1,
                   env: Optional[Mapping[str, str]] = None) -> Command:
  """Exports a trained model as a SavedModel through T5's model API.

  `--use_model_api --mode=export_predict`: t5 parses the model directory's
  operative config (which names the variant) and writes
  `<export_dir>/<timestamp>/saved_model.pb` for greedy decoding.

  Args:
    model_dir: the trained model's directory.
    export_dir: where the timestamped SavedModel folder goes.
    mixture: MIXTURE_NAME, whose vocabulary the SavedModel embeds.
    length: the input and target lengths of the export (longer inputs are
      truncated); at most `SynthesizerAttention.max_length`.
    batch_size: the most examples per request.
    checkpoint_step: the checkpoint (-1: the last).
    env: environment additions.

  Returns:
    The Command.
  """
  flags = ["--use_model_api", "--mode=export_predict",
           "--export_dir=" + export_dir, "--batch_size=%d" % batch_size,
           "--input_sequence_length=%d" % length,
           "--target_sequence_length=%d" % length, "--temperature=0"]
  if checkpoint_step >= 0:
    flags += ["--checkpoint_mode=specific",
              "--checkpoint_steps=%d" % checkpoint_step]
  return Command(model_dir, gin_params=["MIXTURE_NAME = '%s'" % mixture],
                 flags=flags, env=env or {})


def tpu(model_dir: str, *, tpu_name: str, tfds_data_dir: str,
        gin_files: Sequence[str], gin_params: Sequence[str],
        gcp_project: Optional[str] = None,
        zone: Optional[str] = None,
        logical_cores_per_chip: Optional[int] = None) -> Command:
  """The Cloud TPU form: the bare CLI name and the TPU flags.

  The bare name is what the command prints; `cloud_tpu.run_commands` runs
  the CLI beside its own interpreter (`cli_path()`).

  Args:
    model_dir: the model directory (gs://).
    tpu_name: `--tpu` (`local` on the TPU VM itself).
    tfds_data_dir: `--t5_tfds_data_dir`.
    gin_files: the gin files, in order.
    gin_params: the bindings, in order.
    gcp_project: `--gcp_project`, if given.
    zone: `--tpu_zone`, if given.
    logical_cores_per_chip: mesh's `--logical_cores_per_chip`, if given
      (1 on a megacore TPU; `mesh_defaults.mesh_topology`).

  Returns:
    The Command.
  """
  flags = ["--tpu=%s" % tpu_name]
  if logical_cores_per_chip is not None:
    flags.append("--logical_cores_per_chip=%d" % logical_cores_per_chip)
  if gcp_project:
    flags.append("--gcp_project=%s" % gcp_project)
  if zone:
    flags.append("--tpu_zone=%s" % zone)
  flags.append("--t5_tfds_data_dir=%s" % tfds_data_dir)
  return Command(model_dir, gin_files, gin_params, program=CLI_NAME,
                 flags=flags)


# --- event files --------------------------------------------------------------
