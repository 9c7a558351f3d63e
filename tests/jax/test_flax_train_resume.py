# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A training run killed by SIGKILL and resumed trains as one never stopped.

`mtf-synthesizer-jax-train` runs as a subprocess (`python -m
mtf_synthesizer.commands.jax_train`) on a tiny model with dropout on and
shuffled input, a loss logged at every step and a checkpoint every
`INTERVAL` steps, on a CPU split into two devices (the parameters sharded
over the mesh's `model` axis). One model directory is trained three
times, in turn:

  killed          SIGKILL from outside once the run reports step KILL_AFTER;
  killed_mid_save resumed, then SIGKILL from inside orbax's commit of one
                  of its checkpoints: every file written, orbax's commit
                  marker too, only the rename of the temporary directory to
                  `checkpoint_<step>` left undone;
  resumed         resumed to the last step, N;

and another once, uninterrupted, to N: the reference. Each run's losses
and gradient norms (TensorBoard's, read from the event file that run
wrote) equal the reference's at the same steps, exactly: a resumed run
restores the whole state, reads the input from the batch that its step
would read next, and draws dropout's bits from the step. After each kill,
the newest checkpoint orbax lists is a committed one, and the temporary
directory of the save that was cut short is neither listed nor used, and
is removed when the run resumes.
"""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

import orbax.checkpoint as ocp
import pytest

from mtf_synthesizer.flax_train import checkpoints
from mtf_synthesizer.flax_train import summaries

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
VARIANT_GIN = os.path.join(ROOT, "gin", "flax", "random_dense.gin")
COMMAND = "mtf_synthesizer.commands.jax_train"
N = 8  # the last step
INTERVAL = 2  # checkpoint_options.save_interval_steps
# The first run is killed once it reports this step: after the save of
# step KILL_AFTER - 1 began, which waited for the one before it to commit
# (orbax finishes a save before it starts the next), so that a committed
# checkpoint exists.
KILL_AFTER = 5
TIMEOUT = 900  # seconds, per run
TMP_SUFFIX = ".orbax-checkpoint-tmp"
GIN = """
import mtf_synthesizer.flax_model
import mtf_synthesizer.flax_train.train
T5Config.vocab_size = 384
T5Config.d_model = 16
T5Config.num_heads = 2
T5Config.head_dim = 8
T5Config.d_ff = 32
T5Config.num_encoder_layers = 1
T5Config.num_decoder_layers = 1
T5Config.max_length = 16
T5Config.dropout_rate = 0.1
train.mixture_or_task_name = "pydocs_span_corruption"
train.task_feature_lengths = {"inputs": 16, "targets": 16}
train.batch_size = 4
train.train_steps = %d
train.shuffle = True
train.data_seed = 7
train.learning_rate_schedule = @learning_rate_schedules.constant_learning_rate
learning_rate_schedules.constant_learning_rate.learning_rate = 0.01
train.log_every_steps = 1
train.eval_every_steps = 0
checkpoint_options.save_interval_steps = %d
checkpoint_options.max_to_keep = None
""" % (N, INTERVAL)
# Runs the command with orbax's rename of the temporary directory into
# `checkpoint_<argv[1]>` replaced by a SIGKILL of the process.
KILL_MID_SAVE = """
import os, runpy, signal, sys
from orbax.checkpoint._src.path import async_path
final = sys.argv.pop(1)
rename = async_path.rename
async def cut_short(src, dst):
  if os.path.basename(str(dst)) == final:
    os.kill(os.getpid(), signal.SIGKILL)
  return await rename(src, dst)
async_path.rename = cut_short
runpy.run_module(%r, run_name="__main__", alter_sys=True)
""" % COMMAND
START = re.compile(r"^mtf-synthesizer-jax-train: .* from (\S+) at step (\d+) ")


@dataclasses.dataclass
class Result:
  """One run of the command and the model directory it left.

  Attributes:
    returncode: the exit status (-9: killed).
    stderr: what it printed.
    start: the step it started from (its progress line's).
    scalars: its own TensorBoard scalars, name -> step -> value.
    steps: the `checkpoint_<step>` directories' steps, after the run.
    temporary: the names of orbax's temporary directories, after the run.
    latest: orbax's `latest_step()`, after the run.
    unfinished: the listed steps whose directory lacks a commit's files.
  """
  returncode: int
  stderr: str
  start: Optional[int]
  scalars: Dict[str, Dict[int, float]]
  steps: List[int]
  temporary: List[str]
  latest: Optional[int]
  unfinished: List[int]


def _env(workdir: str) -> Dict[str, str]:
  env = dict(os.environ)
  env["MTF_SYNTH_VOCAB"] = "byte"
  env["JAX_PLATFORMS"] = "cpu"
  # The runs after the first read its compiled steps from JAX's cache.
  env["JAX_COMPILATION_CACHE_DIR"] = os.path.join(workdir, "jax_cache")
  env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
  env["PYTHONPATH"] = os.pathsep.join(
      [ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
  return env


def _arguments(model_dir: str, gin_file: str) -> List[str]:
  return ["--model_dir=" + model_dir, "--gin_file=" + gin_file,
          "--gin_file=" + VARIANT_GIN, "--cpu_devices=2",
          "--gin.mesh_shape.model=2"]


def _events(model_dir: str) -> List[str]:
  train = os.path.join(model_dir, "train")
  if not os.path.isdir(train):
    return []
  return sorted(os.path.join(train, name) for name in os.listdir(train)
                if name.startswith("events.out.tfevents."))


def _scalars_of(paths: List[str]) -> Dict[str, Dict[int, float]]:
  """The scalars of some event files only."""
  with tempfile.TemporaryDirectory() as directory:
    for path in paths:
      shutil.copy(path, directory)
    return {name: dict(values) for name, values in
            summaries.read_scalars(directory).items()}


def _committed(step_dir: str) -> bool:
  """Whether a step directory holds every file of orbax's commit."""
  metadata = os.path.join(step_dir, "_CHECKPOINT_METADATA")
  if not (os.path.isfile(metadata) and
          os.path.isfile(os.path.join(step_dir, "commit_success.txt")) and
          os.path.isfile(os.path.join(step_dir, checkpoints.STATE,
                                      "_METADATA"))):
    return False
  with open(metadata) as f:
    return isinstance(json.load(f).get("commit_timestamp_nsecs"), int)


def _result(model_dir: str, returncode: int, stderr: str,
            events_before: List[str]) -> Result:
  """What a run printed and wrote, and the model directory as it left it."""
  start = None
  for line in stderr.splitlines():
    match = START.match(line)
    if match:
      start = int(match.group(2))
  assert os.path.isdir(model_dir), stderr[-3000:]
  names = sorted(os.listdir(model_dir))
  prefix = checkpoints.STEP_PREFIX + "_"
  steps = sorted(int(n[len(prefix):]) for n in names
                 if n.startswith(prefix) and n[len(prefix):].isdigit())
  temporary = [n for n in names if TMP_SUFFIX in n]
  # A read-only manager: it neither removes nor writes anything.
  manager = ocp.CheckpointManager(
      os.path.abspath(model_dir), options=ocp.CheckpointManagerOptions(
          step_prefix=checkpoints.STEP_PREFIX, read_only=True))
  try:
    latest = manager.latest_step()
  finally:
    manager.close()
  unfinished = [s for s in steps if not _committed(
      os.path.join(model_dir, "%s%d" % (prefix, s)))]
  own = [p for p in _events(model_dir) if p not in events_before]
  return Result(returncode, stderr, start, _scalars_of(own), steps,
                temporary, latest, unfinished)


def _run(model_dir: str, gin_file: str, prefix=()) -> Result:
  """Runs the command to its end."""
  before = _events(model_dir)
  done = subprocess.run(
      [sys.executable] + list(prefix) + _arguments(model_dir, gin_file),
      env=_env(os.path.dirname(model_dir)), stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE, text=True, timeout=TIMEOUT, check=False)
  return _result(model_dir, done.returncode, done.stderr, before)


def _run_killed_after(model_dir: str, gin_file: str, step: int) -> Result:
  """Runs the command and SIGKILLs it once it reports `step`."""
  before = _events(model_dir)
  process = subprocess.Popen(
      [sys.executable, "-m", COMMAND] + _arguments(model_dir, gin_file),
      env=_env(os.path.dirname(model_dir)), stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE, text=True)
  lines = []
  try:
    for line in process.stderr:
      lines.append(line)
      if line.startswith("step %d/%d " % (step, N)):
        os.kill(process.pid, signal.SIGKILL)
        break
    lines.append(process.communicate(timeout=TIMEOUT)[1])
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  return _result(model_dir, process.returncode, "".join(lines), before)


def _check_killed(result: Result) -> None:
  assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]


def _assert_same(result: Result, reference: Result, steps) -> None:
  """The run's loss and gradient norm at `steps` equal the reference's."""
  for name in ("loss", "grad_norm"):
    ours, theirs = result.scalars[name], reference.scalars[name]
    for step in steps:
      assert step in ours, (name, step, sorted(ours))
      assert ours[step] == theirs[step], (name, step, ours, theirs)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("resume"))
  with open(os.path.join(directory, "tiny.gin"), "w") as f:
    f.write(GIN)
  return directory


@pytest.fixture(scope="module")
def gin_file(workdir):
  return os.path.join(workdir, "tiny.gin")


@pytest.fixture(scope="module")
def reference(workdir, gin_file):
  return _run(os.path.join(workdir, "reference"), gin_file,
              ("-m", COMMAND))


@pytest.fixture(scope="module")
def model_dir(workdir):
  return os.path.join(workdir, "interrupted")


@pytest.fixture(scope="module")
def killed(model_dir, gin_file):
  return _run_killed_after(model_dir, gin_file, KILL_AFTER)


@pytest.fixture(scope="module")
def cut_step(killed):
  """The step whose save the second run is killed in.

  The second save of that run: its first is committed before the second
  starts (orbax waits for the previous save).
  """
  assert killed.latest is not None, killed.stderr[-3000:]
  step = (killed.latest // INTERVAL + 2) * INTERVAL
  assert step <= N, "the first run got too far before it was killed"
  return step


@pytest.fixture(scope="module")
def killed_mid_save(killed, cut_step, model_dir, gin_file):
  del killed  # runs after it, in its model directory
  return _run(model_dir, gin_file, ("-c", KILL_MID_SAVE,
                                    "%s_%d" % (checkpoints.STEP_PREFIX,
                                               cut_step)))


@pytest.fixture(scope="module")
def resumed(killed_mid_save, model_dir, gin_file):
  del killed_mid_save  # runs after it, in its model directory
  return _run(model_dir, gin_file, ("-m", COMMAND))


def test_uninterrupted_run(reference):
  assert reference.returncode == 0, reference.stderr[-3000:]
  assert reference.start == 0
  for name in ("loss", "grad_norm"):
    assert sorted(reference.scalars[name]) == list(range(1, N + 1))
  # Dropout and the input change from step to step: equal losses below
  # are not equal by chance.
  assert len(set(reference.scalars["loss"].values())) == N
  assert reference.latest == N
  assert N in reference.steps and reference.steps[-1] == N
  assert not reference.unfinished
  assert not reference.temporary


def test_killed_after_a_step(reference, killed):
  _check_killed(killed)
  logged = sorted(killed.scalars["loss"])
  assert logged[0] == 1 and logged[-1] >= KILL_AFTER
  _assert_same(killed, reference, logged)
  # The newest checkpoint listed is a committed one, before the kill.
  assert killed.latest is not None and killed.latest <= logged[-1] < N
  assert killed.latest == killed.steps[-1]
  assert not killed.unfinished


def test_killed_mid_save(reference, killed, cut_step, killed_mid_save,
                         model_dir):
  result = killed_mid_save
  _check_killed(result)
  assert result.start == killed.latest
  logged = sorted(result.scalars["loss"])
  assert logged[0] == killed.latest + 1 and logged[-1] >= cut_step
  _assert_same(result, reference, logged)
  # The save of cut_step was cut short in its commit: its temporary
  # directory holds everything, commit marker included, but it is not a
  # checkpoint: the newest is the run's previous save.
  prefix = "%s_%d%s" % (checkpoints.STEP_PREFIX, cut_step, TMP_SUFFIX)
  cut = [n for n in result.temporary if n.startswith(prefix)]
  assert len(cut) == 1, result.temporary
  assert os.path.isfile(os.path.join(model_dir, cut[0],
                                     "commit_success.txt")), cut
  assert cut_step not in result.steps
  assert result.latest == cut_step - INTERVAL == result.steps[-1]
  assert not result.unfinished


def test_resumed_run(reference, killed_mid_save, cut_step, resumed,
                     model_dir):
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  # From the last committed checkpoint, not from the temporary directory.
  assert resumed.start == cut_step - INTERVAL == killed_mid_save.latest
  assert sorted(resumed.scalars["loss"]) == list(
      range(resumed.start + 1, N + 1))
  _assert_same(resumed, reference, range(resumed.start + 1, N + 1))
  # The event files of the three runs together (the newest value of each
  # step): the reference's curve.
  merged = summaries.read_scalars(os.path.join(model_dir, "train"))
  for name in ("loss", "grad_norm"):
    assert merged[name] == reference.scalars[name], name
  assert resumed.latest == N == resumed.steps[-1]
  assert not resumed.unfinished
  assert not resumed.temporary
