# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""A small-scale reproduction of the paper's comparisons, offline on CPU.

Trains tiny models of every variant through the stock `t5_mesh_transformer`
on four offline tasks and evaluates each on its validation split:

  lm       pydocs_lm: byte-level language model, decoder only (Table 2's
           LM1B in miniature); validation loss in nats per byte.
  spans    pydocs_span_corruption: T5's objective on an encoder-decoder
           (Table 4 in miniature); validation loss per target byte.
  listops  listops: LRA's ListOps with an encoder-only classifier
           (Table 7's setting); validation accuracy (%).
  presence key_presence: two segments; is the letter of the first among
           the letters of the second? Content-based matching between
           segments (the sentence-pair tasks of Tables 5-6 in miniature);
           encoder-only, validation accuracy (%).

Not in the default set (`--tasks recall`): key_value_recall, the two-step
form (find the key, read its value), which no variant learned in 2000 steps
at this size (all near the 25-32% of guessing a value present).

Every run is a subprocess of the stock CLI with its own model directory
under `--output_dir/<task>/<variant>`; logs are kept there. Finished runs are
recorded in `results.json` as they end, so an interrupted study resumes
where it stopped (`--restart` starts over). At the end `results.md` holds
the table, with steps/s from the training event files.

  python tools/reproduce.py --output_dir runs/reproduce      # everything
  python tools/reproduce.py --tasks recall --variants vanilla,random
"""

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Dict, Optional, Sequence

from mtf_synthesizer import variants
from mtf_synthesizer.tools_lib import stock_cli


@dataclasses.dataclass(frozen=True)
class Task:
  """One task of the study.

  Attributes:
    name: short name (the results key).
    mixture: the seqio task.
    model: "lm", "bitransformer" or "classifier" (encoder only).
    length: sequence length (inputs and targets).
    batch: sequences per batch.
    steps: training steps.
    metric: "loss" (lower is better) or "accuracy".
    params: extra gin bindings.
  """
  name: str
  mixture: str
  model: str
  length: int
  batch: int
  steps: int
  metric: str
  params: Sequence[str] = ()


TASKS = {
    "lm": Task("lm", "pydocs_lm", "lm", 128, 16, 400, "loss"),
    "spans": Task("spans", "pydocs_span_corruption", "bitransformer", 128, 16,
                  400, "loss"),
    "listops": Task("listops", "listops", "classifier", 64, 32, 400,
                    "accuracy"),
    "recall": Task("recall", "key_value_recall", "classifier", 32, 64, 2000,
                   "accuracy",
                   ("t5_tasks.recall.recall_config.num_pairs = 4",)),
    "presence": Task("presence", "key_presence", "classifier", 32, 64, 600,
                     "accuracy"),
}
DEFAULT_TASKS = ("lm", "spans", "listops", "presence")
_TINY = {"d_model": 64, "num_layers": 2, "d_ff": 128, "num_heads": 4,
         "d_kv": 16}


def train_command(task: Task, variant: str,
                  model_dir: str) -> stock_cli.Command:
  """The stock CLI command that trains one variant on a task."""
  if task.model == "classifier":
    data_gin = "experiments/_encoder_classifier.gin"
  else:
    data_gin = stock_cli.DATASET_GIN
  params = list(task.params)
  if task.model in ("lm", "bitransformer"):
    params.append("utils.run.model_type = '%s'" % task.model)
  return stock_cli.local_train(
      model_dir, variant, task.steps, mixture=task.mixture,
      length=task.length, batch_size=task.batch, dims=_TINY,
      lengths={"targets": task.length} if task.model == "lm" else None,
      base_gin_files=("models/t5.1.1.small.gin", data_gin),
      gin_params=params)


def eval_command(task: Task, train: stock_cli.Command) -> stock_cli.Command:
  """The evaluation: perplexity or decode-and-score."""
  if task.metric == "loss":
    return stock_cli.perplexity_eval(train, eval_steps=10)
  return stock_cli.decode_eval(train, task.steps)


def read_metric(task: Task, model_dir: str) -> Optional[float]:
  """The task's validation metric from the evaluation's event files."""
  if task.metric == "loss":
    value = stock_cli.last_value(stock_cli.eval_scalars(
        model_dir, "eval_%s_validation" % task.mixture), "neg_log_perplexity")
    return -value if value is not None else None
  return stock_cli.last_value(
      stock_cli.eval_scalars(model_dir, "validation_eval"),
      "eval/%s/accuracy" % task.mixture)


def run_one(task: Task, variant: str, root: str) -> Dict:
  """Trains and evaluates one variant on one task."""
  model_dir = os.path.join(root, task.name, variant)
  os.makedirs(model_dir, exist_ok=True)
  train = train_command(task, variant, model_dir)
  label = "%s/%s" % (task.name, variant)
  env_vocab = os.environ.get("MTF_SYNTH_VOCAB")
  result = stock_cli.run_with_progress(
      train, os.path.join(model_dir, "train.log"), label + " train",
      task.steps)
  trained = result
  if result.returncode == 0:
    result = stock_cli.run_with_progress(
        eval_command(task, train), os.path.join(model_dir, "eval.log"),
        label + " eval", task.steps)
  status = result.returncode
  return {
      "task": task.name, "variant": variant, "status": status,
      "metric": read_metric(task, model_dir) if status == 0 else None,
      "steps_per_sec": (stock_cli.steps_per_sec(trained.scalars)
                        if status == 0 else None),
      "parameters": (stock_cli.count_parameters(model_dir)
                     if status == 0 else None),
      "vocabulary": env_vocab or "task default",
  }


def format_table(results: Dict[str, Dict], tasks: Sequence[Task],
                 names: Sequence[str]) -> str:
  """Markdown: one row per variant, metric and steps/s per task."""
  head = ["variant"]
  for t in tasks:
    unit = "loss" if t.metric == "loss" else "acc. %"
    head += ["%s %s" % (t.name, unit), "%s steps/s" % t.name]
  lines = ["| " + " | ".join(head) + " |",
           "|" + "---|" + "---:|" * (len(head) - 1)]
  for v in names:
    row = ["%s (%s)" % (variants.get(v).label, v)]
    for t in tasks:
      r = results.get("%s/%s" % (t.name, v))
      if not r or r["metric"] is None:
        row += ["n/a", "n/a"]
        continue
      row.append(("%.3f" if t.metric == "loss" else "%.1f") % r["metric"])
      row.append("%.1f" % r["steps_per_sec"] if r["steps_per_sec"] else "n/a")
    lines.append("| " + " | ".join(row) + " |")
  return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output_dir", default="runs/reproduce")
  parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
  parser.add_argument("--variants", default=",".join(variants.NAMES))
  parser.add_argument("--restart", action="store_true",
                      help="forget finished runs and start over")
  args = parser.parse_args(argv)
  tasks = [TASKS[t] for t in args.tasks.split(",")]
  names = args.variants.split(",")
  unknown = [v for v in names if v not in variants.NAMES]
  if unknown:
    parser.error("unknown variants %s; choose from %s" % (unknown,
                                                          variants.NAMES))
  os.makedirs(args.output_dir, exist_ok=True)
  results_path = os.path.join(args.output_dir, "results.json")
  results = {}
  if os.path.exists(results_path) and not args.restart:
    with open(results_path) as f:
      results = json.load(f)
  start = time.time()
  todo = [(t, v) for t in tasks for v in names
          if results.get("%s/%s" % (t.name, v), {}).get("status") != 0]
  print("%d runs to do, %d already done" % (
      len(todo), len(tasks) * len(names) - len(todo)), flush=True)
  for i, (task, variant) in enumerate(todo):
    print("[%d/%d, %.0f min] %s %s" % (i + 1, len(todo),
                                       (time.time() - start) / 60, task.name,
                                       variant), flush=True)
    results["%s/%s" % (task.name, variant)] = run_one(
        task, variant, args.output_dir)
    with open(results_path, "w") as f:
      json.dump(results, f, indent=1)
  table = format_table(results, tasks, names)
  with open(os.path.join(args.output_dir, "results.md"), "w") as f:
    f.write(table + "\n")
  print(table)
  failed = [k for k, r in results.items() if r["status"] != 0]
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
