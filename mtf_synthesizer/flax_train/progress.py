# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The progress line on stderr and the metrics TensorBoard reads.

Every `log_every_steps` steps the trainer prints

  step 1200/10000  4.31 steps/s  loss 2.4817  lr 0.01

and writes `loss`, `grad_norm`, `learning_rate`, `steps_per_sec` and
`examples_per_sec` to `model_dir/train/`; each evaluation prints its
metrics and writes them to `model_dir/eval/`.
"""

import os
import sys
import time
from typing import Mapping, Optional

from mtf_synthesizer.flax_train import summaries

TRAIN = "train"
EVAL = "eval"


class Progress:
  """The progress line and the metrics TensorBoard reads.

  Attributes:
    total: the run's last step.
    batch_size: sequences per step.
  """

  def __init__(self, model_dir: Optional[str], total: int, batch_size: int,
               stream=sys.stderr):
    self.total = total
    self.batch_size = batch_size
    self._stream = stream
    self._writers = {}
    self._model_dir = model_dir
    self._last = (None, None)

  def _write(self, name: str, step: int,
             scalars: Mapping[str, float]) -> None:
    if self._model_dir is None:  # not the chief host
      return
    if name not in self._writers:
      self._writers[name] = summaries.writer(
          os.path.join(self._model_dir, name))
    self._writers[name].write(step, scalars)

  def start(self, step: int) -> None:
    self._last = (step, time.monotonic())

  def log(self, step: int, metrics: Mapping[str, float],
          learning_rate: float) -> None:
    """Writes the train metrics of `step` and prints the progress line."""
    last_step, last_time = self._last
    now = time.monotonic()
    rate = (step - last_step) / max(now - last_time, 1e-9)
    self._last = (step, now)
    scalars = dict(metrics)
    scalars["learning_rate"] = learning_rate
    scalars["steps_per_sec"] = rate
    scalars["examples_per_sec"] = rate * self.batch_size
    self._write(TRAIN, step, scalars)
    print("step %d/%d  %.2f steps/s  loss %.4f  lr %.3g" % (
        step, self.total, rate, metrics["loss"], learning_rate),
          file=self._stream, flush=True)

  def log_eval(self, step: int, metrics: Mapping[str, float]) -> None:
    self._write(EVAL, step, metrics)
    print("eval at step %d: %s" % (step, "  ".join(
        "%s %.4f" % kv for kv in sorted(metrics.items()))),
          file=self._stream, flush=True)

  def close(self) -> None:
    for writer in self._writers.values():
      writer.close()
