# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""The JAX trainer's examples/s against the stock CLI's, on this CPU.

Trains the same tiny T5.1.0-layout model (V and D+V by default) on
pydocs_span_corruption with `t5_mesh_transformer` (the mesh environment)
and with `mtf-synthesizer-jax-train` (the JAX environment), one run after
the other, interleaved; reports each program's own examples/s after the
warm-up and the ratio, from one run. See `workbench/jax_train_benchmark.py`
and docs/jax_train_benchmark.md.

  .venv/bin/python tools/benchmark_jax_train.py --output_dir runs/jax_train
  .venv/bin/python tools/benchmark_jax_train.py --rounds 2 --variants vanilla
"""

import argparse
import dataclasses
import shlex
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
import tensorflow.compat.v1 as tf

from workbench import jax_train_benchmark as bench

DIM_FLAGS = [f.name for f in dataclasses.fields(bench.Shape)]


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the benchmark; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  for name in DIM_FLAGS:
    parser.add_argument("--" + name, type=int, default=None)
  defaults = bench.Settings()
  parser.add_argument("--variants", default=",".join(bench.VARIANTS),
                      help="comma-separated names of the variant table")
  parser.add_argument("--steps", type=int, default=defaults.steps,
                      help="training steps of every run")
  parser.add_argument("--warmup_steps", type=int,
                      default=defaults.warmup_steps,
                      help="steps left out at the start of every run")
  parser.add_argument("--log_every_steps", type=int,
                      default=defaults.log_every_steps,
                      help="the JAX trainer's record period")
  parser.add_argument("--rounds", type=int, default=defaults.rounds,
                      help="runs of each program for each variant")
  parser.add_argument("--mesh_python", default=defaults.mesh_python,
                      help="the mesh environment's Python (its "
                      "t5_mesh_transformer runs)")
  parser.add_argument("--jax_python", default=defaults.jax_python,
                      help="the JAX environment's Python")
  parser.add_argument("--timeout_s", type=int, default=defaults.timeout_s,
                      help="the longest one run may take")
  parser.add_argument("--output_dir", default=None,
                      help="writes jax_train_benchmark.json and "
                      "jax_train_benchmark.md there")
  args = parser.parse_args(argv)
  tf.logging.set_verbosity(tf.logging.ERROR)  # reading the CLI's events
  shape = dataclasses.replace(bench.Shape(), **{
      n: getattr(args, n) for n in DIM_FLAGS if getattr(args, n) is not None})
  settings = bench.Settings(
      steps=args.steps, warmup_steps=args.warmup_steps,
      log_every_steps=args.log_every_steps, rounds=args.rounds,
      mesh_python=args.mesh_python, jax_python=args.jax_python,
      timeout_s=args.timeout_s)
  variants = [v.strip() for v in args.variants.split(",") if v.strip()]
  command = "python tools/benchmark_jax_train.py " + shlex.join(
      sys.argv[1:] if argv is None else list(argv))
  try:
    report = bench.run(shape, settings, variants, command=command.strip(),
                       log=sys.stderr)
  except (ValueError, FileNotFoundError, RuntimeError) as e:
    print("error: %s" % e, file=sys.stderr)
    return 2
  text = bench.markdown(report)
  if args.output_dir:
    bench.write_report(args.output_dir, text, report)
  print(text, end="")
  return 0


if __name__ == "__main__":
  sys.exit(main())
