# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The small-scale reproduction's plan (tools/reproduce.py): which models run
where, what their commands bind, and how seeds are summarised and judged.

The runs themselves are the study (docs/reproduction.md); here every command
of the default study is parsed by gin as the stock CLI parses it, and its
layer stacks are built.
"""

import json
import math
import os
import signal
import statistics
import sys
import threading
import time
from unittest import mock

import gin
import mesh_tensorflow.transformer
from mesh_tensorflow.transformer import transformer
import pytest

import conftest
import mtf_synthesizer as ms
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import runner
import t5.models
from workbench import checkout
from workbench import reproduction

for _module in (mesh_tensorflow.transformer, t5.models):
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(_module.__file__), "gin"))

R = reproduction
TASKS = [R.TASKS[t] for t in R.DEFAULT_TASKS]


@pytest.fixture(autouse=True)
def _clean_gin():
  yield
  gin.clear_config()


def test_models_are_every_variant_and_every_baseline_once():
  assert [m.name for m in R.MODELS] == list(attentions.VARIANT_NAMES) + list(
      attentions.BASELINE_NAMES)


def test_only_a_non_causal_baseline_skips_the_language_model():
  skipped = {(t.name, m.name) for t in TASKS for m in R.MODELS
             if not R.applies_to(m, t)}
  assert skipped == {("lm", "linformer")}


def test_every_ordering_names_models_and_a_task_of_the_study():
  for o in R.ORDERINGS:
    assert o.task in R.DEFAULT_TASKS
    for label in (o.better, o.worse):
      assert R.applies_to(R.model(label), R.TASKS[o.task]), o


def _stacks_of(command):
  """Parses a command's gin files and bindings as the stock CLI does (after
  mesh's defaults.gin); builds its layer stacks."""
  gin.clear_config()
  gin.parse_config_files_and_bindings(["defaults.gin"] +
                                      list(command.gin_files),
                                      list(command.gin_params))
  stacks = {}
  for scope in ("encoder", "decoder", None):
    with gin.config_scope(scope):
      stacks[scope or "unscoped"] = transformer.make_layer_stack().layers
  return stacks


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_each_command_parses_and_puts_the_model_in_the_stack_it_runs(task):
  for model in R.MODELS:
    if not R.applies_to(model, task):
      continue
    command = R.train_command(task, model, "/tmp/unused", seed=7)
    stacks = _stacks_of(command)
    # The stack the task's model is built from.
    stack = stacks["encoder" if task.model == "bitransformer" else "unscoped"]
    expected = (getattr(ms, model.layer) if model.is_baseline
                else ms.SynthesizerAttention)
    assert type(stack[0]) is expected, (task.name, model.name)
    assert gin.query_parameter("mesh_train_dataset_fn.seed") == 7
    assert gin.query_parameter(
        "mtf_synthesizer.deterministic_train_model.tf_random_seed") == 7
    if model.name == "local_attention":
      assert stack[0].radius == R.LOCAL_RADIUS < task.length
    if model.name == "linformer":
      assert stack[0].k == task.length // 4
      if task.model == "bitransformer":  # the decoder keeps its own
        assert type(stacks["decoder"][0]) is (
            mesh_tensorflow.transformer.transformer_layers.SelfAttention)


def test_commands_differ_only_in_the_seed_bindings():
  task, model = R.TASKS["presence"], R.model("R")
  one = R.train_command(task, model, "/tmp/a", 1)
  two = R.train_command(task, model, "/tmp/a", 2)
  assert one.gin_files == two.gin_files
  differ = [(a, b) for a, b in zip(one.gin_params, two.gin_params) if a != b]
  assert len(differ) == 2 and all("seed" in a for a, _ in differ)


def _runs(task, by_model):
  runs = {}
  for name, values in by_model.items():
    for seed, value in enumerate(values, 1):
      runs["%s/%s/seed%d" % (task, name, seed)] = {
          "task": task, "model": name, "seed": seed, "status": 0,
          "metric": value, "steps_per_sec": 10.0 + seed}
  return runs


def test_cells_summarise_seeds_and_leave_out_failed_runs():
  runs = _runs("lm", {"vanilla": [2.0, 2.2, 2.4], "random": [1.9]})
  runs["lm/random/seed2"] = {"task": "lm", "model": "random", "seed": 2,
                             "status": 1, "metric": None,
                             "steps_per_sec": None}
  cell = R.cells(runs)["lm"]["vanilla"]
  assert cell.n == 3
  assert cell.mean == pytest.approx(2.2)
  # The sample standard deviation, by hand: sqrt((0.04 + 0 + 0.04) / 2).
  assert cell.std == pytest.approx(math.sqrt(0.04))
  assert R.cells(runs)["lm"]["random"].values == [1.9]


def test_judge_tells_orderings_apart_from_seed_noise():
  ordering = R.Ordering("lm", "V", "R", "")
  # Loss: lower is better. V clearly lower than R.
  v, r = R.Cell([2.0, 2.01, 1.99]), R.Cell([2.3, 2.31, 2.29])
  assert R.judge(ordering, {"V": v, "R": r}, lower_is_better=True) == "holds"
  assert R.judge(ordering, {"V": r, "R": v},
                 lower_is_better=True) == "reversed"
  # Accuracy: higher is better, so the same numbers reverse.
  assert R.judge(ordering, {"V": v, "R": r},
                 lower_is_better=False) == "reversed"
  # Means 0.1 apart, each std 0.1 over 3 seeds: 2 * sqrt(2 * 0.01 / 3)
  # = 0.163 > 0.1.
  noisy_v, noisy_r = R.Cell([1.9, 2.0, 2.1]), R.Cell([2.0, 2.1, 2.2])
  assert R.judge(ordering, {"V": noisy_v, "R": noisy_r},
                 lower_is_better=True) == "within seed noise"
  assert R.judge(ordering, {"V": R.Cell([2.0]), "R": r},
                 lower_is_better=True) == "not measured"
  assert R.judge(ordering, {"V": v}, lower_is_better=True) == "not measured"


def test_tables_show_mean_std_seed_counts_and_inapplicable_cells():
  runs = _runs("lm", {"vanilla": [2.0, 2.2, 2.4], "random": [1.9, 2.1]})
  runs.update(_runs("listops", {"linformer": [40.0, 42.0, 44.0]}))
  table = R.cells(runs)
  tasks = [R.TASKS["lm"], R.TASKS["listops"]]
  models = [R.model("V"), R.model("R"), R.model("Linformer")]
  text = R.results_table(table, tasks, models)
  rows = {line.split(" | ")[0].lstrip("| "): line
          for line in text.splitlines()[2:]}
  assert "2.200 ± 0.200" in rows["V (vanilla)"]
  assert "2.000 ± 0.141 (n=2)" in rows["R (random)"]
  linformer = rows["Linformer (linformer)"].split(" | ")
  assert linformer[1] == "-" and linformer[2].startswith("42.0 ± 2.0")
  speeds = R.speed_table(table, tasks, models)
  assert "| V | %.1f |" % statistics.median([11.0, 12.0, 13.0]) in speeds
  orderings = R.orderings_table(table, tasks)
  line = [l for l in orderings.splitlines() if "| V > R |" in l][0]
  assert line.endswith("| within seed noise |")


def test_results_file_kept_elsewhere_is_read_and_guards_its_commit(
    tmp_path, monkeypatch, capsys):
  record = tmp_path / "kept" / "study.json"
  record.parent.mkdir()
  record.write_text(json.dumps({
      "commit": "0123abc",
      "runs": _runs("lm", {"vanilla": [2.0, 2.2, 2.4]})}))
  out = tmp_path / "out"
  args = ["--output_dir", str(out), "--results", str(record), "--tasks",
          "lm", "--models", "V"]
  assert conftest.run_tool("reproduce.py", args + ["--report_only"]) == 0
  tables = (out / "results.md").read_text()
  assert tables.startswith("Commit 0123abc;")
  assert "2.200 ± 0.200" in tables
  assert not (out / "results.json").exists()
  # Resuming a record of another commit is refused before any run starts.
  monkeypatch.setattr(checkout, "commit", lambda: "4567def")
  monkeypatch.setattr(R, "run_one", mock.Mock(side_effect=AssertionError))
  assert conftest.run_tool("reproduce.py", args) == 2
  assert "holds runs of commit 0123abc, this code is 4567def" in (
      capsys.readouterr().err)


def test_sigterm_kills_the_runs_in_progress_and_records_none(
    tmp_path, monkeypatch, capsys):
  # A stopped study (a batch system's SIGTERM) leaves no command writing
  # into a model directory, records no run, and starts no queued one.
  started = []

  def run_one(task, model_, seed, root):
    del root
    started.append(seed)
    result = runner.run([sys.executable, "-c",
                            "import time; time.sleep(120)"])
    return {"task": task.name, "model": model_.name, "seed": seed,
            "status": result.returncode, "log": None, "metric": None}

  monkeypatch.setattr(R, "run_one", run_one)
  processes = []

  def stop_when_both_run():
    deadline = time.time() + 60
    while time.time() < deadline:
      with runner._running_lock:  # pylint: disable=protected-access
        running = list(runner._running)  # pylint: disable=protected-access
      if len(running) == 2:
        processes.extend(running)
        break
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

  stopper = threading.Thread(target=stop_when_both_run)
  stopper.start()
  record = tmp_path / "record.json"
  begin = time.time()
  status = conftest.run_tool("reproduce.py", [
      "--output_dir", str(tmp_path / "out"), "--results", str(record),
      "--tasks", "presence", "--models", "V", "--seeds", "1,2,3",
      "--jobs", "2"])
  stopper.join()
  assert status == 130
  assert time.time() - begin < 60  # did not wait for the commands
  assert len(processes) == 2 and sorted(started) == [1, 2]
  assert all(p.poll() is not None for p in processes)
  assert not record.exists() or json.loads(record.read_text())["runs"] == {}
  assert "stopped; 0 runs are recorded" in capsys.readouterr().err
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
