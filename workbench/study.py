# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The seeded study of tools/reproduce.py: its record, its runs, its tables.

A study runs every (task, model, seed) of `workbench/reproduction.py` that
its record does not hold yet, `jobs` at a time, and records each finished
run at once (`results.json`), so that it resumes where it stopped; the
record names the commit of the code, and only that commit resumes it. On
Ctrl-C or SIGTERM the runs in progress are killed and not recorded.
"""

import concurrent.futures
import json
import os
import sys
import threading
import time
from typing import Callable, Optional, Sequence

from mtf_synthesizer.jobs import runner
from workbench import checkout
from workbench import reproduction


# How an accuracy cell counts a decode, said under the results table.
ACCURACY_NOTE = (
    "Accuracy is t5's `metrics.accuracy`: the share of validation examples "
    "whose decoded text equals the target exactly. The encoder-only "
    "classifier (`mtf_synthesizer.predict_labels`) writes the label by "
    "taking the most likely byte at each target position separately, so a "
    "decode can be neither label (\"nes\", \"yo\", \"ye\" for presence's "
    "\"yes\"/\"no\"); it counts as wrong. That is how a model that has not "
    "learnt presence, a balanced yes/no task, can score below 50%: its "
    "answers are not guesses between two labels. The results file keeps "
    "each run's accuracy, not its decodes.")


def write_tables(path: str, study: dict,
                 tasks: Sequence[reproduction.Task],
                 models: Sequence[reproduction.Model]) -> str:
  """Writes the study's tables (results, orderings, speed) to `path`.

  Args:
    path: results.md.
    study: the record ({"commit", "runs"}).
    tasks: the tasks, in the tables' order.
    models: the models, in the tables' order.

  Returns:
    The text written.
  """
  table = reproduction.cells(study["runs"])
  seeds = sorted({r["seed"] for r in study["runs"].values()})
  parts = [
      "Commit %s; seeds %s; cells are mean ± standard deviation over "
      "seeds." % (study["commit"], ", ".join(map(str, seeds))),
      reproduction.results_table(table, tasks, models)]
  if any(t.metric == "accuracy" for t in tasks):
    parts.append(ACCURACY_NOTE)
  parts += [
      "The paper's orderings (told apart: |difference of means| > 2 "
      "standard errors):",
      reproduction.orderings_table(table, tasks),
      "Training steps/s (median over seeds; other jobs may have shared the "
      "machine: not a speed comparison):",
      reproduction.speed_table(table, tasks, models)]
  text = "\n\n".join(parts)
  with open(path, "w") as f:
    f.write(text + "\n")
  return text


def _finished(record: Optional[dict]) -> bool:
  return bool(record) and record["status"] == 0 and (
      record["metric"] is not None)


def _run_all(one: Callable[..., None], jobs: Sequence[tuple], workers: int,
             stopping: threading.Event) -> bool:
  """Runs one(*job) for every job, `workers` at a time.

  On Ctrl-C or SIGTERM no job starts any more and the commands in progress
  are killed (runner.kill_running), so that none writes on into a model
  directory after the tool has gone; `stopping` is set first, so that
  their runs are not recorded as failed.

  Args:
    one: runs one job.
    jobs: the jobs' arguments.
    workers: how many jobs run at the same time.
    stopping: set when the tool is stopped.

  Returns:
    True when every job ran, False when the tool was stopped.
  """
  with runner.sigterm_raises_stopped():
    pool = concurrent.futures.ThreadPoolExecutor(workers)
    futures = []
    try:
      futures = [pool.submit(one, *job) for job in jobs]
      for future in futures:
        future.result()
      return True
    except (KeyboardInterrupt, runner.Stopped):
      stopping.set()
      pool.shutdown(wait=False, cancel_futures=True)
      # A job between its training and evaluation commands may start one
      # after a kill: kill until every job has returned.
      while not all(f.done() for f in futures):
        runner.kill_running()
        time.sleep(0.2)
      return False
    finally:
      pool.shutdown(wait=True)


def run(output_dir: str, tasks: Sequence[reproduction.Task],
        models: Sequence[reproduction.Model], seeds: Sequence[int],
        jobs: int = 1, results: Optional[str] = None,
        restart: bool = False, report_only: bool = False) -> int:
  """Runs (or resumes) a study and writes its tables.

  Args:
    output_dir: the runs' model directories and results.md.
    tasks: the tasks.
    models: the models (variants and baselines).
    seeds: the seeds.
    jobs: runs at the same time.
    results: the record (default: <output_dir>/results.json).
    restart: forget finished runs and start over.
    report_only: only write results.md from the record.

  Returns:
    The exit status: 0; 1 when a run failed; 2 when the record is of
    another commit; 130 when stopped.
  """
  os.makedirs(output_dir, exist_ok=True)
  results_path = results or os.path.join(output_dir, "results.json")
  commit = checkout.commit()
  study = {"commit": commit, "runs": {}}
  if report_only:
    with open(results_path) as f:
      study = json.load(f)
    print(write_tables(os.path.join(output_dir, "results.md"), study,
                        tasks, models))
    return 0
  if os.path.exists(results_path) and not restart:
    with open(results_path) as f:
      study = json.load(f)
    if study.get("commit") != commit or "runs" not in study:
      print("reproduce: %s holds runs of commit %s, this code is %s; every "
            "number of a table must come from one version of the code. Run "
            "that commit to resume, or --restart." % (
                results_path, study.get("commit"), commit), file=sys.stderr)
      return 2
  if commit.endswith("+dirty") or commit == "unknown":
    print("reproduce: warning: the code is %s; its results cannot be tied to "
          "a commit." % commit, file=sys.stderr)

  runs = [(t, m, s) for t in tasks for m in models for s in seeds
          if reproduction.applies_to(m, t)]
  todo = [(t, m, s) for t, m, s in runs
          if not _finished(study["runs"].get(reproduction.run_key(t, m, s)))]
  total = len(runs)
  print("commit %s: %d runs to do, %d already done" % (
      commit, len(todo), total - len(todo)), flush=True)
  lock = threading.Lock()
  start = time.time()
  done = [0]
  stopping = threading.Event()

  def one(task, model, seed):
    key = reproduction.run_key(task, model, seed)
    with lock:
      print("[%.0f min] start %s" % ((time.time() - start) / 60, key),
            flush=True)
    record = reproduction.run_one(task, model, seed, output_dir)
    if stopping.is_set():  # killed, not failed: not recorded
      return
    with lock:
      study["runs"][key] = record
      with open(results_path + ".tmp", "w") as f:
        json.dump(study, f, indent=1)
      os.replace(results_path + ".tmp", results_path)
      done[0] += 1
      metric = record["metric"]
      print("[%.0f min] %d/%d %s: %s" % (
          (time.time() - start) / 60, done[0], len(todo), key,
          "FAILED (exit %d), see %s" % (record["status"], record["log"])
          if record["status"] else "%.4g" % metric if metric is not None
          else "no metric"), flush=True)

  if not _run_all(one, todo, max(1, jobs), stopping):
    with lock:
      finished = sum(map(_finished, study["runs"].values()))
    print("reproduce: stopped; %d runs are recorded in %s (the runs in "
          "progress are not, and start over): the same command resumes."
          % (finished, results_path), file=sys.stderr)
    return 130
  print(write_tables(os.path.join(output_dir, "results.md"), study,
                      tasks, models))
  failed = [k for k, r in study["runs"].items() if r["status"] != 0]
  return 1 if failed else 0


