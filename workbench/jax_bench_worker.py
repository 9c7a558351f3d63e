# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Flax model's side of the JAX benchmark: a worker in the JAX env.

`workbench/jax_benchmark.py` (in the TensorFlow environment, where mesh and
the PyTorch model are timed) starts this module as a subprocess of the JAX
environment's Python and keeps it for the whole run: JAX (NumPy 2) and
TensorFlow (NumPy 1) cannot share a process. The protocol is one JSON
object per line, a request on stdin, its answer on stdout:

  {"op": "build", "dims": {...}, "variants": ["V", "R"], "seed": 0,
   "learning_rate": 0.01}
      builds each variant's `EncoderDecoder` (`make_model`), its Adafactor
      (`optax.adafactor`, masked by `trainable_mask`) and its jitted
      training step, compiles it and runs it once (untimed); answers
      {"ok": true, "models": {label: {"params": n, "compile_s": s}},
       "jax": version, "xla_flags": flags, "device": name}.
  {"op": "time", "label": "V", "steps": K}
      runs K training steps of one model, each to completion; answers
      {"ok": true, "step_s": [seconds per step], "loss": last loss}.
  {"op": "cost", "label": "V"}
      the compiled step's cost analysis (XLA's flops and bytes accessed).
  {"op": "quit"}
      exits.

A request that fails answers {"ok": false, "error": "..."}. The threads
are pinned before JAX is imported: the process to the CPUs `--cpus` names
(XLA sizes its CPU thread pool, which its XNNPACK/YNNPACK matmuls use, by
the CPUs the process may run on; XLA_FLAGS alone leave it at every core),
and `xla_flags`: `--threads 1` also turns off XLA's multi-threaded Eigen.

  .venv-jax/bin/python -m workbench.jax_bench_worker --threads 1 --cpus 0
"""

import argparse
import functools
import json
import os
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO

# The model's dims a build request carries, the driver's `Shape` fields.
DIM_FIELDS = ("d_model", "num_heads", "d_kv", "d_ff", "encoder_layers",
              "decoder_layers", "vocab", "batch", "length")


def xla_flags(threads: int, existing: str = "") -> str:
  """XLA_FLAGS that pin XLA's CPU threads, after any flags already set.

  Args:
    threads: intra-op threads (1: Eigen single-threaded).
    existing: the environment's XLA_FLAGS.

  Returns:
    The flags to export before JAX is imported.
  """
  flags = [existing.strip()] if existing.strip() else []
  flags.append("--xla_cpu_multi_thread_eigen=%s" %
               ("false" if threads == 1 else "true"))
  flags.append("intra_op_parallelism_threads=%d" % threads)
  return " ".join(flags)


def pinned_cpus(threads: int) -> List[int]:
  """The first `threads` CPUs this process may run on.

  Args:
    threads: how many.

  Returns:
    CPU ids (range(threads) where the platform has no affinity).

  Raises:
    ValueError: fewer CPUs are allowed.
  """
  if not hasattr(os, "sched_getaffinity"):
    return list(range(threads))
  allowed = sorted(os.sched_getaffinity(0))
  if len(allowed) < threads:
    raise ValueError("%d threads asked for, %d CPUs allowed" % (
        threads, len(allowed)))
  return allowed[:threads]


class Models:
  """The Flax models of a run: each variant's state and jitted step.

  Attributes:
    states: label -> (params, optimizer state).
    steps: label -> the jitted training step.
    batch: the batch every model trains on (jax arrays).
    info: label -> {"params": count, "compile_s": seconds}.
  """

  def __init__(self):
    self.states: Dict[str, Any] = {}
    self.steps: Dict[str, Callable[..., Any]] = {}
    self.batch: Dict[str, Any] = {}
    self.info: Dict[str, Dict[str, float]] = {}

  def build(self, dims: Dict[str, int], variants: Sequence[str],
            seed: int = 0, learning_rate: float = 1e-2) -> None:
    """Builds, compiles and runs once (untimed) each variant's step.

    Args:
      dims: the `DIM_FIELDS`.
      variants: labels of `attentions.VARIANTS` ("V", "R", "D+V", ...).
      seed: of the batch and of every model's initializer.
      learning_rate: optax.adafactor's.
    """
    # pylint: disable=g-import-not-at-top  (after XLA_FLAGS is set)
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import linen as nn
    from mtf_synthesizer.flax_model import functions
    from mtf_synthesizer.flax_model import losses
    from mtf_synthesizer.flax_model import t5

    missing = [f for f in DIM_FIELDS if f not in dims]
    if missing:
      raise ValueError("build: dims lack %s" % missing)
    rng = np.random.RandomState(seed)
    shape = (dims["batch"], dims["length"])
    targets = rng.randint(2, dims["vocab"], size=shape).astype(np.int32)
    # mesh's autoregressive inputs: the targets shifted right, 0 first.
    decoder_inputs = np.concatenate(
        [np.zeros((shape[0], 1), np.int32), targets[:, :-1]], axis=1)
    self.batch = {
        "inputs": jnp.asarray(
            rng.randint(2, dims["vocab"], size=shape).astype(np.int32)),
        "decoder_inputs": jnp.asarray(decoder_inputs),
        "targets": jnp.asarray(targets)}
    for label in variants:
      config = t5.T5Config(
          vocab_size=dims["vocab"], d_model=dims["d_model"],
          num_heads=dims["num_heads"], head_dim=dims["d_kv"],
          d_ff=dims["d_ff"], num_encoder_layers=dims["encoder_layers"],
          num_decoder_layers=dims["decoder_layers"], activations=("relu",),
          logits_via_embedding=True, dropout_rate=0.0,
          relative_attention_type=None, variant=label,
          max_length=dims["length"])
      model = t5.make_model(config=config)
      params = nn.unbox(model.init(
          jax.random.PRNGKey(seed), self.batch["inputs"],
          self.batch["decoder_inputs"], enable_dropout=False)["params"])
      optimizer = optax.masked(optax.adafactor(learning_rate),
                               functions.trainable_mask(params))
      step = _train_step(model, optimizer, losses.loss)
      start = time.perf_counter()
      state = (params, optimizer.init(params))
      state = step(state, self.batch)
      jax.block_until_ready(state)
      self.info[label] = {
          "params": int(sum(x.size for x in jax.tree_util.tree_leaves(
              params))),
          "compile_s": time.perf_counter() - start}
      self.states[label] = state
      self.steps[label] = step

  def time(self, label: str, steps: int) -> Dict[str, Any]:
    """Runs `steps` training steps of a model, each to completion.

    Args:
      label: a built variant.
      steps: how many.

    Returns:
      {"step_s": seconds of each step, "loss": the last step's loss}.
    """
    import jax  # pylint: disable=g-import-not-at-top
    if label not in self.steps:
      raise ValueError("time: %r is not built (built: %s)" % (
          label, sorted(self.steps)))
    step, state = self.steps[label], self.states[label]
    seconds = []
    for _ in range(steps):
      start = time.perf_counter()
      state = step(state, self.batch)
      jax.block_until_ready(state)
      seconds.append(time.perf_counter() - start)
    self.states[label] = state
    return {"step_s": seconds, "loss": float(state[2])}

  def cost(self, label: str) -> Dict[str, Any]:
    """XLA's cost analysis of a model's compiled step."""
    state = self.states[label]
    compiled = self.steps[label].lower(state, self.batch).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):  # older JAX: one dict per computation
      analysis = analysis[0] if analysis else {}
    return {k: float(analysis[k]) for k in ("flops", "bytes accessed")
            if k in (analysis or {})}


def _train_step(model: Any, optimizer: Any,
                loss: Callable[..., Any]) -> Callable[..., Any]:
  """The jitted step: (params, opt_state[, loss]), batch -> the next state.

  The state it returns is (params, opt_state, loss); it takes either that
  or (params, opt_state). Its inputs' buffers are donated.
  """
  import jax  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top

  def loss_fn(params, batch):
    logits = model.apply({"params": params}, batch["inputs"],
                         batch["decoder_inputs"], enable_dropout=False)
    return loss(logits, batch["targets"])

  @functools.partial(jax.jit, donate_argnums=(0,))
  def step(state, batch):
    params, opt_state = state[0], state[1]
    value, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value

  def run(state, batch):
    # The first call's state has no loss yet: one jitted signature after.
    if len(state) == 2:
      import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
      state = (state[0], state[1], jnp.zeros((), jnp.float32))
    return step(state, batch)

  run.lower = lambda state, batch: step.lower(state, batch)
  return run


def serve(models: Models, stdin: TextIO, stdout: TextIO,
          info: Dict[str, Any]) -> None:
  """Answers requests, one JSON line each, until "quit" or end of input.

  Args:
    models: the worker's models.
    stdin: requests.
    stdout: answers.
    info: added to the answer of "build" (the JAX version, the flags).
  """
  for line in stdin:
    if not line.strip():
      continue
    try:
      request = json.loads(line)
      op = request.get("op")
      if op == "quit":
        _answer(stdout, {"ok": True})
        return
      if op == "build":
        models.build(request["dims"], request["variants"],
                     request.get("seed", 0),
                     request.get("learning_rate", 1e-2))
        answer = dict(info, ok=True, models=models.info)
      elif op == "time":
        answer = dict(models.time(request["label"], int(request["steps"])),
                      ok=True)
      elif op == "cost":
        answer = dict(models.cost(request["label"]), ok=True)
      else:
        raise ValueError("unknown op %r (known: build, time, cost, quit)" %
                         op)
    except Exception as e:  # pylint: disable=broad-except
      traceback.print_exc(file=sys.stderr)
      answer = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    _answer(stdout, answer)


def _answer(stdout: TextIO, answer: Dict[str, Any]) -> None:
  stdout.write(json.dumps(answer) + "\n")
  stdout.flush()


def main(argv: Optional[List[str]] = None) -> int:
  """Pins the threads, imports JAX, serves requests; the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--threads", type=int, default=1,
                      help="XLA's CPU intra-op threads")
  parser.add_argument("--cpus", default=None,
                      help="comma-separated CPU ids the process runs on "
                      "(default: the first --threads of those allowed)")
  args = parser.parse_args(argv)
  if args.threads < 1:
    parser.error("--threads must be at least 1")
  cpus = ([int(c) for c in args.cpus.split(",")] if args.cpus
          else pinned_cpus(args.threads))
  if len(cpus) != args.threads:
    parser.error("--cpus names %d CPUs for %d threads" % (len(cpus),
                                                           args.threads))
  if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, cpus)
  os.environ["XLA_FLAGS"] = xla_flags(args.threads,
                                      os.environ.get("XLA_FLAGS", ""))
  import jax  # pylint: disable=g-import-not-at-top  (after the flags)
  info = {"jax": jax.__version__, "xla_flags": os.environ["XLA_FLAGS"],
          "device": str(jax.devices()[0]), "cpus": cpus}
  serve(Models(), sys.stdin, sys.stdout, info)
  return 0


if __name__ == "__main__":
  sys.exit(main())
