# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The small-scale reproduction (tools/reproduce.py): tasks, models, seeds,
the stock-CLI runs, the summary over seeds and the paper's orderings.

Every run is one model (a variant of `attentions.py` or a baseline of
`attentions.py`) trained with one seed on one task through the stock
`t5_mesh_transformer`, then evaluated on the task's validation split.
`ORDERINGS` lists the paper's comparisons that the tasks stand in for; each
is judged from the means and standard deviations over seeds.
"""

import dataclasses
import math
import os
import shutil
import statistics
from typing import Dict, List, Optional, Sequence

from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import events
from mtf_synthesizer.jobs import runner


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
    stands_for: the paper's experiment it stands for.
    params: extra gin bindings.
  """
  name: str
  mixture: str
  model: str
  length: int
  batch: int
  steps: int
  metric: str
  stands_for: str = ""
  params: Sequence[str] = ()

  @property
  def causal(self) -> bool:
    """Whether every replaced self-attention is causal (a decoder-only LM)."""
    return self.model == "lm"


TASKS = {
    "lm": Task("lm", "pydocs_lm", "lm", 128, 16, 400, "loss",
               "Table 2's LM1B"),
    "spans": Task("spans", "pydocs_span_corruption", "bitransformer", 128, 16,
                  400, "loss", "Table 4's C4 span corruption"),
    "listops": Task("listops", "listops", "classifier", 64, 32, 400,
                    "accuracy", "Table 7's encoding-only classification"),
    "recall": Task("recall", "key_value_recall", "classifier", 32, 64, 2000,
                   "accuracy", "a two-step form of key_presence",
                   ("t5_tasks.recall.recall_config.num_pairs = 4",)),
    "presence": Task("presence", "key_presence", "classifier", 32, 64, 600,
                     "accuracy", "the sentence-pair tasks of Tables 5-6"),
}
DEFAULT_TASKS = ("lm", "spans", "listops", "presence")
DEFAULT_SEEDS = (1, 2, 3)
TINY = {"d_model": 64, "num_layers": 2, "d_ff": 128, "num_heads": 4,
        "d_kv": 16}
# Local attention's window in the study: (p - 8, p + 8] (causal: (p - 8, p]),
# so that it is local at these lengths (its default radius, 128, covers them).
LOCAL_RADIUS = 8


def baseline_params(name: str, task: Task) -> List[str]:
  """The study's bindings for a baseline at a task's length.

  Local attention gets a window of `LOCAL_RADIUS`; Linformer projects the
  length to a quarter of it (the Synthesizer paper: k = 32 at 512 tokens).

  Args:
    name: the baseline's name.
    task: the task.

  Returns:
    gin bindings.
  """
  if name == "local_attention":
    return ["WindowedSelfAttention.radius = %d" % LOCAL_RADIUS]
  if name == "linformer":
    return ["LinformerAttention.k = %d" % (task.length // 4)]
  return []


# The study's models: the table's variants and baselines.
Model = attentions.Attention
MODELS = attentions.VARIANTS + attentions.BASELINES


def applies_to(model_: Model, task: Task) -> bool:
  """Whether the model can run the task (Linformer is not causal)."""
  return model_.causal or not task.causal


def model(name: str) -> Model:
  """The study's model called `name` (a name or the paper's label).

  Args:
    name: a variant or baseline name or label.

  Returns:
    The table's row.

  Raises:
    ValueError: for an unknown name, listing the known ones.
  """
  return attentions.get(name, attentions.Kind.SYNTHESIZER,
                        attentions.Kind.BASELINE)


def run_key(task: Task, model_: Model, seed: int) -> str:
  """The results key of one run."""
  return "%s/%s/seed%d" % (task.name, model_.name, seed)


def seed_params(seed: int) -> List[str]:
  """Bindings that seed the initial weights and the data order."""
  return [
      "utils.run.train_model_fn = @mtf_synthesizer.deterministic_train_model",
      "mtf_synthesizer.deterministic_train_model.tf_random_seed = %d" % seed,
      "mesh_train_dataset_fn.seed = %d" % seed,
  ]


def train_command(task: Task, model_: Model, model_dir: str,
                  seed: int) -> commands.Command:
  """The stock CLI command that trains one model on a task with one seed.

  Args:
    task: the task.
    model_: the model.
    model_dir: its model directory.
    seed: the seed of the initial weights and the data order.

  Returns:
    The Command.
  """
  data_gin = ("experiments/_encoder_classifier.gin"
              if task.model == "classifier" else commands.DATASET_GIN)
  params = list(task.params) + seed_params(seed)
  if task.model in ("lm", "bitransformer"):
    params.append("utils.run.model_type = '%s'" % task.model)
  if model_.is_baseline:
    params += baseline_params(model_.name, task)
  return commands.local_train(
      model_dir, model_.name, task.steps, mixture=task.mixture,
      length=task.length, batch_size=task.batch, dims=TINY,
      lengths={"targets": task.length} if task.model == "lm" else None,
      base_gin_files=("models/t5.1.1.small.gin", data_gin),
      gin_params=params)


def eval_command(task: Task, train: commands.Command) -> commands.Command:
  """The evaluation: perplexity or decode-and-score."""
  if task.metric == "loss":
    return commands.perplexity_eval(train, eval_steps=10)
  return commands.decode_eval(train, task.steps)


def read_metric(task: Task, model_dir: str) -> Optional[float]:
  """The task's validation metric from the evaluation's event files."""
  if task.metric == "loss":
    value = events.last_value(events.eval_scalars(
        model_dir, "eval_%s_validation" % task.mixture), "neg_log_perplexity")
    return -value if value is not None else None
  return events.last_value(
      events.eval_scalars(model_dir, "validation_eval"),
      "eval/%s/accuracy" % task.mixture)


def run_one(task: Task, model_: Model, seed: int, root: str) -> Dict:
  """Trains and evaluates one model on one task with one seed.

  Args:
    task: the task.
    model_: the model.
    seed: the seed.
    root: the study's output directory; the run's model directory is
      `<root>/<task>/<model>/seed<seed>`, with train.log and eval.log.

  Returns:
    The run's record (status, metric, steps/s, parameters).
  """
  model_dir = os.path.join(root, task.name, model_.name, "seed%d" % seed)
  # A run cut short (a killed study) left a partial checkpoint: start over.
  shutil.rmtree(model_dir, ignore_errors=True)
  os.makedirs(model_dir)
  train = train_command(task, model_, model_dir, seed)
  result = runner.run(train, os.path.join(model_dir, "train.log"))
  trained = result
  if result.returncode == 0:
    result = runner.run(eval_command(task, train),
                           os.path.join(model_dir, "eval.log"))
  ok = result.returncode == 0
  return {
      "task": task.name, "model": model_.name, "seed": seed,
      "status": result.returncode,
      "log": result.log_path,
      "metric": read_metric(task, model_dir) if ok else None,
      "steps_per_sec": events.steps_per_sec(trained.scalars) if ok else None,
      "parameters": events.count_parameters(model_dir) if ok else None,
      "vocabulary": os.environ.get("MTF_SYNTH_VOCAB") or "task default",
  }


# --- summary over seeds ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Cell:
  """One task x model cell over its seeds.

  Attributes:
    values: the metric of each finished seed.
    steps_per_sec: the median training speed of each finished seed.
  """
  values: Sequence[float]
  steps_per_sec: Sequence[float] = ()

  @property
  def n(self) -> int:
    return len(self.values)

  @property
  def mean(self) -> float:
    return statistics.fmean(self.values)

  @property
  def std(self) -> float:
    """The sample standard deviation (0 for one seed)."""
    return statistics.stdev(self.values) if self.n > 1 else 0.0


def cells(results: Dict[str, Dict]) -> Dict[str, Dict[str, Cell]]:
  """Groups finished runs by task and model.

  Args:
    results: run key -> record (`run_one`).

  Returns:
    task -> model -> Cell, over the runs that finished with a metric.
  """
  grouped = {}
  for record in results.values():
    if record.get("status") != 0 or record.get("metric") is None:
      continue
    grouped.setdefault(record["task"], {}).setdefault(
        record["model"], []).append(record)
  return {
      task: {m: Cell([r["metric"] for r in rs],
                     [r["steps_per_sec"] for r in rs if r["steps_per_sec"]])
             for m, rs in by_model.items()}
      for task, by_model in grouped.items()}


@dataclasses.dataclass(frozen=True)
class Ordering:
  """One of the paper's orderings, at the task that stands for it.

  Attributes:
    task: the study's task.
    better: the label the paper finds better.
    worse: the label it finds worse.
    paper: where and by how much (the paper's figures).
  """
  task: str
  better: str
  worse: str
  paper: str


ORDERINGS = (
    # Table 2, LM1B perplexity (lower is better).
    Ordering("lm", "V", "R", "Table 2 LM1B ppl: V 38.21, R 40.60"),
    Ordering("lm", "D+V", "V", "Table 2 LM1B ppl: D+V 37.27, V 38.21"),
    Ordering("lm", "R", "Fix", "Table 2 LM1B ppl: R 40.60, Fix 50.52"),
    Ordering("lm", "V", "D", "Table 2 LM1B ppl: V 38.21, D 40.88"),
    Ordering("lm", "R+V", "R", "Table 2 LM1B ppl: R+V 40.05, R 40.60"),
    # Table 4, C4 span corruption log perplexity.
    Ordering("spans", "R", "DyConv", "Table 4 log ppl: R 1.972, DyConv 2.040"),
    Ordering("spans", "D+V", "V", "Table 4 log ppl: D+V 1.832, V 1.865"),
    Ordering("spans", "R+V", "V", "Table 4 log ppl: R+V 1.849, V 1.865"),
    Ordering("spans", "V", "R", "Table 4 log ppl: V 1.865, R 1.972"),
    # Tables 5-6, GLUE / SuperGLUE (sentence pairs).
    Ordering("presence", "V", "R", "Table 5 GLUE: V 83.5, R 75.1"),
    Ordering("presence", "V", "D", "Table 5 GLUE: V 83.5, D 72.0"),
    Ordering("presence", "R", "DyConv", "Table 5 GLUE: R 75.1, DyConv 69.4"),
    Ordering("presence", "R+V", "R", "Table 5 GLUE: R+V 84.1, R 75.1"),
    Ordering("presence", "D+V", "D", "Table 5 GLUE: D+V 82.6, D 72.0"),
    # Table 7, encoding only (AG News, IMDb).
    Ordering("listops", "FR+V", "V",
             "Table 7: FR+V 89.13 / 84.61, V 88.83 / 81.34"),
    Ordering("listops", "FR+V", "FR",
             "Table 7: FR+V 89.13 / 84.61, FR 86.53 / 83.39"),
    Ordering("listops", "FR", "Linformer",
             "Table 7: FR 86.53 / 83.39, Linformer 86.50 / 82.86"),
)


def judge(ordering: Ordering, by_label: Dict[str, Cell],
          lower_is_better: bool) -> str:
  """Whether an ordering holds here.

  Two cells are told apart when their means differ by more than twice the
  standard error of the difference, sqrt(s1^2/n1 + s2^2/n2).

  Args:
    ordering: the paper's ordering.
    by_label: label -> Cell of its task.
    lower_is_better: the task's metric is a loss.

  Returns:
    "holds", "reversed", "within seed noise", or "not measured" (a cell
    with fewer than two seeds).
  """
  better, worse = by_label.get(ordering.better), by_label.get(ordering.worse)
  if not better or not worse or better.n < 2 or worse.n < 2:
    return "not measured"
  gain = better.mean - worse.mean
  if lower_is_better:
    gain = -gain
  noise = 2 * math.sqrt(better.std ** 2 / better.n +
                        worse.std ** 2 / worse.n)
  if abs(gain) <= noise:
    return "within seed noise"
  return "holds" if gain > 0 else "reversed"


def format_cell(cell: Optional[Cell], task: Task) -> str:
  """`mean ± std (n)` in the task's unit, or n/a."""
  if cell is None:
    return "n/a"
  spec = "%.3f" if task.metric == "loss" else "%.1f"
  return (spec + " ± " + spec + "%s") % (
      cell.mean, cell.std, "" if cell.n >= 3 else " (n=%d)" % cell.n)


def results_table(table: Dict[str, Dict[str, Cell]], tasks: Sequence[Task],
                  models: Sequence[Model]) -> str:
  """Markdown: one row per model, `mean ± std` per task.

  Args:
    table: `cells(results)`.
    tasks: the columns.
    models: the rows.

  Returns:
    The table; a cell with fewer than 3 seeds says how many it has; "-"
    where the model does not apply.
  """
  head = ["model"] + ["%s %s" % (t.name, "loss" if t.metric == "loss"
                                 else "acc. %") for t in tasks]
  lines = ["| " + " | ".join(head) + " |",
           "|---|" + "---:|" * len(tasks)]
  for m in models:
    row = ["%s (%s)" % (m.label, m.name)]
    for t in tasks:
      row.append(format_cell(table.get(t.name, {}).get(m.name), t)
                 if applies_to(m, t) else "-")
    lines.append("| " + " | ".join(row) + " |")
  return "\n".join(lines)


def speed_table(table: Dict[str, Dict[str, Cell]], tasks: Sequence[Task],
                models: Sequence[Model]) -> str:
  """Markdown: median training steps/s per task (not a speed benchmark)."""
  lines = ["| model | " + " | ".join(t.name for t in tasks) + " |",
           "|---|" + "---:|" * len(tasks)]
  for m in models:
    row = [m.label]
    for t in tasks:
      cell = table.get(t.name, {}).get(m.name)
      row.append("%.1f" % statistics.median(cell.steps_per_sec)
                 if cell and cell.steps_per_sec else "-")
    lines.append("| " + " | ".join(row) + " |")
  return "\n".join(lines)


def orderings_table(table: Dict[str, Dict[str, Cell]],
                    tasks: Sequence[Task]) -> str:
  """Markdown: each of the paper's orderings at its task, and the verdict."""
  lines = ["| task | paper: better > worse | paper's figures | here | "
           "verdict |", "|---|---|---|---|---|"]
  by_name = {t.name: t for t in tasks}
  for o in ORDERINGS:
    task = by_name.get(o.task)
    if task is None:
      continue
    by_label = {model(name).label: cell
                for name, cell in table.get(o.task, {}).items()}
    here = "%s vs %s" % (format_cell(by_label.get(o.better), task),
                         format_cell(by_label.get(o.worse), task))
    verdict = judge(o, by_label, task.metric == "loss")
    lines.append("| %s | %s > %s | %s | %s | %s |" % (
        o.task, o.better, o.worse, o.paper, here, verdict))
  return "\n".join(lines)
