# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Speed and memory of every Synthesizer variant against vanilla attention.

Every variant of `mtf_synthesizer/variants.py`, mesh's own SelfAttention
(the reference, "V") and the release's synthesize modes are timed in
interleaved rounds at one or more data shapes; see docs/benchmark.md, and
`mtf_synthesizer/tools_lib/benchmarking.py` and `benchmark_report.py` for
what is measured and how. Writes benchmark.json, benchmark.md and
benchmark.png to --output_dir. The targets in benchmark_targets.json (beside
this script) only add verdicts to the report.

Full run (about 20 minutes on 2 CPU cores):
  PYTHONPATH=. .venv/bin/python tools/benchmark.py

Smoke test at tiny shapes (about 1-2 minutes):
  PYTHONPATH=. .venv/bin/python tools/benchmark.py --quick \
      --output_dir /tmp/bench_quick
"""

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Optional, Sequence

import tensorflow.compat.v1 as tf

from mtf_synthesizer.tools_lib import benchmark_report
from mtf_synthesizer.tools_lib import benchmarking

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "benchmark_targets.json")


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the benchmark; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="tiny model, short lengths, 1-2 rounds")
  parser.add_argument("--output_dir", default="runs/benchmark")
  parser.add_argument("--lengths", default=None,
                      help="comma-separated sweep lengths ('' for none)")
  parser.add_argument("--no_enc_dec", action="store_true",
                      help="skip the encoder-decoder block")
  parser.add_argument("--no_reference", action="store_true",
                      help="skip the reference block (all variants)")
  parser.add_argument("--variants", default=None,
                      help="comma-separated subset of the sweep variants")
  parser.add_argument("--no_plot", action="store_true")
  parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
  parser.add_argument("--targets", default=TARGETS,
                      help="JSON of the targets to report verdicts on ('' "
                      "for none)")
  args = parser.parse_args(argv)
  tf.logging.set_verbosity(tf.logging.ERROR)
  targets = {}
  if args.targets:
    with open(args.targets) as f:
      targets = json.load(f)
  lengths = None
  if args.lengths is not None:
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
  blocks = benchmark_report.plan(args.quick, lengths, not args.no_enc_dec)
  if args.no_reference:
    blocks = [b for b in blocks if not b.name.startswith("reference")]
  if args.variants:
    subset = args.variants.split(",")
    blocks = [dataclasses.replace(b, variants=[
        v for v in b.variants if v in subset or v == benchmarking.VANILLA])
              for b in blocks]
  os.makedirs(args.output_dir, exist_ok=True)
  start = time.perf_counter()

  def log(message):
    print("[%6.0fs] %s" % (time.perf_counter() - start, message), flush=True)

  def write(final):
    benchmark_report.write(
        args.output_dir, results, peaks, matmul_size, start, final,
        threads=args.threads, quick=args.quick, targets=targets,
        with_plot=not args.no_plot)

  matmul_size = 512 if args.quick else 2048
  peaks = [benchmarking.matmul_peak_flops(matmul_size, threads=args.threads)]
  log("matmul peak %.1f GFLOP/s" % (peaks[0] / 1e9))
  results = {}
  for block in blocks:
    log("%s: %d models" % (block.name, len(block.variants)))
    results[block.name] = benchmark_report.run_block(block, peaks[0], log)
    write(final=False)
  peaks.append(benchmarking.matmul_peak_flops(matmul_size,
                                              threads=args.threads))
  log("matmul peak at the end %.1f GFLOP/s" % (peaks[-1] / 1e9))
  write(final=True)
  log("wrote %s" % args.output_dir)
  return 0


if __name__ == "__main__":
  # TF1 graph semantics for the whole run, as the stock CLI uses.
  tf.disable_v2_behavior()
  sys.exit(main())
