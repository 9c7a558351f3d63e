# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Speed and memory of every Synthesizer variant against mesh's attention.

Every variant and baseline of the attention table
(`mtf_synthesizer/attentions.py`), mesh's own SelfAttention (the reference,
"V (mesh)") and the release's synthesize modes are timed in interleaved
rounds at one or more data shapes; see docs/benchmark.md, and
`workbench/benchmarking.py`, `benchmark_blocks.py` and `benchmark_report.py`
for what is measured and how. Writes benchmark.json, benchmark.md and
benchmark.png to --output_dir. The targets in benchmark_targets.json (beside
this script) only add verdicts to the report.

Full run (reference, sweep 128-4096, encoder-only, T5-small; see
docs/benchmark.md for its time):
  .venv/bin/python tools/benchmark.py

The 8192 x 1 block, in its own process:
  .venv/bin/python tools/benchmark.py --no_reference \
      --no_enc_dec --no_encoder --lengths 8192 --output_dir runs/bench_8192

Smoke test at tiny shapes (a few minutes; about 10 under a load of 5-10):
  .venv/bin/python tools/benchmark.py --quick \
      --output_dir /tmp/bench_quick
"""

import argparse
import dataclasses
import json
import os
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
import tensorflow.compat.v1 as tf

from workbench import benchmark_blocks
from workbench import benchmark_memory
from workbench import benchmark_report
from workbench import benchmarking
from workbench import checkout

TOOLS = os.path.dirname(os.path.abspath(__file__))
TARGETS = os.path.join(TOOLS, "benchmark_targets.json")


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
  parser.add_argument("--no_encoder", action="store_true",
                      help="skip the encoder-only blocks (where Linformer, "
                      "which cannot be causal, runs)")
  parser.add_argument("--long", action="store_true",
                      help="add the %d x 1 block to the sweep (slow: a "
                      "training step of V takes tens of seconds)" %
                      benchmark_blocks.LONG_LENGTH)
  parser.add_argument("--memory_fraction", type=float, default=0.75,
                      help="memory budget as a fraction of the total RAM "
                      "(at most the memory available at the start): a "
                      "model whose estimated memory exceeds it is skipped "
                      "with its analytic size")
  parser.add_argument("--variants", default=None,
                      help="comma-separated subset of the variants, named "
                      "as in the tables (the reference, V (mesh), is "
                      "always kept)")
  parser.add_argument("--optimizer", default=benchmarking.DEFAULT_OPTIMIZER,
                      choices=sorted(benchmarking.OPTIMIZERS),
                      help="the training step's Adafactor, for every model: "
                      "'lean' (mtf_synthesizer.LeanAdafactorOptimizer) or "
                      "'mesh' (mesh's AdafactorOptimizer, the stock CLI's "
                      "default); the same update up to float rounding")
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
  blocks = benchmark_blocks.plan(args.quick, lengths, not args.no_enc_dec,
                                 encoder=not args.no_encoder, long=args.long)
  budget = benchmark_memory.memory_budget_bytes(args.memory_fraction)
  blocks = [dataclasses.replace(b, optimizer=args.optimizer) for b in blocks]
  if args.no_reference:
    blocks = [b for b in blocks if not b.name.startswith("reference")]
  if args.variants:
    subset = args.variants.split(",")
    blocks = [dataclasses.replace(b, variants=[
        v for v in b.variants if v in subset or v == benchmarking.REFERENCE])
              for b in blocks]
  os.makedirs(args.output_dir, exist_ok=True)
  log = benchmark_blocks.Log()

  code = "commit %s" % checkout.commit()

  def write(results, peaks, matmul_size, final=False):
    benchmark_report.write(
        args.output_dir, results, peaks, matmul_size, log.start, final,
        threads=args.threads, quick=args.quick, targets=targets,
        with_plot=not args.no_plot, code=code, optimizer=args.optimizer)

  results, peaks, matmul_size = benchmark_blocks.run_all(
      blocks, log, budget, args.threads, args.quick, on_progress=write)
  write(results, peaks, matmul_size, final=True)
  log("wrote %s" % args.output_dir)
  return 0


if __name__ == "__main__":
  # TF1 graph semantics for the whole run, as the stock CLI uses.
  tf.disable_v2_behavior()
  sys.exit(main())
