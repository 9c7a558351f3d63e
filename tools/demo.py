# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Pretrains tiny models with several attention variants and compares them.

`make demo` runs `tools/demo.py --output_dir=runs/demo`. For every variant it
runs the stock `t5_mesh_transformer` console script, exactly as a user would:

  1. train a tiny T5.1.1 encoder-decoder on `pydocs_span_corruption` (the
     offline corpus of CPython's documentation, byte vocabulary), one
     checkpoint at the end;
  2. evaluate that checkpoint on the validation split (`perplexity_eval.gin`).

The runs are sequential, so that their speeds can be compared. Each run prints
one progress line (phase, step, training loss, elapsed time); its full log is
kept in
`<output_dir>/<variant>/{train,eval}.log`, the model in
`<output_dir>/<variant>/model`. At the end a table is printed and written to
`<output_dir>/results.md` (and `results.json`):

  * validation loss: the mean cross-entropy per target token in nats, i.e.
    minus the `neg_log_perplexity` that the evaluation writes to its TF event
    file. The training loss of the progress lines is mesh's: the summed
    cross-entropy divided by batch x target length, padding included. Span
    corruption targets fill about a fifth of their 64 slots, so it reads
    about a fifth of the per-token loss (0.5 beside 2.3), not a gap
    between training and validation;
  * steps/s: the median of the `global_step/sec` values that training writes
    to its event file (start-up, graph building and checkpointing excluded);
  * parameters: the sizes of the variables in the final checkpoint, without
    optimizer slots and `global_step`.

Variant names are those of the variant table (`mtf_synthesizer/attentions.py`):
`random` is `--gin_file=synthesizer/random.gin`, and a paper label (`R`,
`R+V`) names the same row. `t5_attention`
(`attentions.MESH_SELF_ATTENTION`) is T5's
own attention, mesh's SelfAttention with no variant file, the baseline that
the default list starts with; `vanilla` is the dot product inside
SynthesizerAttention (the same math, this package's variable layout). Usage:

  python tools/demo.py --output_dir=runs/demo [--variants=t5_attention,random]
      [--train_steps=300]
"""

import argparse
import json
import os
import shutil
import sys
import time
from typing import Dict, List, Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import events
from mtf_synthesizer.jobs import progress
from mtf_synthesizer.jobs import runner
from workbench import checkout

TASK = commands.SPAN_CORRUPTION
DEFAULT_VARIANTS = "%s,random,dense" % attentions.MESH_SELF_ATTENTION.name


def train_command(args: argparse.Namespace, variant: str,
                  model_dir: str) -> commands.Command:
  """The stock CLI command that trains one variant."""
  return commands.local_train(
      model_dir, variant, args.train_steps, mixture=TASK,
      length=args.sequence_length, batch_size=args.batch_size,
      dims={"d_model": args.d_model, "d_ff": args.d_ff,
            "num_layers": args.num_layers, "num_heads": args.num_heads,
            "d_kv": args.d_model // args.num_heads})


def summarize(variant: str, train: runner.Result) -> Dict:
  """Validation loss, steps/s and parameters of one finished run."""
  nlp = events.last_value(events.eval_scalars(
      train.model_dir, "eval_%s_validation" % TASK), "neg_log_perplexity")
  return {
      "variant": variant,
      "validation_loss": -nlp if nlp is not None else None,
      "train_loss": events.last_value(train.scalars, "loss"),
      "steps_per_sec": events.steps_per_sec(train.scalars),
      "parameters": events.count_parameters(train.model_dir),
  }


def format_table(rows: Sequence[Dict]) -> str:
  """A Markdown table of the results."""
  def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)
  lines = ["| variant | validation loss | steps/s | parameters |",
           "|---|---:|---:|---:|"]
  for r in rows:
    lines.append("| %s | %s | %s | %s |" % (
        r["variant"], fmt(r["validation_loss"], ".3f"),
        fmt(r["steps_per_sec"], ".1f"), fmt(r["parameters"], ",d")))
  return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  """Parses the command line."""
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output_dir", default="runs/demo")
  parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                      help="comma-separated names or labels of the variant "
                      "table; '%s' is T5's own attention (no variant file)"
                      % attentions.MESH_SELF_ATTENTION.name)
  parser.add_argument("--train_steps", type=int, default=300)
  parser.add_argument("--eval_steps", type=int, default=25,
                      help="validation batches (25 x 16 covers the split)")
  parser.add_argument("--batch_size", type=int, default=16)
  parser.add_argument("--sequence_length", type=int, default=64)
  parser.add_argument("--d_model", type=int, default=64)
  parser.add_argument("--d_ff", type=int, default=128)
  parser.add_argument("--num_layers", type=int, default=2)
  parser.add_argument("--num_heads", type=int, default=4)
  return parser.parse_args(argv)


def _variant_names(text: str) -> List[str]:
  """Table names for a comma-separated list of names or labels."""
  return [attentions.get(v.strip()).name for v in text.split(",") if v.strip()]


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Trains and evaluates every variant; returns 1 if any run failed."""
  args = parse_args(argv)
  checkout.use_for_subprocesses()
  output_dir = os.path.abspath(args.output_dir)
  try:
    names = _variant_names(args.variants)
  except ValueError as e:
    print("error: %s" % e, file=sys.stderr)
    return 2
  if not os.path.isfile(commands.cli_path()):
    print("error: %s not found; run `make install` first."
          % commands.cli_path(), file=sys.stderr)
    return 2
  os.makedirs(output_dir, exist_ok=True)
  print("Writing everything under %s" % output_dir)
  print("Variants: %s; %d training steps each, batch %d x %d tokens, "
        "d_model %d, %d layers." % (", ".join(names), args.train_steps,
                                    args.batch_size, args.sequence_length,
                                    args.d_model, args.num_layers), flush=True)
  start = time.time()
  rows, failed = [], []
  for variant in names:
    run_dir = os.path.join(output_dir, variant)
    model_dir = os.path.join(run_dir, "model")
    if os.path.exists(model_dir):
      shutil.rmtree(model_dir)
    os.makedirs(run_dir, exist_ok=True)
    command = train_command(args, variant, model_dir)
    train = progress.run_with_progress(
        command, os.path.join(run_dir, "train.log"), "%s train" % variant,
        args.train_steps)
    result = train
    if train.returncode == 0:
      result = progress.run_with_progress(
          commands.perplexity_eval(command, args.eval_steps),
          os.path.join(run_dir, "eval.log"), "%s eval" % variant,
          args.train_steps)
    if result.returncode != 0:
      failed.append(variant)
      continue
    rows.append(summarize(variant, train))

  table = format_table(rows)
  minutes = (time.time() - start) / 60
  with open(os.path.join(output_dir, "results.json"), "w") as f:
    json.dump({"args": vars(args), "results": rows, "failed": failed,
               "minutes": minutes}, f, indent=2)
  with open(os.path.join(output_dir, "results.md"), "w") as f:
    f.write(table + "\n")
  print()
  print(table)
  print("\nValidation loss: cross-entropy per target token (nats) on the "
        "validation split of %s. The progress lines' 'train loss/slot' is "
        "mesh's training loss: summed over target tokens and divided by "
        "batch x target length, padding slots included, so it is lower "
        "than the per-token loss when targets are short." % TASK)
  print("Total %.1f minutes; results in %s/results.md" % (minutes, output_dir))
  if failed:
    print("FAILED: %s (see their logs)" % ", ".join(failed), file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
