# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The JAX trainer's examples/s against the stock CLI's, at one tiny shape.

`tools/benchmark_jax_train.py` runs it. Two whole training runs of the same
model on the same task, each in its own environment, as a user starts
them:

  * the stock CLI: `t5_mesh_transformer` of the mesh environment (`.venv`),
    its command from `jobs.commands.local_train` (as the tests' tiny
    stock-CLI runs, `workbench/mesh_reference.py`): T5.1.0's layout
    (t5's `models/bi_v1.gin`), the variant's gin file, mesh's
    AdafactorOptimizer and `learning_rate_schedule_noam` (mesh's
    defaults), `mesh_train_dataset_fn.pack = False`, float32, dropout 0;
  * the JAX trainer: `mtf-synthesizer-jax-train` (`python -m
    mtf_synthesizer.commands.jax_train`) of the JAX environment
    (`.venv-jax`), with `gin/flax/t5_1_0.gin`, the variant's
    `gin/flax/<variant>.gin` and the bindings of `jax_gin` (the same sizes,
    task, lengths, batch and schedule; its Adafactor is mesh's; no
    packing, float32, dropout 0).

Both read `pydocs_span_corruption` with the byte vocabulary
(`MTF_SYNTH_VOCAB=byte`, offline), one CPU device, every core the process
may use (no pinning: what a user's run gets). One driver process starts
the runs one after the other, interleaved (the CLI's V, the JAX V, the
CLI's D+V, the JAX D+V, and again for each further round), so that the
load of a shared machine falls on both.

The figures are each program's own: the CLI's `global_step/sec` and
`examples/sec` (TPUEstimator writes them to the model directory's event
file after every step), the JAX trainer's `steps_per_sec` and
`examples_per_sec` (`model_dir/train/`, every `log_every_steps` steps,
read with `flax_train.summaries.read_scalars`). A record at step s
covers the steps since the previous record; `measured_rate` adds up the
periods that start at or after `warmup_steps` (compilation, the first
checkpoint, tf.data's start) and end by the run's measured stop: the last
step for the JAX trainer (its final checkpoint is written after its last
record), the step before it for the CLI (the CLI's record of the last
step includes the final checkpoint's write). A variant's figure is the
median over the rounds, and the ratio is JAX / CLI examples/s.
"""

import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence
from typing import TextIO, Tuple

from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from workbench import checkout
from workbench import mesh_reference

FRAMEWORKS = ("CLI", "JAX")
VARIANTS = ("vanilla", "dense_vanilla")
MESH_PYTHON = os.path.join(checkout.ROOT, ".venv", "bin", "python")
JAX_PYTHON = os.path.join(checkout.ROOT, ".venv-jax", "bin", "python")
LAYOUT_GIN = "models/bi_v1.gin"  # t5's T5.1.0 layout (the CLI's)
FLAX_LAYOUT_GIN = os.path.join("gin", "flax", "t5_1_0.gin")
# mesh pads the byte vocabulary (259 ids) to a multiple of 128
# (Unitransformer.vocab_divisor); the Flax model is given that size.
VOCAB_SIZE = 384
# The tags of the figures in each program's event files.
RATE_TAGS = {"CLI": ("global_step/sec", "examples/sec"),
             "JAX": ("steps_per_sec", "examples_per_sec")}
ENV = {"MTF_SYNTH_VOCAB": "byte"}
# Distributions whose versions the report states; "a|b": the first of
# those installed (TensorFlow's CPU-only build, seqio's nightly), under a.
MESH_DISTRIBUTIONS = ("tensorflow|tensorflow-cpu", "mesh-tensorflow", "t5",
                      "seqio|seqio-nightly")
JAX_DISTRIBUTIONS = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint",
                     "tensorflow|tensorflow-cpu", "seqio|seqio-nightly")


@dataclasses.dataclass(frozen=True)
class Shape:
  """The encoder-decoder and its batch, the same on both sides.

  Attributes:
    d_model: model width.
    num_heads: attention heads.
    d_kv: a head's width.
    d_ff: the feed-forward width (ReLU).
    num_layers: blocks of the encoder, and of the decoder.
    length: inputs and targets per example (and the Synthesizer's N).
    batch: examples per step.
  """
  d_model: int = 64
  num_heads: int = 4
  d_kv: int = 16
  d_ff: int = 256
  num_layers: int = 2
  length: int = 64
  batch: int = 16

  def describe(self) -> str:
    """One line: the shape as the report prints it."""
    return ("T5.1.0 layout, encoder-decoder %d+%d blocks, d_model %d, %d "
            "heads x %d, d_ff %d (ReLU), byte vocabulary (%d), batch %d x "
            "%d inputs -> %d targets, float32, dropout 0" % (
                self.num_layers, self.num_layers, self.d_model,
                self.num_heads, self.d_kv, self.d_ff, VOCAB_SIZE,
                self.batch, self.length, self.length))


@dataclasses.dataclass(frozen=True)
class Settings:
  """How the runs are made and measured.

  Attributes:
    steps: training steps of every run.
    warmup_steps: steps before the measured periods.
    log_every_steps: the JAX trainer's record period.
    rounds: runs of each program for each variant.
    mesh_python: the mesh environment's Python (its `t5_mesh_transformer`
      is the one beside it).
    jax_python: the JAX environment's Python.
    timeout_s: the longest a run may take.
  """
  steps: int = 200
  warmup_steps: int = 50
  log_every_steps: int = 25
  rounds: int = 1
  mesh_python: str = MESH_PYTHON
  jax_python: str = JAX_PYTHON
  timeout_s: int = 900


def label(variant: str) -> str:
  """The variant's paper label ("V", "D+V")."""
  return attentions.get(variant).label


def cli_command(variant: str, shape: Shape, settings: Settings,
                model_dir: str) -> commands.Command:
  """The stock CLI's training run.

  Args:
    variant: a name of `attentions.VARIANTS`.
    shape: the model and batch.
    settings: the steps and the mesh environment.
    model_dir: the run's model directory.

  Returns:
    The Command (`t5_mesh_transformer` beside `settings.mesh_python`).
  """
  command = commands.local_train(
      model_dir, variant, settings.steps, length=shape.length,
      batch_size=shape.batch,
      dims={"d_model": shape.d_model, "d_ff": shape.d_ff,
            "num_heads": shape.num_heads, "d_kv": shape.d_kv,
            "num_layers": shape.num_layers},
      base_gin_files=(commands.DATASET_GIN, LAYOUT_GIN),
      gin_params=[mesh_reference.ZERO_DROPOUT,
                  "mesh_train_dataset_fn.pack = False"] +
      mesh_reference.FLOAT32, env=ENV)
  return dataclasses.replace(command, program=os.path.join(
      os.path.dirname(settings.mesh_python), commands.CLI_NAME))


def jax_gin(shape: Shape, settings: Settings) -> str:
  """The JAX trainer's bindings after the layout's and the variant's files.

  Args:
    shape: the model and batch.
    settings: the steps and the record period.

  Returns:
    Gin text.
  """
  lines = [
      "import mtf_synthesizer.flax_model",
      "import mtf_synthesizer.flax_train.train",
      "T5Config.vocab_size = %d" % VOCAB_SIZE,
      "T5Config.d_model = %d" % shape.d_model,
      "T5Config.num_heads = %d" % shape.num_heads,
      "T5Config.head_dim = %d" % shape.d_kv,
      "T5Config.d_ff = %d" % shape.d_ff,
      "T5Config.num_encoder_layers = %d" % shape.num_layers,
      "T5Config.num_decoder_layers = %d" % shape.num_layers,
      "T5Config.max_length = %d" % shape.length,
      "T5Config.dropout_rate = 0.0",
      "T5Config.dtype = 'float32'",
      "T5Config.param_dtype = 'float32'",
      "train.mixture_or_task_name = '%s'" % commands.SPAN_CORRUPTION,
      "train.task_feature_lengths = {'inputs': %d, 'targets': %d}" % (
          shape.length, shape.length),
      "train.batch_size = %d" % shape.batch,
      "train.train_steps = %d" % settings.steps,
      "train.learning_rate_schedule = "
      "@learning_rate_schedules.learning_rate_schedule_noam",
      "train.log_every_steps = %d" % settings.log_every_steps,
      "train.eval_every_steps = 0",
      # One checkpoint, at the end (orbax also keeps the first step's).
      "checkpoint_options.save_interval_steps = %d" % settings.steps,
  ]
  return "\n".join(lines) + "\n"


def jax_argv(variant: str, settings: Settings, model_dir: str,
             gin_file: str) -> List[str]:
  """The JAX trainer's command line.

  Args:
    variant: a name of `attentions.VARIANTS`.
    settings: the JAX environment.
    model_dir: the run's model directory.
    gin_file: a file of `jax_gin`'s bindings.

  Returns:
    The argument list.
  """
  flax_gin = os.path.join(checkout.ROOT, "gin", "flax")
  return [settings.jax_python, "-m", "mtf_synthesizer.commands.jax_train",
          "--model_dir=" + model_dir,
          "--gin_file=" + os.path.join(checkout.ROOT, FLAX_LAYOUT_GIN),
          "--gin_file=" + os.path.join(flax_gin, variant + ".gin"),
          "--gin_file=" + gin_file]


def measured_rate(records: Mapping[int, float], start: int,
                  stop: int) -> Tuple[float, int]:
  """A rate over the periods between records within (start, stop].

  A record (step s, rate r) covers the steps after the previous record's
  step p up to s, which took (s - p) / r seconds. The first record's
  period has no known start and is never counted.

  Args:
    records: step -> a rate per second of something proportional to the
      steps (steps/s, examples/s).
    start: periods that start before this step are left out.
    stop: periods that end after this step are left out.

  Returns:
    (the rate over the counted periods: their steps' rate summed over
    their seconds, the steps they cover).

  Raises:
    ValueError: no period lies within (start, stop], or a rate is not
      positive.
  """
  steps = sorted(records)
  counted, seconds = 0, 0.0
  for previous, step in zip(steps, steps[1:]):
    if previous < start or step > stop:
      continue
    rate = records[step]
    if not rate > 0:
      raise ValueError("rate %r at step %d" % (rate, step))
    counted += step - previous
    seconds += (step - previous) / rate
  if not counted:
    raise ValueError("no record period within steps (%d, %d] (records at "
                     "%s)" % (start, stop, steps[:3] + ["..."] + steps[-3:]
                              if len(steps) > 6 else steps))
  return counted / seconds, counted


def cli_records(model_dir: str) -> Dict[str, Dict[int, float]]:
  """The CLI's rates: its event files' `RATE_TAGS["CLI"]` scalars.

  Args:
    model_dir: the CLI's model directory.

  Returns:
    tag -> step -> value (its other summaries, text ones too, skipped).
  """
  # pylint: disable-next=g-import-not-at-top
  import tensorflow.compat.v1 as tf
  out = {tag: {} for tag in RATE_TAGS["CLI"]}
  for path in sorted(tf.io.gfile.glob(
      os.path.join(model_dir, "events.out.tfevents.*"))):
    for event in tf.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag in out:
          out[value.tag][int(event.step)] = (
              float(tf.make_ndarray(value.tensor)) if value.HasField(
                  "tensor") else value.simple_value)
  return out


def jax_records(model_dir: str) -> Dict[str, Dict[int, float]]:
  """The JAX trainer's rates: `RATE_TAGS["JAX"]` of `model_dir/train/`.

  Args:
    model_dir: the JAX trainer's model directory.

  Returns:
    tag -> step -> value.
  """
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.flax_train import summaries
  scalars = summaries.read_scalars(os.path.join(model_dir, "train"))
  return {tag: dict(scalars.get(tag, {})) for tag in RATE_TAGS["JAX"]}


def measure(framework: str, records: Mapping[str, Mapping[int, float]],
            settings: Settings) -> Dict[str, Any]:
  """A run's figures from its records.

  Args:
    framework: "CLI" or "JAX".
    records: tag -> step -> value (`cli_records`, `jax_records`).
    settings: the steps and the warm-up.

  Returns:
    {"steps_per_sec", "examples_per_sec", "measured_steps", "window"}.
  """
  stop = settings.steps - 1 if framework == "CLI" else settings.steps
  steps_tag, examples_tag = RATE_TAGS[framework]
  steps_per_sec, counted = measured_rate(records[steps_tag],
                                         settings.warmup_steps, stop)
  examples_per_sec, _ = measured_rate(records[examples_tag],
                                      settings.warmup_steps, stop)
  return {"steps_per_sec": steps_per_sec,
          "examples_per_sec": examples_per_sec, "measured_steps": counted,
          "window": [settings.warmup_steps, stop]}


def execute(argv: Sequence[str], env: Mapping[str, str], log_path: str,
            timeout_s: int) -> int:
  """Runs one training run, its output to `log_path`; its exit status."""
  with open(log_path, "w") as log:
    try:
      return subprocess.run(list(argv), env=dict(env), stdout=log,
                            stderr=subprocess.STDOUT, cwd=checkout.ROOT,
                            timeout=timeout_s, check=False).returncode
    except subprocess.TimeoutExpired:
      return -1


def _tail(path: str, chars: int = 3000) -> str:
  with open(path, errors="replace") as f:
    return f.read()[-chars:]


def versions(python: str, distributions: Sequence[str]) -> Dict[str, str]:
  """An environment's Python and distributions' versions ("?" if absent).

  Args:
    python: the environment's Python.
    distributions: distribution names; "a|b": the first installed of a
      and b, reported as a.

  Returns:
    name -> version, "python" first.
  """
  script = (
      "import json, platform, sys\n"
      "from importlib import metadata\n"
      "out = {'python': platform.python_version()}\n"
      "for spec in sys.argv[1:]:\n"
      "  names = spec.split('|')\n"
      "  out[names[0]] = '?'\n"
      "  for name in names:\n"
      "    try:\n"
      "      out[names[0]] = metadata.version(name)\n"
      "      break\n"
      "    except metadata.PackageNotFoundError:\n"
      "      pass\n"
      "print(json.dumps(out))\n")
  result = subprocess.run([python, "-c", script] + list(distributions),
                          capture_output=True, text=True, check=True)
  return json.loads(result.stdout)


def cpu_model() -> str:
  """The CPU's model name (/proc/cpuinfo), or the platform's."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def _cores() -> int:
  if hasattr(os, "sched_getaffinity"):
    return len(os.sched_getaffinity(0))
  return os.cpu_count() or 1


def _load() -> List[float]:
  try:
    return [round(x, 2) for x in os.getloadavg()]
  except OSError:
    return []


def check(settings: Settings, variants: Sequence[str]) -> None:
  """Refuses settings that measure nothing, and unknown variants.

  Args:
    settings: the Settings.
    variants: names of `attentions.VARIANTS`.

  Raises:
    ValueError: a bad setting or variant.
    FileNotFoundError: an environment's Python is missing.
  """
  known = [v.name for v in attentions.VARIANTS]
  unknown = [v for v in variants if v not in known]
  if unknown or not variants:
    raise ValueError("unknown variants %s (known: %s)" % (
        unknown, ", ".join(known)))
  if settings.rounds < 1 or settings.log_every_steps < 1:
    raise ValueError("rounds and log_every_steps must be at least 1")
  if (settings.warmup_steps % settings.log_every_steps or
      settings.steps % settings.log_every_steps):
    raise ValueError("steps and warmup_steps must be multiples of "
                     "log_every_steps (the JAX trainer's records)")
  if settings.steps < settings.warmup_steps + 2 * settings.log_every_steps:
    raise ValueError("steps must leave at least two record periods after "
                     "warmup_steps")
  for python in (settings.mesh_python, settings.jax_python):
    if not os.path.exists(python):
      raise FileNotFoundError(
          "no Python at %s (make the environments as docs/development.md "
          "and docs/jax.md say, or pass another)" % python)


def _relative(text: str, work_dir: str) -> str:
  """A command with the checkout as `.` and the scratch folder as $WORK."""
  return text.replace(work_dir, "$WORK").replace(checkout.ROOT, ".")


def run(shape: Shape, settings: Settings,
        variants: Sequence[str] = VARIANTS, command: Optional[str] = None,
        log: Optional[TextIO] = None,
        runner: Callable[[Sequence[str], Mapping[str, str], str, int], int]
        = execute) -> Dict[str, Any]:
  """Makes the runs, interleaved, and reads their figures; the report.

  Args:
    shape: the model and batch.
    settings: the runs and their measurement.
    variants: names of `attentions.VARIANTS`.
    command: the command line, recorded in the report.
    log: a file for progress lines, or None.
    runner: runs one training run (`execute`'s arguments and result).

  Returns:
    A JSON-serializable dict: "command", "date", "commit", "cpu",
    "cores_visible", "load_before", "load_after", "versions" (per
    environment), "shape", "shape_line", "settings", "commands" (per
    framework, the first variant's, the checkout as `.` and the scratch
    folder as $WORK), "jax_gin", "runs" (in the order made: "framework",
    "variant", "label", "round", "started", "wall_s" and `measure`'s
    figures) and "results": one dict per variant with "variant",
    "label", "examples_per_sec" and "steps_per_sec" (framework -> the
    median over the rounds) and "ratio" (JAX / CLI examples/s).

  Raises:
    ValueError: bad settings (`check`).
    FileNotFoundError: a missing environment.
    RuntimeError: a run failed.
  """

  def say(message):
    if log is not None:
      print(message, file=log, flush=True)

  check(settings, variants)
  env = dict(os.environ, **ENV)
  env["PYTHONPATH"] = os.pathsep.join(
      [checkout.ROOT] + [p for p in env.get("PYTHONPATH", "").split(
          os.pathsep) if p and os.path.realpath(p) !=
                         os.path.realpath(checkout.ROOT)])
  report = {
      "command": command,
      "date": datetime.datetime.now(datetime.timezone.utc).strftime(
          "%Y-%m-%d %H:%M UTC"),
      "commit": checkout.commit(), "cpu": cpu_model(),
      "cores_visible": _cores(), "load_before": _load(),
      "versions": {"CLI": versions(settings.mesh_python,
                                   MESH_DISTRIBUTIONS),
                   "JAX": versions(settings.jax_python,
                                   JAX_DISTRIBUTIONS)},
      "shape": dataclasses.asdict(shape), "shape_line": shape.describe(),
      "settings": dataclasses.asdict(settings),
      "jax_gin": jax_gin(shape, settings), "runs": [], "results": []}
  with tempfile.TemporaryDirectory(prefix="jax_train_bench_") as work:
    gin_file = os.path.join(work, "benchmark.gin")
    with open(gin_file, "w") as f:
      f.write(report["jax_gin"])
    report["commands"] = {
        "CLI": _relative(commands.format_command(cli_command(
            variants[0], shape, settings, os.path.join(work, "cli"))), work),
        "JAX": _relative(commands.format_command(jax_argv(
            variants[0], settings, os.path.join(work, "jax"), gin_file)),
                         work)}
    for r in range(settings.rounds):
      for variant in variants:
        for framework in FRAMEWORKS:
          name = "%s-%s-%d" % (framework.lower(), variant, r)
          model_dir = os.path.join(work, name)
          if framework == "CLI":
            argv = cli_command(variant, shape, settings, model_dir).argv()
          else:
            argv = jax_argv(variant, settings, model_dir, gin_file)
          log_path = os.path.join(work, name + ".log")
          say("round %d/%d: %s %s (%d steps) ..." % (
              r + 1, settings.rounds, framework, label(variant),
              settings.steps))
          started = time.time()
          status = runner(argv, env, log_path, settings.timeout_s)
          wall = time.time() - started
          if status:
            raise RuntimeError("the %s run of %s failed (status %d):\n%s" % (
                framework, variant, status, _tail(log_path)))
          records = (cli_records if framework == "CLI" else
                     jax_records)(model_dir)
          figures = measure(framework, records, settings)
          report["runs"].append(dict(
              figures, framework=framework, variant=variant,
              label=label(variant), round=r + 1,
              started=datetime.datetime.fromtimestamp(
                  started, datetime.timezone.utc).strftime("%H:%M:%S"),
              wall_s=round(wall, 1)))
          say("  %.1f examples/s (%.2f steps/s over %d steps), %.0f s" % (
              figures["examples_per_sec"], figures["steps_per_sec"],
              figures["measured_steps"], wall))
  report["load_after"] = _load()
  report["results"] = summarize(report["runs"], variants)
  return report


def summarize(runs: Sequence[Mapping[str, Any]],
              variants: Sequence[str]) -> List[Dict[str, Any]]:
  """One result a variant: the medians over its rounds and the ratio.

  Args:
    runs: `run`'s "runs".
    variants: their variants, in the report's order.

  Returns:
    [{"variant", "label", "examples_per_sec", "steps_per_sec", "ratio"}].
  """
  results = []
  for variant in variants:
    figures = {}
    for key in ("examples_per_sec", "steps_per_sec"):
      figures[key] = {f: statistics.median(
          r[key] for r in runs
          if r["variant"] == variant and r["framework"] == f)
                      for f in FRAMEWORKS}
    examples = figures["examples_per_sec"]
    results.append(dict(figures, variant=variant, label=label(variant),
                        ratio=examples["JAX"] / examples["CLI"]))
  return results


TABLE_HEADER = ("| variant | CLI examples/s | JAX examples/s | JAX / CLI "
                "| CLI steps/s | JAX steps/s |")
RUNS_HEADER = ("| # | program | variant | round | started (UTC) | "
               "examples/s | steps/s | steps measured | wall s |")


def markdown(report: Mapping[str, Any]) -> str:
  """The report as markdown: the facts, the table, each run.

  Args:
    report: `run`'s report.

  Returns:
    Markdown text.
  """
  settings = report["settings"]
  versions_line = "; ".join(
      "%s: %s" % (f, ", ".join("%s %s" % kv for kv in
                               report["versions"][f].items()))
      for f in FRAMEWORKS)
  lines = [
      "Command: `%s`" % (report["command"] or "(not recorded)"), "",
      "- date: %s; commit %s" % (report["date"], report["commit"]),
      "- CPU: %s, %d cores visible, every one to each run (no pinning); "
      "load average (1, 5, 15 min) %s before, %s after" % (
          report["cpu"], report["cores_visible"],
          ", ".join(map(str, report["load_before"])) or "?",
          ", ".join(map(str, report.get("load_after", []))) or "?"),
      "- versions: %s" % versions_line,
      "- shape: %s" % report["shape_line"],
      "- task: %s, byte vocabulary, no packing; each run %d steps from "
      "scratch, one CPU device" % (commands.SPAN_CORRUPTION,
                                   settings["steps"]),
      "- measured: the record periods within steps (%d, %d] of the JAX "
      "trainer and (%d, %d] of the CLI; %d round(s), the runs interleaved "
      "(the CLI, then the JAX trainer, variant by variant)" % (
          settings["warmup_steps"], settings["steps"],
          settings["warmup_steps"], settings["steps"] - 1,
          settings["rounds"]),
      "",
      TABLE_HEADER,
      "|---|---|---|---|---|---|",
  ]
  for r in report["results"]:
    e, s = r["examples_per_sec"], r["steps_per_sec"]
    lines.append("| %s | %.1f | %.1f | %.2f | %.2f | %.2f |" % (
        r["label"], e["CLI"], e["JAX"], r["ratio"], s["CLI"], s["JAX"]))
  lines += ["", RUNS_HEADER, "|---|---|---|---|---|---|---|---|---|"]
  for i, r in enumerate(report["runs"]):
    lines.append("| %d | %s | %s | %d | %s | %.1f | %.2f | %d | %.0f |" % (
        i + 1, r["framework"], r["label"], r["round"], r["started"],
        r["examples_per_sec"], r["steps_per_sec"], r["measured_steps"],
        r["wall_s"]))
  lines.append("")
  return "\n".join(lines)


def write_report(output_dir: str, text: str,
                 report: Mapping[str, Any]) -> None:
  """Writes jax_train_benchmark.md and jax_train_benchmark.json.

  Args:
    output_dir: the folder (made if missing).
    text: `markdown(report)`.
    report: `run`'s report.
  """
  os.makedirs(output_dir, exist_ok=True)
  path = os.path.join(output_dir, "jax_train_benchmark")
  with open(path + ".md", "w") as f:
    f.write(text)
  with open(path + ".json", "w") as f:
    json.dump(report, f, indent=1)
    f.write("\n")
