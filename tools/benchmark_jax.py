# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""The Flax model's training step beside mesh's and the PyTorch model's.

The Flax V, R, D, R+V and D+V (`mtf_synthesizer.flax_model`) against the
same variants in mesh (the Synthesizer's mesh layer) and in the PyTorch
model, at one encoder-decoder shape on this CPU, in alternating rounds,
threads pinned equally; ratios from one run. Runs in the TensorFlow
environment, with the JAX environment's Python as a worker process. See
`workbench/jax_benchmark.py` and docs/jax_benchmark.md.

  .venv/bin/python tools/benchmark_jax.py --output_dir runs/jax_bench
  .venv/bin/python tools/benchmark_jax.py --threads 2 --variants V,R
"""

import argparse
import dataclasses
import shlex
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
import tensorflow.compat.v1 as tf

from workbench import benchmarking
from workbench import jax_benchmark
from workbench.pytorch import measure

DIM_FLAGS = [f.name for f in dataclasses.fields(jax_benchmark.Shape)]


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the benchmark; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tiny", action="store_true",
                      help="tiny dims (a smoke test; flags below override "
                      "single dims)")
  for name in DIM_FLAGS:
    parser.add_argument("--" + name, type=int, default=None)
  defaults = jax_benchmark.Settings()
  parser.add_argument("--variants", default=",".join(jax_benchmark.VARIANTS),
                      help="comma-separated labels (V is always measured)")
  parser.add_argument("--steps", type=int, default=defaults.steps,
                      help="timed steps per model per round")
  parser.add_argument("--rounds", type=int, default=defaults.rounds)
  parser.add_argument("--threads", type=int, default=defaults.threads,
                      help="intra-op threads of every framework")
  parser.add_argument("--seed", type=int, default=defaults.seed)
  parser.add_argument("--learning_rate", type=float,
                      default=defaults.learning_rate,
                      help="the PyTorch and Flax Adafactors'")
  parser.add_argument("--mesh_optimizer", default=defaults.mesh_optimizer,
                      choices=sorted(benchmarking.OPTIMIZERS),
                      help="mesh's Adafactor (as tools/benchmark.py's "
                      "--optimizer)")
  parser.add_argument("--jax_python", default=defaults.jax_python,
                      help="the JAX environment's Python")
  parser.add_argument("--output_dir", default=None,
                      help="writes jax_benchmark.json and jax_benchmark.md "
                      "there")
  args = parser.parse_args(argv)
  tf.logging.set_verbosity(tf.logging.ERROR)
  base = jax_benchmark.TINY if args.tiny else jax_benchmark.Shape()
  shape = dataclasses.replace(base, **{
      n: getattr(args, n) for n in DIM_FLAGS if getattr(args, n) is not None})
  settings = jax_benchmark.Settings(
      steps=args.steps, rounds=args.rounds, threads=args.threads,
      seed=args.seed, learning_rate=args.learning_rate,
      mesh_optimizer=args.mesh_optimizer, jax_python=args.jax_python)
  variants = [v.strip() for v in args.variants.split(",") if v.strip()]
  command = "python tools/benchmark_jax.py " + shlex.join(
      sys.argv[1:] if argv is None else list(argv))
  try:
    report = jax_benchmark.run(shape, settings, variants,
                               command=command.strip(), log=sys.stderr)
  except (ValueError, FileNotFoundError) as e:
    print("error: %s" % e, file=sys.stderr)
    return 2
  text = jax_benchmark.markdown(report)
  if args.output_dir:
    measure.write_report(args.output_dir, "jax_benchmark", text, report)
  print(text, end="")
  return 0


if __name__ == "__main__":
  # TF1 graph semantics for the whole run, as tools/benchmark.py.
  tf.disable_v2_behavior()
  sys.exit(main())
