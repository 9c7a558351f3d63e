# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""The PyTorch Synthesizer against transformers' T5: speed and memory.

Every variant of the attention table and transformers'
`T5ForConditionalGeneration`, at the same dims and attention
implementation, side by side in one process: training steps/s and their
model-FLOPs utilization (MFU: the step's matmul FLOPs over a matmul peak
timed in the same run), greedy `generate()` new tokens/s, peak memory
(CUDA), the bytes a training forward saves for backward and the operators
a training step and a decoding step dispatch (any device), with ratios to
T5 and to V. On
CUDA when present (T5-base dims), else on the CPU at small dims. Needs torch
and transformers only (no TensorFlow). See `workbench/pytorch/benchmark.py`
and docs/pytorch_benchmark.md.

  .venv/bin/python tools/benchmark_torch.py --output_dir runs/torch_bench
  .venv/bin/python tools/benchmark_torch.py --preset gpu-long --variants R,D+V
  .venv/bin/python tools/benchmark_torch.py --preset cpu-memory \
      --dropout_rate 0 --no_relative_bias --steps 1 --rounds 1 \
      --generate_repeats 0
  .venv/bin/python tools/benchmark_torch.py --cache_implementation static
  .venv/bin/python tools/benchmark_torch.py --preset cpu-host --threads 1 \
      --cache_implementation static --compile --steps 2 --rounds 2
  .venv/bin/python tools/benchmark_torch.py --preset cpu-host --threads 1
  .venv/bin/python tools/benchmark_torch.py --variants D+V \
      --profile_dir runs/torch_profile
"""

import argparse
import dataclasses
import shlex
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from workbench.pytorch import benchmark
from workbench.pytorch import measure

# Measurement defaults per device: (steps, warmup, rounds, generate calls).
# On a CPU every round is one step of each model: a change of load falls on
# all of them.
DEFAULTS = {"cpu": (15, 2, 15, 5), "cuda": (8, 3, 2, 2)}
DIM_FLAGS = [f.name for f in dataclasses.fields(benchmark.Dims)]


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the benchmark; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--device", default=None,
                      help="cuda or cpu (default: cuda when present)")
  parser.add_argument("--preset", default=None,
                      choices=sorted(benchmark.PRESETS),
                      help="dims (default: gpu on CUDA, cpu otherwise); "
                      "flags below override single dims")
  for name in DIM_FLAGS:
    parser.add_argument("--" + name, type=int, default=None)
  parser.add_argument("--variants", default=None,
                      help="comma-separated labels of the variants (V, R, "
                      "Fix, FR, D, FD, R+D, D+V, R+V, FR+V; default all); "
                      "T5 and V are always measured")
  parser.add_argument("--attn_implementation", default="sdpa",
                      choices=benchmark.ATTN_IMPLEMENTATIONS)
  parser.add_argument("--compile", action="store_true",
                      help="torch.compile, as --compile_scope says")
  parser.add_argument("--compile_scope", default="model",
                      choices=("blocks", "model"),
                      help="with --compile: blocks compiles each repeated "
                      "block in place for every call (regional; see "
                      "docs/pytorch_benchmark.md); model (default) "
                      "compiles the training step's model call and, with "
                      "--cache_implementation static, generate()'s whole "
                      "decoding step on every device")
  parser.add_argument("--steps", type=int, default=None,
                      help="timed training steps per model (default: %s)" %
                      ", ".join("%d on %s" % (v[0], k)
                                for k, v in DEFAULTS.items()))
  parser.add_argument("--warmup", type=int, default=None)
  parser.add_argument("--rounds", type=int, default=None,
                      help="turns of every model")
  parser.add_argument("--generate_repeats", type=int, default=None,
                      help="timed generate() calls per model (0: none)")
  parser.add_argument("--cache_implementation", default="dynamic",
                      choices=("dynamic", "static"),
                      help="generate()'s cache for every model, T5's too "
                      "(static: transformers' StaticCache)")
  parser.add_argument("--threads", type=int, default=None,
                      help="torch's intra-op threads (default: torch's)")
  parser.add_argument("--dropout_rate", type=float, default=0.1,
                      help="every model's dropout (0: CPU sdpa's fused "
                      "kernel, which has no dropout)")
  parser.add_argument("--no_relative_bias", action="store_true",
                      help="the Synthesizer's stacks without T5's relative "
                      "bias (transformers' T5 keeps its own)")
  parser.add_argument("--learning_rate", type=float, default=1e-4)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--profile_dir", default=None,
                      help="writes each model's torch.profiler table of "
                      "one training step and one generate() there "
                      "(<label>.profile.txt), after its first round")
  parser.add_argument("--output_dir", default=None,
                      help="writes torch_benchmark.json and "
                      "torch_benchmark.md there")
  args = parser.parse_args(argv)

  device = benchmark.resolve_device(args.device)
  preset = args.preset or ("gpu" if device.type == "cuda" else "cpu")
  dims = dataclasses.replace(
      benchmark.PRESETS[preset],
      **{n: getattr(args, n) for n in DIM_FLAGS
         if getattr(args, n) is not None})
  steps, warmup, rounds, repeats = DEFAULTS.get(device.type, DEFAULTS["cpu"])
  settings = benchmark.Settings(
      attn_implementation=args.attn_implementation,
      steps=steps if args.steps is None else args.steps,
      warmup=warmup if args.warmup is None else args.warmup,
      rounds=rounds if args.rounds is None else args.rounds,
      generate_repeats=(repeats if args.generate_repeats is None
                        else args.generate_repeats),
      compile=args.compile, compile_scope=args.compile_scope,
      learning_rate=args.learning_rate,
      seed=args.seed, device=str(device), threads=args.threads,
      dropout_rate=args.dropout_rate,
      relative_bias=not args.no_relative_bias,
      cache_implementation=(None if args.cache_implementation == "dynamic"
                            else args.cache_implementation),
      profile_dir=args.profile_dir)
  models = None
  if args.variants:
    models = [v.strip() for v in args.variants.split(",") if v.strip()]
  command = "python tools/benchmark_torch.py " + shlex.join(
      sys.argv[1:] if argv is None else list(argv))

  def write(report):
    report["preset"] = preset
    if args.output_dir:
      measure.write_report(args.output_dir, "torch_benchmark",
                           benchmark.markdown(report), report)

  try:
    # Each round's report is written as it ends: a run stopped later keeps
    # what it measured.
    report = benchmark.run(dims, settings, models,
                           command=command.strip(), log=sys.stderr,
                           progress=write)
  except ValueError as e:
    print("error: %s" % e, file=sys.stderr)
    return 2
  write(report)
  print(benchmark.markdown(report), end="")
  return 1 if any(r["error"] for r in report["results"]) else 0


if __name__ == "__main__":
  sys.exit(main())
