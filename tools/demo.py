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

Variant names are the files in `gin/synthesizer/`
(`random` is `--gin_file=synthesizer/random.gin`), except `vanilla`, which is
T5's own attention (no variant file). Usage:

  python tools/demo.py --output_dir=runs/demo [--variants=vanilla,random]
      [--train_steps=300]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

CLI = os.path.join(os.path.dirname(sys.executable), "t5_mesh_transformer")
TASK = "pydocs_span_corruption"
DEFAULT_VARIANTS = "vanilla,random,dense"

_STEP_LINE = re.compile(r"^step, tf_loss\[([-+0-9.eE]+|nan|inf)\]\[(\d+)\]")
_EVAL_LINE = re.compile(r"Evaluation \[(\d+)/(\d+)\]")


def model_flags(args: argparse.Namespace, variant: str) -> List[str]:
  """The command-line arguments shared by the training and eval runs."""
  flags = [
      "--module_import=mtf_synthesizer", "--module_import=t5_tasks",
      "--gin_file=dataset.gin", "--gin_file=models/t5.1.1.tiny.gin",
  ]
  if variant != "vanilla":
    flags += ["--gin_file=synthesizer/%s.gin" % variant,
              "--gin_param=SynthesizerAttention.max_length = %d"
              % args.sequence_length]
  seq = args.sequence_length
  flags += [
      "--gin_param=MIXTURE_NAME = '%s'" % TASK,
      "--gin_param=d_model = %d" % args.d_model,
      "--gin_param=d_ff = %d" % args.d_ff,
      "--gin_param=num_layers = %d" % args.num_layers,
      "--gin_param=num_heads = %d" % args.num_heads,
      "--gin_param=d_kv = %d" % (args.d_model // args.num_heads),
      "--gin_param=utils.run.mesh_shape = ''",
      "--gin_param=utils.run.mesh_devices = ['']",
      "--gin_param=utils.run.sequence_length = "
      "{'inputs': %d, 'targets': %d}" % (seq, seq),
      "--gin_param=utils.run.batch_size = ('tokens_per_batch', %d)"
      % (args.batch_size * seq),
      "--gin_param=utils.run.train_steps = %d" % args.train_steps,
      "--gin_param=utils.run.save_checkpoints_steps = %d" % args.train_steps,
  ]
  return flags


def train_command(args: argparse.Namespace, variant: str,
                  model_dir: str) -> List[str]:
  """The stock CLI command that trains one variant."""
  return [CLI, "--model_dir=" + model_dir] + model_flags(args, variant)


def eval_command(args: argparse.Namespace, variant: str,
                 model_dir: str) -> List[str]:
  """The stock CLI command that evaluates the last checkpoint."""
  return [CLI, "--model_dir=" + model_dir] + model_flags(args, variant) + [
      "--gin_file=perplexity_eval.gin",
      "--gin_param=eval_checkpoint_step = -1",
      "--gin_param=utils.run.dataset_split = 'validation'",
      "--gin_param=utils.run.perplexity_eval_steps = %d" % args.eval_steps,
  ]


class Progress:
  """One status line per run, rewritten in place on a terminal."""

  def __init__(self, label: str, total_steps: int):
    self.label = label
    self.total = total_steps
    self.start = time.time()
    self.phase = "starting"
    self.tty = sys.stdout.isatty()
    self._last_print = 0.0
    self._last_text = ""

  def update(self, line: str) -> None:
    """Updates the phase from one log line of the CLI."""
    m = _STEP_LINE.match(line)
    if m:
      self.phase = "step %s/%d train loss/slot %.3f" % (
          m.group(2), self.total, float(m.group(1)))
    elif "Starting the session" in line:
      self.phase = "graph built, starting session"
    elif "Saving checkpoints for" in line:
      self.phase = "saving checkpoint " + line.rsplit("for ", 1)[-1].split()[0]
    elif "Calling model_fn" in line:
      self.phase = "building graph"
    else:
      m = _EVAL_LINE.search(line)
      if m:
        self.phase = "eval batch %s/%s" % (m.group(1), m.group(2))
      else:
        return
    self.show()

  def show(self, final: bool = False) -> None:
    text = "  %-24s %6.0fs  %s" % (self.label, time.time() - self.start,
                                  self.phase)
    now = time.time()
    if self.tty:
      sys.stdout.write("\r\033[K" + text + ("\n" if final else ""))
      sys.stdout.flush()
    elif final or (now - self._last_print >= 10 and text != self._last_text):
      print(text, flush=True)
      self._last_print = now
      self._last_text = text


def run_streaming(cmd: Sequence[str], log_path: str,
                  progress: Progress) -> int:
  """Runs `cmd`, writing its output to `log_path` and updating `progress`."""
  with open(log_path, "w") as log:
    log.write(" ".join(cmd) + "\n\n")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    for line in proc.stdout:
      log.write(line)
      progress.update(line)
    returncode = proc.wait()
  progress.phase = "done" if returncode == 0 else "FAILED (exit %d), see %s" % (
      returncode, log_path)
  progress.show(final=True)
  return returncode


def _quiet_tf():
  """Imports TensorFlow without its start-up and deprecation chatter."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.get_logger().setLevel("ERROR")
  return tf


def read_scalars(event_dir: str) -> Dict[str, List[tuple]]:
  """{tag: [(step, wall_time, value)]} from the event files in a folder."""
  tf = _quiet_tf()
  out = {}
  for name in sorted(tf.io.gfile.listdir(event_dir)):
    if not name.startswith("events.out.tfevents"):
      continue
    for event in tf.train.summary_iterator(os.path.join(event_dir, name)):
      for value in event.summary.value:
        if value.HasField("simple_value"):
          out.setdefault(value.tag, []).append(
              (event.step, event.wall_time, value.simple_value))
  return out


def count_parameters(model_dir: str) -> int:
  """Parameters in the latest checkpoint, without slots and global_step."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  tf = _quiet_tf()
  total = 0
  for name, shape in tf.train.list_variables(
      tf.train.latest_checkpoint(model_dir)):
    if "_slot_" in name or name == "global_step":
      continue
    total += int(np.prod(shape))
  return total


def summarize(variant: str, model_dir: str) -> Dict[str, Optional[float]]:
  """Validation loss, steps/s and parameters of one finished run."""
  train = read_scalars(model_dir)
  rates = [v for s, _, v in train.get("global_step/sec", []) if s > 1]
  evals = [d for d in sorted(os.listdir(model_dir))
           if d.startswith("eval_%s_validation" % TASK)]
  nlp = None
  if evals:
    values = read_scalars(os.path.join(model_dir, evals[-1])).get(
        "neg_log_perplexity", [])
    if values:
      nlp = max(values)[2]  # The last step.
  losses = train.get("loss", [])
  return {
      "variant": variant,
      "validation_loss": -nlp if nlp is not None else None,
      "train_loss": max(losses)[2] if losses else None,
      "steps_per_sec": statistics.median(rates) if rates else None,
      "parameters": count_parameters(model_dir),
  }


def format_table(rows: Sequence[Dict[str, Optional[float]]]) -> str:
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
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output_dir", default="runs/demo")
  parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                      help="comma-separated; 'vanilla' is T5's attention, "
                      "other names are synthesizer/<name>.gin")
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


def main(argv: Optional[Sequence[str]] = None) -> int:
  args = parse_args(argv)
  output_dir = os.path.abspath(args.output_dir)
  variants = [v.strip() for v in args.variants.split(",") if v.strip()]
  if not os.path.isfile(CLI):
    print("error: %s not found; run `make install` first." % CLI,
          file=sys.stderr)
    return 2
  os.makedirs(output_dir, exist_ok=True)
  print("Writing everything under %s" % output_dir)
  print("Variants: %s; %d training steps each, batch %d x %d tokens, "
        "d_model %d, %d layers." % (", ".join(variants), args.train_steps,
                                    args.batch_size, args.sequence_length,
                                    args.d_model, args.num_layers), flush=True)
  start = time.time()
  rows, failed = [], []
  for variant in variants:
    run_dir = os.path.join(output_dir, variant)
    model_dir = os.path.join(run_dir, "model")
    if os.path.exists(model_dir):
      import shutil  # pylint: disable=g-import-not-at-top
      shutil.rmtree(model_dir)
    os.makedirs(run_dir, exist_ok=True)
    code = run_streaming(train_command(args, variant, model_dir),
                         os.path.join(run_dir, "train.log"),
                         Progress("%s train" % variant, args.train_steps))
    if code == 0:
      code = run_streaming(eval_command(args, variant, model_dir),
                           os.path.join(run_dir, "eval.log"),
                           Progress("%s eval" % variant, args.train_steps))
    if code != 0:
      failed.append(variant)
      continue
    rows.append(summarize(variant, model_dir))

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
