# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A status line per stock-CLI run, parsed from its log as it comes."""

import re
import sys
import time

from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner

_STEP_LINE = re.compile(r"^step, tf_loss\[([-+0-9.eE]+|nan|inf)\]\[(\d+)\]")
_EVAL_LINE = re.compile(r"Evaluation \[(\d+)/(\d+)\]")


class Progress:
  """One status line per run, rewritten in place on a terminal.

  Pass it to `run` as `on_line`; call `finish` with the result.
  """

  def __init__(self, label: str, total_steps: int):
    self.label = label
    self.total = total_steps
    self.start = time.time()
    self.phase = "starting"
    self.tty = sys.stdout.isatty()
    self._last_print = 0.0
    self._last_text = ""

  def __call__(self, line: str) -> None:
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

  def finish(self, result: runner.Result) -> None:
    """Shows the final line: done, or the failure and where its log is."""
    self.phase = "done" if result.returncode == 0 else (
        "FAILED (exit %d), see %s" % (result.returncode, result.log_path))
    self.show(final=True)

  def show(self, final: bool = False) -> None:
    """Prints the status (on a terminal in place; else every 10 s)."""
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


def run_with_progress(command: commands.Command, log_path: str,
                      label: str, total_steps: int) -> runner.Result:
  """Runs a command with a `Progress` line and a log file.

  Args:
    command: the command.
    log_path: the log file.
    label: the progress line's label ("random train").
    total_steps: the training steps, for "step n/total".

  Returns:
    The run's result.
  """
  progress = Progress(label, total_steps)
  result = runner.run(command, log_path, on_line=progress)
  progress.finish(result)
  return result
