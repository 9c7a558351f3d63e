# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Flax model's training step beside mesh's and the PyTorch model's.

`tools/benchmark_jax.py` runs it. One encoder-decoder shape (`Shape`), the
same for all three frameworks, float32, dropout off, no relative position
bias; for each variant (V, R, D, R+V, D+V by default) three models:

  * mesh: `workbench.benchmarking.build_model` (a mesh Bitransformer whose
    self-attention layers are the variant's SynthesizerAttention, its own
    tf.Graph and tf.Session), its Adafactor (`benchmarking.OPTIMIZERS`);
  * PyTorch: `workbench.pytorch.models.build_model` (the checkout's
    `MtfSynthesizerForConditionalGeneration`, sdpa) and
    `torch.optim.Adafactor`, the step `workbench.pytorch.measure.train_step`;
  * Flax: `mtf_synthesizer.flax_model.make_model`, `losses.loss` and
    `optax.adafactor` (masked by `trainable_mask`), jitted, in a worker
    process of the JAX environment (`workbench/jax_bench_worker.py`: JAX
    and TensorFlow need different NumPy majors), kept for the whole run.

Every model is built, and its step run once, before any timing. Then the
rounds: in each, every variant in turn, and for it every framework in turn
(the order of the frameworks rotating from round to round), times `steps`
training steps, each to completion; so all models see the same load. A
figure is the median over the rounds of a round's seconds per step, and
the ratios are of those medians, within one run.

Threads are pinned equally: both processes run on the same `threads` CPUs
(CPU affinity: the first ones this process may use), TensorFlow's session
with `threads` intra-op and inter-op threads, `torch.set_num_threads
(threads)`, and XLA's CPU client sized by the affinity, with `XLA_FLAGS`
(`jax_bench_worker.xla_flags`: with one thread, Eigen single-threaded).
"""

import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
from typing import Any, Dict, List, Optional, Sequence, TextIO

from workbench import benchmarking
from workbench import checkout
from workbench import jax_bench_worker
from workbench import tiny_model

FRAMEWORKS = ("mesh", "PyTorch", "Flax")
VARIANTS = ("V", "R", "D", "R+V", "D+V")
# The target on the Flax V: its step at most this times the faster of
# mesh's V and the PyTorch V.
TARGET = 1.2
JAX_PYTHON = os.path.join(checkout.ROOT, ".venv-jax", "bin", "python")


@dataclasses.dataclass(frozen=True)
class Shape:
  """The encoder-decoder and its batch, the same in every framework.

  Attributes:
    d_model: model width.
    num_heads: attention heads.
    d_kv: a head's width.
    d_ff: the feed-forward width (ReLU).
    encoder_layers: encoder blocks.
    decoder_layers: decoder blocks.
    vocab: the vocabulary (one table, input and output, in PyTorch and
      Flax; mesh's Bitransformer has its own embeddings and softmax).
    batch: examples per step.
    length: inputs and targets per example, and N of the functions.
  """
  d_model: int = 256
  num_heads: int = 4
  d_kv: int = 64
  d_ff: int = 1024
  encoder_layers: int = 2
  decoder_layers: int = 2
  vocab: int = 1024
  batch: int = 8
  length: int = 128

  def describe(self) -> str:
    """One line: the shape as the report prints it."""
    return ("encoder-decoder %d+%d blocks, d_model %d, %d heads x %d, d_ff "
            "%d (ReLU), vocab %d, batch %d x %d inputs -> %d targets, "
            "float32, dropout 0" % (
                self.encoder_layers, self.decoder_layers, self.d_model,
                self.num_heads, self.d_kv, self.d_ff, self.vocab,
                self.batch, self.length, self.length))


# Tiny dims for the tests: every path, little time.
TINY = Shape(d_model=32, num_heads=2, d_kv=16, d_ff=64, encoder_layers=1,
             decoder_layers=1, vocab=64, batch=2, length=16)


@dataclasses.dataclass(frozen=True)
class Settings:
  """How the models are measured.

  Attributes:
    steps: timed training steps per model per round.
    rounds: rounds of turns.
    threads: intra-op threads of every framework.
    seed: of the weights and the batch.
    learning_rate: the PyTorch and Flax Adafactors' (mesh's Adafactor
      takes its own schedule).
    mesh_optimizer: a key of `benchmarking.OPTIMIZERS`.
    jax_python: the JAX environment's Python.
  """
  steps: int = 2
  rounds: int = 5
  threads: int = 1
  seed: int = 0
  learning_rate: float = 1e-2
  mesh_optimizer: str = benchmarking.DEFAULT_OPTIMIZER
  jax_python: str = JAX_PYTHON


class JaxWorker:
  """The Flax side: `jax_bench_worker` in a subprocess, one JSON line each.

  Use as a context manager; `request` sends one request and returns the
  answer, raising RuntimeError for a failed one.

  Args:
    python: the JAX environment's Python.
    cpus: the CPUs the worker runs on (its threads: one a CPU).
    stderr: where the worker's messages go (None: this process's).
  """

  def __init__(self, python: str, cpus: Sequence[int],
               stderr: Optional[TextIO]):
    if not os.path.exists(python):
      raise FileNotFoundError(
          "no JAX environment at %s (make it as docs/jax.md says, or pass "
          "its Python)" % python)
    env = dict(os.environ, PYTHONPATH=checkout.ROOT)
    try:
      stderr.fileno()
    except (AttributeError, OSError, ValueError):
      stderr = None  # no file behind it (a captured stream): inherited
    self._process = subprocess.Popen(
        [python, "-m", "workbench.jax_bench_worker", "--threads",
         str(len(cpus)), "--cpus", ",".join(str(c) for c in cpus)],
        cwd=checkout.ROOT, env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=stderr, text=True)

  def request(self, op: str, **fields: Any) -> Dict[str, Any]:
    """Sends {"op": op, **fields}; returns the answer."""
    self.send(op, **fields)
    return self.receive(op)

  def send(self, op: str, **fields: Any) -> None:
    """Sends a request without waiting for its answer (`receive` it)."""
    self._process.stdin.write(json.dumps(dict(fields, op=op)) + "\n")
    self._process.stdin.flush()

  def receive(self, op: str) -> Dict[str, Any]:
    """The answer to the request sent last (`op`, for the error)."""
    line = self._process.stdout.readline()
    if not line:
      raise RuntimeError("the JAX worker exited (status %s) on %r" % (
          self._process.poll(), op))
    answer = json.loads(line)
    if not answer.get("ok"):
      raise RuntimeError("the JAX worker failed %r: %s" % (
          op, answer.get("error")))
    return answer

  def close(self) -> None:
    """Asks the worker to quit and waits for it."""
    if self._process.poll() is None:
      try:
        self.request("quit")
      except (RuntimeError, OSError, ValueError):
        pass
      try:
        self._process.wait(timeout=30)
      except subprocess.TimeoutExpired:
        self._process.kill()
        self._process.wait()

  def __enter__(self) -> "JaxWorker":
    return self

  def __exit__(self, *exc_info: Any) -> None:
    self.close()


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


def _mesh_models(shape: Shape, settings: Settings,
                 variants: Sequence[str]) -> Dict[str, Any]:
  """mesh's BuiltModel of each variant, its step run once."""
  candidates = {c.name: c for c in benchmarking.all_variants()}
  model_shape = tiny_model.ModelShape(
      d_model=shape.d_model, num_heads=shape.num_heads, d_kv=shape.d_kv,
      d_ff=shape.d_ff, num_layers=shape.decoder_layers,
      encoder_layers=shape.encoder_layers, vocab=shape.vocab)
  run = benchmarking.RunShape(length=shape.length, batch=shape.batch)
  out = {}
  for label in variants:
    model = benchmarking.build_model(
        candidates[label], model_shape, run, threads=settings.threads,
        seed=settings.seed,
        optimizer=benchmarking.OPTIMIZERS[settings.mesh_optimizer])
    model.train(1)
    out[label] = model
  return out


class _TorchModel:
  """A PyTorch model of the run: its Entry, batch and one-step timer."""

  def __init__(self, label: str, shape: Shape, settings: Settings):
    # pylint: disable=g-import-not-at-top  (torch only when measured)
    import torch
    from workbench.pytorch import measure
    from workbench.pytorch import models
    dims = models.Dims(
        d_model=shape.d_model, num_heads=shape.num_heads, d_kv=shape.d_kv,
        d_ff=shape.d_ff, num_layers=shape.encoder_layers,
        num_decoder_layers=shape.decoder_layers, vocab_size=shape.vocab,
        batch=shape.batch, input_length=shape.length,
        target_length=shape.length, new_tokens=1)
    model = models.build_model(label, dims, "sdpa", settings.seed,
                               dropout_rate=0.0, relative_bias=False)
    optimizer = torch.optim.Adafactor(
        [p for p in model.parameters() if p.requires_grad],
        lr=settings.learning_rate, foreach=True)
    self.entry = measure.Entry(label, (), model, optimizer, model)
    self.params = sum(p.numel() for p in model.parameters())
    generator = torch.Generator().manual_seed(settings.seed)
    ids = lambda: torch.randint(  # pylint: disable=g-long-lambda
        2, shape.vocab, (shape.batch, shape.length), generator=generator)
    self.batch = {"input_ids": ids(),
                  "attention_mask": torch.ones(shape.batch, shape.length,
                                               dtype=torch.long),
                  "labels": ids()}
    self._device = torch.device("cpu")
    self._train_step = measure.train_step
    self.time(1)

  def time(self, steps: int) -> List[float]:
    """Runs `steps` training steps; returns each one's seconds."""
    return [self._train_step(self.entry, self.batch, self._device)
            for _ in range(steps)]


def run(shape: Shape, settings: Settings,
        variants: Sequence[str] = VARIANTS, command: Optional[str] = None,
        log: Optional[TextIO] = None) -> Dict[str, Any]:
  """Builds every model, times the rounds; returns the report.

  Args:
    shape: the model and batch, for every framework.
    settings: how to measure.
    variants: labels of the attention table's variants; "V" is always
      measured (the target's).
    command: the command line, recorded in the report.
    log: a file for progress lines, or None.

  Returns:
    A JSON-serializable dict: "command", "date", "commit", "cpu",
    "threads", "versions", "xla_flags", "shape", "settings", "optimizers"
    and "results": one dict per variant (in order) with "label",
    "params" and "step_s" (framework -> the median seconds per step),
    "rounds_s" (framework -> each round's seconds per step),
    "flax_vs_mesh", "flax_vs_pytorch"; and "target": the Flax V's step
    over the faster of mesh's and PyTorch's V ("ratio", "limit", "met").
  """
  # pylint: disable=g-import-not-at-top
  import tensorflow.compat.v1 as tf
  import torch
  import transformers

  if settings.steps < 1 or settings.rounds < 1 or settings.threads < 1:
    raise ValueError("steps, rounds and threads must be at least 1")
  known = {c.name for c in benchmarking.all_variants()}
  unknown = [v for v in variants
             if v not in known or v == benchmarking.REFERENCE]
  if unknown:
    raise ValueError("unknown variants %s (known: %s)" % (
        unknown, ", ".join(benchmarking.table_names()[1:])))
  labels = ["V"] + [v for v in variants if v != "V"]

  cpus = jax_bench_worker.pinned_cpus(settings.threads)
  allowed = (os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity")
             else None)
  try:
    if allowed is not None:
      os.sched_setaffinity(0, cpus)
    torch.set_num_threads(settings.threads)
    report = _run_pinned(shape, settings, labels, cpus, log)
  finally:
    if allowed is not None:
      os.sched_setaffinity(0, allowed)
  report.update({
      "command": command,
      "date": datetime.datetime.now(datetime.timezone.utc).strftime(
          "%Y-%m-%d %H:%M UTC"),
      "commit": checkout.commit(),
      "cpu": cpu_model(),
      "cores_visible": len(allowed) if allowed else os.cpu_count(),
      "cpus": cpus,
      "threads": settings.threads,
      "shape": dataclasses.asdict(shape),
      "shape_line": shape.describe(),
      "settings": dataclasses.asdict(settings),
      "optimizers": optimizers(settings)})
  report["versions"] = {
      "python": platform.python_version(), "tensorflow": tf.__version__,
      "mesh_tensorflow": _version("mesh-tensorflow"),
      "torch": torch.__version__, "transformers": transformers.__version__,
      "jax": report["versions"]["jax"]}
  return report


def _version(distribution: str) -> str:
  """An installed distribution's version, or "?"."""
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  try:
    return metadata.version(distribution)
  except metadata.PackageNotFoundError:
    return "?"


def _run_pinned(shape: Shape, settings: Settings, labels: Sequence[str],
                cpus: Sequence[int], log: Optional[TextIO]
                ) -> Dict[str, Any]:
  """`run`'s measurements, this process already on `cpus`."""

  def say(message):
    if log is not None:
      print(message, file=log, flush=True)

  timings = {label: {f: [] for f in FRAMEWORKS} for label in labels}
  params = {label: {} for label in labels}
  with JaxWorker(settings.jax_python, cpus, log) as worker:
    # The worker builds and compiles while this process builds the others.
    say("building the Flax models (jit, one step each), mesh's and the "
        "PyTorch models")
    worker.send("build", dims=dataclasses.asdict(shape), variants=labels,
                seed=settings.seed, learning_rate=settings.learning_rate)
    mesh_models = _mesh_models(shape, settings, labels)
    torch_models = {label: _TorchModel(label, shape, settings)
                    for label in labels}
    built = worker.receive("build")
    for label in labels:
      params[label] = {"mesh": mesh_models[label].num_params,
                       "PyTorch": torch_models[label].params,
                       "Flax": built["models"][label]["params"]}

    def time_one(framework, label):
      if framework == "mesh":
        return mesh_models[label].train(settings.steps)
      if framework == "PyTorch":
        return statistics.mean(torch_models[label].time(settings.steps))
      answer = worker.request("time", label=label, steps=settings.steps)
      return statistics.mean(answer["step_s"])

    try:
      for r in range(settings.rounds):
        order = FRAMEWORKS[r % 3:] + FRAMEWORKS[:r % 3]
        for label in labels:
          for framework in order:
            timings[label][framework].append(time_one(framework, label))
          say("round %d/%d %-4s %s" % (
              r + 1, settings.rounds, label, "  ".join(
                  "%s %.4f s" % (f, timings[label][f][-1])
                  for f in FRAMEWORKS)))
    finally:
      for model in mesh_models.values():
        model.close()

  results = []
  for label in labels:
    step_s = {f: statistics.median(timings[label][f]) for f in FRAMEWORKS}
    results.append({
        "label": label, "params": params[label], "step_s": step_s,
        "rounds_s": timings[label],
        "flax_vs_mesh": step_s["Flax"] / step_s["mesh"],
        "flax_vs_pytorch": step_s["Flax"] / step_s["PyTorch"]})
  v = results[0]["step_s"]
  ratio = v["Flax"] / min(v["mesh"], v["PyTorch"])
  return {"xla_flags": built["xla_flags"], "versions": {"jax": built["jax"]},
          "results": results,
          "target": {"ratio": ratio, "limit": TARGET, "met": ratio <= TARGET}}


def optimizers(settings: Settings) -> Dict[str, str]:
  """What each framework's training step updates with."""
  mesh = benchmarking.OPTIMIZERS[settings.mesh_optimizer]
  return {
      "mesh": "%s.%s (its defaults)" % (mesh.__module__, mesh.__name__),
      "PyTorch": "torch.optim.Adafactor(lr=%g, foreach=True)" %
                 settings.learning_rate,
      "Flax": "optax.adafactor(%g), masked by trainable_mask" %
              settings.learning_rate,
  }


def markdown(report: Dict[str, Any]) -> str:
  """The report as markdown: the facts, then one table row a variant."""
  settings = report["settings"]
  versions = report["versions"]
  lines = [
      "Command: `%s`" % (report["command"] or "(not recorded)"), "",
      "- date: %s; commit %s" % (report["date"], report["commit"]),
      "- CPU: %s, %d cores visible" % (report["cpu"],
                                       report["cores_visible"]),
      "- threads: %d for every framework, both processes on the same %d "
      "CPU(s) (affinity); TensorFlow session intra-op and inter-op threads, "
      "`torch.set_num_threads`, XLA's pool sized by the affinity, XLA_FLAGS "
      "`%s`" % (report["threads"], len(report["cpus"]),
                report["xla_flags"]),
      "- versions: %s" % ", ".join("%s %s" % kv for kv in versions.items()),
      "- shape: %s" % report["shape_line"],
      "- optimizers: %s" % "; ".join("%s %s" % kv for kv in
                                     report["optimizers"].items()),
      "- timing: %d rounds, each %d training steps of every model in turn; "
      "a figure is the median over the rounds of the seconds per step" % (
          settings["rounds"], settings["steps"]),
      "",
      "| variant | mesh s/step | PyTorch s/step | Flax s/step | Flax / mesh "
      "| Flax / PyTorch | params (mesh, PyTorch, Flax) |",
      "|---|---|---|---|---|---|---|",
  ]
  for r in report["results"]:
    s = r["step_s"]
    lines.append("| %s | %.4f | %.4f | %.4f | %.2f | %.2f | %s |" % (
        r["label"], s["mesh"], s["PyTorch"], s["Flax"], r["flax_vs_mesh"],
        r["flax_vs_pytorch"], ", ".join(
            "%d" % r["params"][f] for f in FRAMEWORKS)))
  target = report["target"]
  lines += ["", "Flax V / min(mesh V, PyTorch V) = %.2f (target at most "
            "%.1f: %s)" % (target["ratio"], target["limit"],
                           "met" if target["met"] else "not met"), ""]
  return "\n".join(lines)
