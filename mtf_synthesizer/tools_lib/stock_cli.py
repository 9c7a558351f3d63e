# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Command lines of the stock `t5_mesh_transformer`, built and run.

A command is data (`Command`): the model directory, the gin files and
bindings in order, the modules to import, other flags and environment
additions. `Command.argv()` is for a subprocess, `format_command` for
printing (one flag per line, quoted for a POSIX shell).

The presets build what the repository runs:

  * `local_train`: training on one CPU device (the tests, the demo, the
    reproduction, the mesh check), by default a tiny T5.1.1 on
    `pydocs_span_corruption`;
  * `perplexity_eval`, `decode_eval`, `infer`, `score`: a training command
    turned into an evaluation, a decode of the validation split, a decode of
    a text file, or the scoring of (input, target) pairs;
  * `tpu`: the Cloud TPU form that `tpu_jobs` composes.

Variants are names of `mtf_synthesizer.variants` (or a paper label, or
`variants.MESH_ATTENTION.name` for mesh's own SelfAttention: no variant
file).

`run` is the one runner: it streams the subprocess's output (stdout and
stderr merged) line by line to a log file and a callback (`Progress` prints
one status line per run), enforces a timeout and returns a `Result` with the
return code, the output's tail and the model directory's scalars, read from
its TF event files (`read_scalars`).
"""

import collections
import contextlib
import dataclasses
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence
from typing import Tuple, Union

from mtf_synthesizer import variants

CLI_NAME = "t5_mesh_transformer"
MODULE_IMPORTS = ("mtf_synthesizer", "t5_tasks")
DATASET_GIN = "dataset.gin"
TINY_MODEL_GIN = "models/t5.1.1.tiny.gin"
SPAN_CORRUPTION = "pydocs_span_corruption"

# {tag: [(step, wall_time, value)]}
Scalars = Dict[str, List[Tuple[int, float, float]]]


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
  """The gin files that select a variant.

  Args:
    variant: a name or label of `variants`, or `variants.MESH_ATTENTION.name`.

  Returns:
    [its gin file], or [] for mesh's own attention.
  """
  gin_file = variants.get(variant).gin_file
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
    variant: a variant name or label, or `variants.MESH_ATTENTION.name`.
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


def tpu(model_dir: str, *, tpu_name: str, gcp_project: str, zone: str,
        tfds_data_dir: str, gin_files: Sequence[str],
        gin_params: Sequence[str]) -> Command:
  """The Cloud TPU form: the bare CLI name and the TPU flags.

  Args:
    model_dir: the model directory (gs://).
    tpu_name: `--tpu`.
    gcp_project: `--gcp_project`.
    zone: `--tpu_zone`.
    tfds_data_dir: `--t5_tfds_data_dir`.
    gin_files: the gin files, in order.
    gin_params: the bindings, in order.

  Returns:
    The Command.
  """
  return Command(
      model_dir, gin_files, gin_params, program=CLI_NAME,
      flags=["--tpu=%s" % tpu_name, "--gcp_project=%s" % gcp_project,
             "--tpu_zone=%s" % zone, "--t5_tfds_data_dir=%s" % tfds_data_dir])


# --- event files --------------------------------------------------------------


def _quiet_tf():
  """Imports TensorFlow without its start-up and deprecation chatter."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.get_logger().setLevel("ERROR")
  return tf


def read_scalars(event_dir: str) -> Scalars:
  """The scalar summaries of the event files in one folder.

  Args:
    event_dir: a model directory or one of its eval folders.

  Returns:
    {tag: [(step, wall_time, value)]}, in file order.
  """
  tf = _quiet_tf()
  out = {}
  for name in sorted(tf.io.gfile.listdir(event_dir)):
    if not name.startswith("events.out.tfevents"):
      continue
    for event in tf.train.summary_iterator(os.path.join(event_dir, name)):
      for value in event.summary.value:
        if value.HasField("simple_value"):
          out.setdefault(value.tag, []).append(
              (event.step, event.wall_time, value.simple_value))
  return out


def last_value(scalars: Scalars, tag: str) -> Optional[float]:
  """The value of `tag` at its last step, or None."""
  points = scalars.get(tag, [])
  return max(points)[2] if points else None


def steps_per_sec(scalars: Scalars) -> Optional[float]:
  """The median training speed, start-up and the first step excluded.

  Args:
    scalars: a model directory's scalars.

  Returns:
    The median `global_step/sec` after step 1, or None.
  """
  rates = [v for s, _, v in scalars.get("global_step/sec", []) if s > 1]
  return statistics.median(rates) if rates else None


def eval_scalars(model_dir: str, prefix: str) -> Scalars:
  """The scalars of the last eval folder whose name starts with `prefix`.

  Args:
    model_dir: the model directory.
    prefix: e.g. "eval_pydocs_span_corruption_validation" (the perplexity
      evaluation) or "validation_eval" (decodes).

  Returns:
    {tag: [(step, wall_time, value)]}; {} when there is no such folder.
  """
  folders = [d for d in sorted(os.listdir(model_dir)) if d.startswith(prefix)
             and os.path.isdir(os.path.join(model_dir, d))]
  return read_scalars(os.path.join(model_dir, folders[-1])) if folders else {}


def count_parameters(model_dir: str) -> int:
  """Parameters in the latest checkpoint, without slots and global_step.

  Args:
    model_dir: the model directory.

  Returns:
    The number of parameters.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  tf = _quiet_tf()
  total = 0
  for name, shape in tf.train.list_variables(
      tf.train.latest_checkpoint(model_dir)):
    if "_slot_" in name or name == "global_step":
      continue
    total += int(np.prod(shape))
  return total


# --- the runner ---------------------------------------------------------------


@dataclasses.dataclass
class Result:
  """What a run left.

  Attributes:
    argv: the command run.
    returncode: its exit status.
    output: the tail of its output (stdout and stderr merged; the CLI logs
      to stderr).
    model_dir: the command's model directory (None for a plain argv).
    log_path: the full log, if one was written.
  """
  argv: List[str]
  returncode: int
  output: str
  model_dir: Optional[str] = None
  log_path: Optional[str] = None
  _scalars: Optional[Scalars] = dataclasses.field(default=None, repr=False)

  @property
  def stderr(self) -> str:
    """The output, by the name `subprocess.CompletedProcess` gives it."""
    return self.output

  @property
  def scalars(self) -> Scalars:
    """The model directory's scalars (read once; {} if not a local dir)."""
    if self._scalars is None:
      local = self.model_dir and "://" not in self.model_dir
      self._scalars = (read_scalars(self.model_dir)
                       if local and os.path.isdir(self.model_dir) else {})
    return self._scalars


def _kill(proc: subprocess.Popen, group: bool) -> None:
  """Kills a process (and its process group, if it leads one)."""
  try:
    if group:
      os.killpg(proc.pid, signal.SIGKILL)
    else:
      proc.kill()
  except ProcessLookupError:
    pass


class Stopped(Exception):
  """SIGTERM (a batch system's stop, a pre-emption) reached the process."""


def _raise_stopped(signum, frame):
  del signum, frame
  raise Stopped()


@contextlib.contextmanager
def sigterm_raises_stopped() -> Iterator[None]:
  """Within it, SIGTERM raises `Stopped` in the main thread.

  A `run` in the main thread then kills its command before the exception
  leaves it, so the command does not outlive a stopped tool (by default a
  SIGTERM ends the tool and leaves its command running, writing on into
  the model directory). The previous handler is restored on exit. Call it
  from the main thread.

  Yields:
    Nothing.
  """
  previous = signal.signal(signal.SIGTERM, _raise_stopped)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


# The processes `run` is running, in any thread: {process: leads a group}.
_running: Dict[subprocess.Popen, bool] = {}
_running_lock = threading.Lock()


def kill_running() -> int:
  """Kills every command that `run` is running, in any thread.

  A tool that runs commands from worker threads calls it when it is
  stopped (Ctrl-C, SIGTERM), so that no command outlives it and writes on
  into a model directory that a resumed tool starts over. Each `run` then
  returns the killed command's Result (a negative return code).

  Returns:
    How many commands were running.
  """
  with _running_lock:
    running = list(_running.items())
  for proc, group in running:
    if proc.poll() is None:
      _kill(proc, group)
  return len(running)


def run(command: Union[Command, Sequence[str]],
        log_path: Optional[str] = None,
        on_line: Optional[Callable[[str], None]] = None,
        timeout: Optional[float] = None,
        keep_chars: int = 1 << 20) -> Result:
  """Runs a command, streaming its output line by line.

  Args:
    command: a Command (its environment additions apply) or an argv.
    log_path: if given, the command (shell text) and the whole output are
      written there.
    on_line: called with each line of output, as it comes.
    timeout: seconds; the process (and what it started) is killed when they
      have passed.
    keep_chars: how much of the output's end `Result.output` keeps.

  Returns:
    The Result.

  Raises:
    subprocess.TimeoutExpired: after the timeout (the process is killed).
  """
  if isinstance(command, Command):
    argv, model_dir = command.argv(), command.model_dir
    env = dict(os.environ, **command.env)
  else:
    argv, model_dir, env = list(command), None, None
  kept, size = collections.deque(), 0
  timed_out = threading.Event()
  log = open(log_path, "w") if log_path else None
  try:
    if log:
      log.write(format_command(argv) + "\n\n")
    # With a timeout, the command gets its own process group, so that what it
    # started dies with it (and the pipe closes).
    group = bool(timeout)
    with subprocess.Popen(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          errors="replace", bufsize=1, env=env,
                          start_new_session=group) as proc:
      with _running_lock:
        _running[proc] = group
      try:
        def on_timeout():
          timed_out.set()
          _kill(proc, group=True)
        timer = threading.Timer(timeout, on_timeout) if timeout else None
        if timer:
          timer.start()
        try:
          for line in proc.stdout:
            if log:
              log.write(line)
            if on_line:
              on_line(line)
            kept.append(line)
            size += len(line)
            while size > keep_chars and len(kept) > 1:
              size -= len(kept.popleft())
        except BaseException:  # Ctrl-C or a failing callback: stop the run.
          _kill(proc, group)
          raise
        finally:
          if timer:
            timer.cancel()
        returncode = proc.wait()
      finally:
        with _running_lock:
          _running.pop(proc, None)
  finally:
    if log:
      log.close()
  output = "".join(kept)[-keep_chars:]
  if timed_out.is_set():
    raise subprocess.TimeoutExpired(argv, timeout, output=output)
  return Result(argv, returncode, output, model_dir, log_path)


_STEP_LINE = re.compile(r"^step, tf_loss\[([-+0-9.eE]+|nan|inf)\]\[(\d+)\]")
_EVAL_LINE = re.compile(r"Evaluation \[(\d+)/(\d+)\]")


class Progress:
  """One status line per run, rewritten in place on a terminal.

  Pass it to `run` as `on_line`; call `finish` with the result.
  """

  def __init__(self, label: str, total_steps: int):
    self.label = label
    self.total = total_steps
    self.start = time.time()
    self.phase = "starting"
    self.tty = sys.stdout.isatty()
    self._last_print = 0.0
    self._last_text = ""

  def __call__(self, line: str) -> None:
    """Updates the phase from one log line of the CLI."""
    m = _STEP_LINE.match(line)
    if m:
      self.phase = "step %s/%d train loss/slot %.3f" % (
          m.group(2), self.total, float(m.group(1)))
    elif "Starting the session" in line:
      self.phase = "graph built, starting session"
    elif "Saving checkpoints for" in line:
      self.phase = "saving checkpoint " + line.rsplit("for ", 1)[-1].split()[0]
    elif "Calling model_fn" in line:
      self.phase = "building graph"
    else:
      m = _EVAL_LINE.search(line)
      if m:
        self.phase = "eval batch %s/%s" % (m.group(1), m.group(2))
      else:
        return
    self.show()

  def finish(self, result: Result) -> None:
    """Shows the final line: done, or the failure and where its log is."""
    self.phase = "done" if result.returncode == 0 else (
        "FAILED (exit %d), see %s" % (result.returncode, result.log_path))
    self.show(final=True)

  def show(self, final: bool = False) -> None:
    """Prints the status (on a terminal in place; else every 10 s)."""
    text = "  %-24s %6.0fs  %s" % (self.label, time.time() - self.start,
                                  self.phase)
    now = time.time()
    if self.tty:
      sys.stdout.write("\r\033[K" + text + ("\n" if final else ""))
      sys.stdout.flush()
    elif final or (now - self._last_print >= 10 and text != self._last_text):
      print(text, flush=True)
      self._last_print = now
      self._last_text = text


def run_with_progress(command: Command, log_path: str, label: str,
                      total_steps: int) -> Result:
  """Runs a command with a `Progress` line and a log file.

  Args:
    command: the Command.
    log_path: the log file.
    label: the progress line's label ("random train").
    total_steps: the training steps, for "step n/total".

  Returns:
    The Result.
  """
  progress = Progress(label, total_steps)
  result = run(command, log_path, on_line=progress)
  progress.finish(result)
  return result
