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
import statistics
import sys
import time
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import demo  # pylint: disable=g-import-not-at-top

VARIANTS = ("vanilla", "random", "fixed_random", "factorized_random", "dense",
            "factorized_dense", "random_dense", "dense_vanilla",
            "random_vanilla", "factorized_random_vanilla")
LABELS = {"vanilla": "V", "random": "R", "fixed_random": "Fix",
          "factorized_random": "FR", "dense": "D", "factorized_dense": "FD",
          "random_dense": "R+D", "dense_vanilla": "D+V",
          "random_vanilla": "R+V", "factorized_random_vanilla": "FR+V"}


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


def flags(task: Task, variant: str, model_dir: str) -> List[str]:
  """Command-line arguments shared by a task's training and evaluation."""
  out = ["--module_import=mtf_synthesizer", "--module_import=t5_tasks",
         "--model_dir=" + model_dir, "--gin_file=models/t5.1.1.small.gin"]
  if task.model == "classifier":
    out.append("--gin_file=experiments/_encoder_classifier.gin")
    lengths = "{'inputs': %d, 'targets': %d}" % (task.length, task.length)
  else:
    out.append("--gin_file=dataset.gin")
    if task.model == "lm":
      lengths = "{'targets': %d}" % task.length
    else:
      lengths = "{'inputs': %d, 'targets': %d}" % (task.length, task.length)
  out.append("--gin_file=synthesizer/%s.gin" % variant)
  params = ["%s = %d" % kv for kv in _TINY.items()] + [
      "MIXTURE_NAME = '%s'" % task.mixture,
      "utils.run.sequence_length = %s" % lengths,
      "utils.run.batch_size = ('tokens_per_batch', %d)" % (
          task.batch * task.length),
      "utils.run.mesh_shape = ''", "utils.run.mesh_devices = ['']",
      "SynthesizerAttention.max_length = %d" % task.length,
      "utils.run.train_steps = %d" % task.steps,
      "utils.run.save_checkpoints_steps = %d" % task.steps,
  ] + list(task.params)
  if task.model == "lm":
    params.append("utils.run.model_type = 'lm'")
  elif task.model == "bitransformer":
    params.append("utils.run.model_type = 'bitransformer'")
  return out + ["--gin_param=" + p for p in params]


def eval_flags(task: Task) -> List[str]:
  """The evaluation's extra arguments: perplexity or decode-and-score."""
  common = ["--gin_param=utils.run.dataset_split = 'validation'"]
  if task.metric == "loss":
    return ["--gin_file=perplexity_eval.gin",
            "--gin_param=eval_checkpoint_step = -1",
            "--gin_param=utils.run.perplexity_eval_steps = 10"] + common
  return ["--gin_file=eval.gin",
          "--gin_param=eval_checkpoint_step = %d" % task.steps] + common


def read_metric(task: Task, model_dir: str) -> Optional[float]:
  """The task's validation metric from the evaluation's event files."""
  if task.metric == "loss":
    folders = [d for d in sorted(os.listdir(model_dir))
               if d.startswith("eval_%s_validation" % task.mixture)]
    tag = "neg_log_perplexity"
  else:
    folders = ["validation_eval"]
    tag = "eval/%s/accuracy" % task.mixture
  for folder in folders[::-1]:
    path = os.path.join(model_dir, folder)
    if os.path.isdir(path):
      values = demo.read_scalars(path).get(tag, [])
      if values:
        value = max(values)[2]  # the last step
        return -value if task.metric == "loss" else value
  return None


def run_one(task: Task, variant: str, root: str) -> Dict:
  """Trains and evaluates one variant on one task."""
  model_dir = os.path.join(root, task.name, variant)
  os.makedirs(model_dir, exist_ok=True)
  base = [demo.CLI] + flags(task, variant, model_dir)
  label = "%s/%s" % (task.name, variant)
  env_vocab = os.environ.get("MTF_SYNTH_VOCAB")
  status = demo.run_streaming(
      base, os.path.join(model_dir, "train.log"),
      demo.Progress(label + " train", task.steps))
  if status == 0:
    status = demo.run_streaming(
        base + eval_flags(task), os.path.join(model_dir, "eval.log"),
        demo.Progress(label + " eval", task.steps))
  train = demo.read_scalars(model_dir) if status == 0 else {}
  rates = [v for s, _, v in train.get("global_step/sec", []) if s > 1]
  return {
      "task": task.name, "variant": variant, "status": status,
      "metric": read_metric(task, model_dir) if status == 0 else None,
      "steps_per_sec": statistics.median(rates) if rates else None,
      "parameters": demo.count_parameters(model_dir) if status == 0 else None,
      "vocabulary": env_vocab or "task default",
  }


def format_table(results: Dict[str, Dict], tasks: Sequence[Task],
                 variants: Sequence[str]) -> str:
  """Markdown: one row per variant, metric and steps/s per task."""
  head = ["variant"]
  for t in tasks:
    unit = "loss" if t.metric == "loss" else "acc. %"
    head += ["%s %s" % (t.name, unit), "%s steps/s" % t.name]
  lines = ["| " + " | ".join(head) + " |",
           "|" + "---|" + "---:|" * (len(head) - 1)]
  for v in variants:
    row = ["%s (%s)" % (LABELS[v], v)]
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
  parser.add_argument("--variants", default=",".join(VARIANTS))
  parser.add_argument("--restart", action="store_true",
                      help="forget finished runs and start over")
  args = parser.parse_args(argv)
  tasks = [TASKS[t] for t in args.tasks.split(",")]
  variants = args.variants.split(",")
  unknown = [v for v in variants if v not in VARIANTS]
  if unknown:
    parser.error("unknown variants %s; choose from %s" % (unknown, VARIANTS))
  os.makedirs(args.output_dir, exist_ok=True)
  results_path = os.path.join(args.output_dir, "results.json")
  results = {}
  if os.path.exists(results_path) and not args.restart:
    with open(results_path) as f:
      results = json.load(f)
  start = time.time()
  todo = [(t, v) for t in tasks for v in variants
          if results.get("%s/%s" % (t.name, v), {}).get("status") != 0]
  print("%d runs to do, %d already done" % (
      len(todo), len(tasks) * len(variants) - len(todo)), flush=True)
  for i, (task, variant) in enumerate(todo):
    print("[%d/%d, %.0f min] %s %s" % (i + 1, len(todo),
                                       (time.time() - start) / 60, task.name,
                                       variant), flush=True)
    results["%s/%s" % (task.name, variant)] = run_one(
        task, variant, args.output_dir)
    with open(results_path, "w") as f:
      json.dump(results, f, indent=1)
  table = format_table(results, tasks, variants)
  with open(os.path.join(args.output_dir, "results.md"), "w") as f:
    f.write(table + "\n")
  print(table)
  failed = [k for k, r in results.items() if r["status"] != 0]
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
