# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Pre-emption and same-seed runs through the stock `t5_mesh_transformer`.

A pre-emptible TPU job is killed at any moment and started again with the
same command (docs/preemption.md). Here a tiny training run is SIGKILLed (its
whole process group) after a random step, and another one while it writes a
checkpoint; each is then run again with the identical command, which must
continue from the last checkpoint the killed run completed and stop at
`utils.run.train_steps`, leaving the checkpoints `save_checkpoints_steps`
and `keep_checkpoint_max` promise, every one of them readable.

The kill points are random. The test prints them; MTF_SYNTH_KILL_STEP and
MTF_SYNTH_KILL_SAVE force them (`pytest -s` shows the print). The kill comes
when the test reads the trigger line, so on a busy machine the run may have
gone on a little (and written another checkpoint): the checks follow what
the state file lists after the kill.

Two fresh runs with the same graph-level seed (and TensorFlow resource
variables) log the same loss at every step, bit for bit; the two killed runs,
fresh runs of the same command without it, are the negative control: their
losses differ from step 1.
"""

import concurrent.futures
import dataclasses
import math
import os
import random
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import graph_files
import graph_optimizer
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import progress
from mtf_synthesizer.jobs import runner

# Runs the stock CLI: `make test-fast` skips it.
pytestmark = pytest.mark.slow

# Each checkpoint costs seconds (mostly the graph's .meta file): few of them,
# and a one-layer model, keep the six runs short.
STEPS = 6
SAVE_EVERY = 3
KEEP = 2
LENGTH = 32
BATCH = 2
DIMS = {"num_layers": 1}
TIMEOUT = 900
KILL_STEP_ENV = "MTF_SYNTH_KILL_STEP"
KILL_SAVE_ENV = "MTF_SYNTH_KILL_SAVE"
# Every INFO line comes twice (TensorFlow's and absl's handler): the tf form.
SAVING = re.compile(r"^INFO:tensorflow:Saving checkpoints for (\d+) into")
RESTORING = re.compile(r"^INFO:tensorflow:Restoring parameters from (\S+)")
SKIPPING = "Skipping training since max_steps has already saved"
# The graph-level seed (initialisers, and through it tf.data's shuffle and the
# span-corruption noise) and resource variables (reads of a variable in the
# train step no longer race with its in-place update): docs/preemption.md.
SEEDED = (
    "utils.run.train_model_fn = @mtf_synthesizer.deterministic_train_model",
    "mtf_synthesizer.deterministic_train_model.tf_random_seed = 1",
)
STEP_LINE = progress._STEP_LINE  # pylint: disable=protected-access


def _command(model_dir: str,
             gin_params: Sequence[str] = ()) -> commands.Command:
  """The training command of every run here (tiny model, short sequences).

  Args:
    model_dir: the model directory.
    gin_params: bindings after the test's own.

  Returns:
    The Command.
  """
  return commands.local_train(
      model_dir, "random", steps=STEPS, length=LENGTH, batch_size=BATCH,
      dims=DIMS,
      gin_params=["utils.run.save_checkpoints_steps = %d" % SAVE_EVERY,
                  "utils.run.keep_checkpoint_max = %d" % KEEP] +
      list(gin_params),
      # TF's defaults: the .meta files too, and the graph optimizer.
      env={graph_files.ENV_VAR: "1", graph_optimizer.ENV_VAR: "1"})


def _promised(last_step: int) -> List[int]:
  """The checkpoints a run that saved up to `last_step` keeps.

  Args:
    last_step: the last checkpoint written.

  Returns:
    The newest KEEP of 0, SAVE_EVERY, ..., last_step.
  """
  return list(range(0, last_step + 1, SAVE_EVERY))[-KEEP:]


class Preempted(Exception):
  """Raised by a line callback; `runner.run` then SIGKILLs the group."""


@dataclasses.dataclass
class Watch:
  """Collects what a run logs; optionally pre-empts it.

  `runner.run` runs a command with a timeout in its own process group and,
  when the line callback raises, SIGKILLs that group before re-raising: the
  kill comes the moment the trigger line is read.

  Attributes:
    kill_after_step: kill on the n-th step line of this run (that step's loss
      is computed; its checkpoint, if one is due, is not written yet).
    kill_at_save: kill on the line that announces the checkpoint of this
      step, while the saver writes it.
    steps: (step as mesh prints it, loss) per step line, in order.
    saves: the steps of "Saving checkpoints for", in order.
    restored: the checkpoint paths the run restored.
    skipped: whether the run found its steps already done.
    killed: whether the run was killed.
  """
  kill_after_step: Optional[int] = None
  kill_at_save: Optional[int] = None
  steps: List[Tuple[int, float]] = dataclasses.field(default_factory=list)
  saves: List[int] = dataclasses.field(default_factory=list)
  restored: List[str] = dataclasses.field(default_factory=list)
  skipped: bool = False
  killed: bool = False

  def __call__(self, line: str) -> None:
    """Records one line of output; raises Preempted at the kill point."""
    m = STEP_LINE.match(line)
    if m:
      self.steps.append((int(m.group(2)), float(m.group(1))))
      if len(self.steps) == self.kill_after_step:
        raise Preempted()
      return
    m = SAVING.match(line)
    if m:
      self.saves.append(int(m.group(1)))
      if self.saves[-1] == self.kill_at_save:
        raise Preempted()
      return
    m = RESTORING.match(line)
    if m:
      self.restored.append(m.group(1))
    elif SKIPPING in line:
      self.skipped = True


def _run(command: commands.Command, log_path: str, watch: Watch) -> Watch:
  """Runs a command to its end or to the watch's kill point.

  Args:
    command: the Command.
    log_path: its log.
    watch: the line callback.

  Returns:
    The watch, `killed` set if it pre-empted the run.
  """
  try:
    result = runner.run(command, log_path, on_line=watch, timeout=TIMEOUT)
  except Preempted:
    watch.killed = True
    return watch
  assert result.returncode == 0, result.output[-3000:]
  return watch


def _listed(model_dir: str) -> List[int]:
  """The steps of the checkpoints the model directory's state file lists.

  Args:
    model_dir: the model directory.

  Returns:
    The steps of `all_model_checkpoint_paths`, in order; the state's
    `model_checkpoint_path` is checked to be the last of them.
  """
  state = tf.train.get_checkpoint_state(model_dir)
  names = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
  assert os.path.basename(state.model_checkpoint_path) == names[-1]
  steps = [int(re.fullmatch(r"model\.ckpt-(\d+)", n).group(1)) for n in names]
  return steps


def _on_disk(model_dir: str) -> List[int]:
  """The steps of the checkpoint index files in the model directory."""
  return sorted(int(m.group(1)) for m in (
      re.fullmatch(r"model\.ckpt-(\d+)\.index", n)
      for n in os.listdir(model_dir)) if m)


def _assert_listed_and_on_disk(listed: Sequence[int],
                               on_disk: Sequence[int]) -> None:
  """The state file lists what it promises; the disk holds at most one more.

  The saver writes checkpoint N, replaces the state file, then deletes the
  checkpoint that fell out of the list. A kill before the state file is
  replaced can leave N's files unlisted (the rerun writes N again); a kill
  before the deletion leaves the old one on disk, unlisted, and no later run
  deletes it.

  Args:
    listed: the listed checkpoints' steps.
    on_disk: the steps of the index files.
  """
  assert listed == _promised(listed[-1])
  assert set(listed) <= set(on_disk)
  extra = sorted(set(on_disk) - set(listed))
  assert extra in ([], [listed[0] - SAVE_EVERY], [listed[-1] + SAVE_EVERY]), (
      listed, on_disk)


def _unreadable(model_dir: str, steps: Sequence[int]) -> Dict[int, str]:
  """Reads every variable of every checkpoint.

  Args:
    model_dir: the model directory.
    steps: the checkpoints' steps.

  Returns:
    {step: what is wrong} for the checkpoints that do not read, hold a
    non-finite value or a `global_step` other than their step; {} if none.
  """
  problems = {}
  for step in steps:
    try:
      reader = tf.train.load_checkpoint(
          os.path.join(model_dir, "model.ckpt-%d" % step))
      names = sorted(reader.get_variable_to_shape_map())
      values = {n: reader.get_tensor(n) for n in names}
      bad = [n for n, v in values.items()
             if np.issubdtype(v.dtype, np.floating) and
             not np.all(np.isfinite(v))]
      if len(names) < 2 or bad:
        problems[step] = "%d variables, non-finite: %s" % (len(names), bad)
      elif values["global_step"] != step:
        problems[step] = "global_step %d" % values["global_step"]
    except (tf.errors.OpError, ValueError) as e:
      problems[step] = repr(e)
  return problems


@dataclasses.dataclass
class Chain:
  """A killed run and its rerun.

  Attributes:
    model_dir: the model directory.
    first: the killed run.
    listed_after_kill: the checkpoints listed after the kill.
    on_disk_after_kill: the checkpoint index files after the kill.
    unreadable_after_kill: `_unreadable` of the listed ones, then.
    temporary_after_kill: the unfinished sharded saves (`*_temp`) then,
      each with the files in it.
    second: the rerun with the same command.
  """
  model_dir: str
  first: Watch
  listed_after_kill: List[int]
  on_disk_after_kill: List[int]
  unreadable_after_kill: Dict[int, str]
  temporary_after_kill: Dict[str, List[str]]
  second: Watch


def _temporary(model_dir: str) -> Dict[str, List[str]]:
  """The unfinished sharded saves (`*_temp`) in model_dir, with their files."""
  paths = {n: os.path.join(model_dir, n)
           for n in sorted(os.listdir(model_dir)) if "_temp" in n}
  return {n: sorted(os.listdir(p)) if os.path.isdir(p) else []
          for n, p in paths.items()}


def _kill_and_rerun(model_dir: str, watch: Watch) -> Chain:
  """Runs the command until `watch` kills it, then runs it again.

  Args:
    model_dir: the model directory.
    watch: the first run's watch (with its kill point).

  Returns:
    The Chain.
  """
  command = _command(model_dir)
  first = _run(command, model_dir + ".killed.log", watch)
  assert first.killed, "the run ended before its kill point"
  listed, on_disk = _listed(model_dir), _on_disk(model_dir)
  unreadable = _unreadable(model_dir, listed)
  temporary = _temporary(model_dir)
  second = _run(command, model_dir + ".rerun.log", Watch())
  return Chain(model_dir, first, listed, on_disk, unreadable, temporary,
               second)


def _forced_or(env: str, choices: Sequence[int], rng: random.Random) -> int:
  """The kill point: the environment's if set, else a random choice."""
  value = os.environ.get(env)
  return int(value) if value else rng.choice(list(choices))


@pytest.fixture(scope="module")
def preempted(tmp_path_factory):
  """Two killed-and-rerun training runs, side by side.

  Returns:
    {"step": killed after a random step, "save": killed while writing a
    random checkpoint}, each a Chain.
  """
  rng = random.Random(int.from_bytes(os.urandom(8), "little"))
  kill_step = _forced_or(KILL_STEP_ENV, range(1, STEPS + 1), rng)
  kill_save = _forced_or(KILL_SAVE_ENV,
                         range(SAVE_EVERY, STEPS + 1, SAVE_EVERY), rng)
  print("\npre-emption: SIGKILL after step line %d (%s=%d), and while "
        "writing checkpoint %d (%s=%d)" % (kill_step, KILL_STEP_ENV, kill_step,
                                           kill_save, KILL_SAVE_ENV,
                                           kill_save))
  root = tmp_path_factory.mktemp("preempted")
  jobs = {"step": Watch(kill_after_step=kill_step),
          "save": Watch(kill_at_save=kill_save)}
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    futures = {name: pool.submit(_kill_and_rerun, str(root / name), watch)
               for name, watch in jobs.items()}
    return {name: f.result() for name, f in futures.items()}


def _assert_resumed(chain: Chain) -> None:
  """The rerun went on from the newest listed checkpoint to STEPS.

  Args:
    chain: the Chain.
  """
  restored_step = chain.listed_after_kill[-1]
  second = chain.second
  if restored_step == STEPS:
    # Killed after the state file named the last checkpoint: nothing to do.
    assert second.skipped and not second.steps
  else:
    assert [os.path.basename(p) for p in second.restored] == [
        "model.ckpt-%d" % restored_step]
    # It saves the restored state first, then every SAVE_EVERY steps.
    assert second.saves == list(range(restored_step, STEPS + 1, SAVE_EVERY))
    # One step line per step left. The step number mesh prints is
    # global_step read with no ordering against the step's own increment:
    # the step before or after.
    assert len(second.steps) == STEPS - restored_step
    assert second.steps[0][0] in (restored_step, restored_step + 1)
    assert all(math.isfinite(loss) for _, loss in second.steps)
  final = _listed(chain.model_dir)
  assert final == _promised(STEPS)
  # The rerun deletes what falls out of its list, not what a kill left.
  assert (sorted(set(_on_disk(chain.model_dir)) - set(final)) ==
          sorted(set(chain.on_disk_after_kill) - set(chain.listed_after_kill)
                 - set(final)))
  # The rerun's own sharded saves (`model.ckpt-N_temp/`) are all merged and
  # removed. A file the kill left half-written in one stays, and with it the
  # folder: TF removes the folder only once it is empty.
  for name, files in _temporary(chain.model_dir).items():
    assert set(files) <= set(chain.temporary_after_kill.get(name, ())), (
        name, files, chain.temporary_after_kill)
  assert not _unreadable(chain.model_dir, final)


def _report(chain: Chain, what: str) -> None:
  """Prints where a run was killed and what it left."""
  print("\n%s: state file lists %s, index files %s, temporary %s; the rerun "
        "restored %s and logged %d steps" % (
            what, chain.listed_after_kill, chain.on_disk_after_kill,
            chain.temporary_after_kill,
            [os.path.basename(p) for p in chain.second.restored],
            len(chain.second.steps)))


def test_sigkill_after_a_random_step_resumes(preempted):
  chain = preempted["step"]
  kill_step = chain.first.kill_after_step
  _report(chain, "killed after step line %d" % kill_step)
  assert len(chain.first.steps) == kill_step
  # Step line k is printed while step k runs, after the checkpoints up to
  # step k - 1 were written.
  seen = (kill_step - 1) // SAVE_EVERY * SAVE_EVERY
  assert chain.first.saves == list(range(0, seen + 1, SAVE_EVERY))
  # The kill comes when the test reads the line; by then the run may have
  # gone on, and written more checkpoints.
  assert seen <= chain.listed_after_kill[-1] <= STEPS
  _assert_listed_and_on_disk(chain.listed_after_kill, chain.on_disk_after_kill)
  assert not chain.unreadable_after_kill
  _assert_resumed(chain)


def test_sigkill_while_writing_a_checkpoint_resumes(preempted):
  chain = preempted["save"]
  kill_save = chain.first.kill_at_save
  _report(chain, "killed while writing checkpoint %d" % kill_save)
  assert chain.first.saves == list(range(0, kill_save + 1, SAVE_EVERY))
  # The state file is replaced (atomically) after the tensors are written:
  # the checkpoint being written is listed or not, never half there.
  assert chain.listed_after_kill[-1] >= kill_save - SAVE_EVERY
  _assert_listed_and_on_disk(chain.listed_after_kill, chain.on_disk_after_kill)
  assert not chain.unreadable_after_kill
  _assert_resumed(chain)


def test_fresh_runs_without_seeds_differ(preempted):
  """Negative control: the same command twice, no seed, step 1 differs."""
  first = preempted["step"].first.steps[0]
  second = preempted["save"].first.steps[0]
  print("\nstep 1 loss without seeds: %r, %r" % (first[1], second[1]))
  assert first[1] != second[1]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
  """Two fresh runs of the same command with the SEEDED bindings.

  Returns:
    Two Watches.
  """
  root = tmp_path_factory.mktemp("seeded")

  def train(name):
    model_dir = str(root / name)
    return _run(_command(model_dir, SEEDED), model_dir + ".log", Watch())

  # Side by side, on a machine busy with both: the step's increment is
  # ordered after the updates that read the step (test_determinism.py);
  # unordered, the two runs drifted apart at the third step (1.4856 and
  # 1.4848) once.
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    return list(pool.map(train, ["a", "b"]))


def test_same_seed_runs_are_identical(seeded):
  first, second = seeded
  print("\nlosses with the seed: %r\n                      %r" % (
      [loss for _, loss in first.steps], [loss for _, loss in second.steps]))
  assert len(first.steps) == len(second.steps) == STEPS
  # Only the losses: the step number mesh prints races with the increment.
  assert [loss for _, loss in first.steps] == [
      loss for _, loss in second.steps]


def test_graph_files_are_written_by_default(preempted):
  """TF's default (MTF_SYNTH_GRAPH_FILES=1): the graph beside checkpoints."""
  chain = preempted["step"]
  model_dir = chain.model_dir
  assert os.path.isfile(os.path.join(model_dir, "graph.pbtxt"))
  # TF's Saver.save lists a checkpoint in the state file, then writes its
  # .meta: a kill in between leaves the newest checkpoint listed at the kill
  # without one (and a rerun that finds every step done writes none). Every
  # other listed checkpoint was written whole, as was each the rerun saved.
  interrupted = {chain.listed_after_kill[-1]} - set(chain.second.saves)
  whole = [s for s in _listed(model_dir) if s not in interrupted]
  assert whole
  for step in whole:
    assert os.path.isfile(os.path.join(model_dir, "model.ckpt-%d.meta" % step))
