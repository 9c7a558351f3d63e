# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""A small-scale reproduction of the paper's comparisons, offline on CPU.

Trains tiny models of every variant and baseline through the stock
`t5_mesh_transformer`, with several seeds, on four offline tasks, and
evaluates each on its validation split (tasks, models and the paper's
orderings: `workbench/reproduction.py`):

  lm       pydocs_lm: byte-level language model, decoder only (Table 2's
           LM1B in miniature); validation loss in nats per byte.
  spans    pydocs_span_corruption: T5's objective on an encoder-decoder
           (Table 4 in miniature); validation loss per target byte.
  listops  listops: LRA's ListOps with an encoder-only classifier
           (Table 7's setting); validation accuracy (%).
  presence key_presence: is the letter of the first segment among the
           letters of the second? (the sentence-pair tasks of Tables 5-6 in
           miniature); encoder-only, validation accuracy (%).

Not in the default set (`--tasks recall`): key_value_recall, the two-step
form (find the key, read its value).

Every run has its own model directory, `<output_dir>/<task>/<model>/seed<n>`,
with its logs. Finished runs are recorded in `results.json` as they end, so
an interrupted study resumes where it stopped, in as many sittings as it
takes (Ctrl-C or SIGTERM kills the runs in progress, which are not
recorded and start over); the file also records the commit of the code,
and a study is only resumed by the same commit (`--restart` starts over).
`--results` puts that record elsewhere: the study of docs/reproduction.md
keeps it in the repo, docs/reproduction_results.json, so that it resumes
on any machine.
`results.md` holds the tables: mean ± standard deviation over seeds, and
which of the paper's orderings hold.

  python tools/reproduce.py --output_dir runs/reproduce           # everything
  python tools/reproduce.py --tasks presence --models V,R,DyConv --seeds 1
"""

import argparse
import concurrent.futures
import json
import os
import sys
import threading
import time
from typing import Callable, Optional, Sequence

# Run from the checkout: its packages first (workbench/checkout.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer.jobs import runner
from workbench import checkout
from workbench import reproduction


def _write_tables(path: str, study: dict, tasks, models) -> str:
  table = reproduction.cells(study["runs"])
  seeds = sorted({r["seed"] for r in study["runs"].values()})
  text = "\n\n".join([
      "Commit %s; seeds %s; cells are mean ± standard deviation over "
      "seeds." % (study["commit"], ", ".join(map(str, seeds))),
      reproduction.results_table(table, tasks, models),
      "The paper's orderings (told apart: |difference of means| > 2 "
      "standard errors):",
      reproduction.orderings_table(table, tasks),
      "Training steps/s (median over seeds; other jobs may have shared the "
      "machine: not a speed comparison):",
      reproduction.speed_table(table, tasks, models)])
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


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the study; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output_dir", default="runs/reproduce")
  parser.add_argument("--tasks", default=",".join(reproduction.DEFAULT_TASKS))
  parser.add_argument("--models", default=None,
                      help="variant and baseline names or labels (default: "
                      "all)")
  parser.add_argument("--seeds", default=",".join(
      map(str, reproduction.DEFAULT_SEEDS)))
  parser.add_argument("--jobs", type=int, default=1,
                      help="runs at the same time")
  parser.add_argument("--results", default=None,
                      help="the study's record of finished runs (default: "
                      "<output_dir>/results.json); docs/reproduction.md's "
                      "study keeps it at docs/reproduction_results.json")
  parser.add_argument("--restart", action="store_true",
                      help="forget finished runs and start over")
  parser.add_argument("--report_only", action="store_true",
                      help="only write results.md from results.json (any "
                      "version of this tool; the tables name the commit "
                      "that ran the study)")
  args = parser.parse_args(argv)
  checkout.use_for_subprocesses()
  try:
    tasks = [reproduction.TASKS[t] for t in args.tasks.split(",")]
  except KeyError as e:
    parser.error("unknown task %s; choose from %s" % (
        e, ", ".join(reproduction.TASKS)))
  try:
    models = ([reproduction.model(m) for m in args.models.split(",")]
              if args.models else list(reproduction.MODELS))
  except ValueError as e:
    parser.error(str(e))
  seeds = [int(s) for s in args.seeds.split(",")]

  os.makedirs(args.output_dir, exist_ok=True)
  results_path = args.results or os.path.join(args.output_dir,
                                             "results.json")
  commit = checkout.commit()
  study = {"commit": commit, "runs": {}}
  if args.report_only:
    with open(results_path) as f:
      study = json.load(f)
    print(_write_tables(os.path.join(args.output_dir, "results.md"), study,
                        tasks, models))
    return 0
  if os.path.exists(results_path) and not args.restart:
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
    record = reproduction.run_one(task, model, seed, args.output_dir)
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

  if not _run_all(one, todo, max(1, args.jobs), stopping):
    with lock:
      finished = sum(map(_finished, study["runs"].values()))
    print("reproduce: stopped; %d runs are recorded in %s (the runs in "
          "progress are not, and start over): the same command resumes."
          % (finished, results_path), file=sys.stderr)
    return 130
  print(_write_tables(os.path.join(args.output_dir, "results.md"), study,
                      tasks, models))
  failed = [k for k, r in study["runs"].items() if r["status"] != 0]
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
