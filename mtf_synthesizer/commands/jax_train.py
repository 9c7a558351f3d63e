# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Trains or finetunes the Flax Synthesizer as T5X trains: gin, a device mesh.

  mtf-synthesizer-jax-train --model_dir=MODEL_DIR \
      --gin_file=flax/t5_1_1.gin --gin_file=flax/t5_1_1_small.gin \
      --gin_file=flax/dense_vanilla.gin --gin_file=flax/train/c4_pretrain.gin \
      --gin.train.batch_size=128 --gin.mesh_shape.model=1

(or `python -m mtf_synthesizer.commands.jax_train`). The gin files and
`--gin.KEY=VALUE` bindings (T5X's syntax) choose the model (a layout,
sizes, a variant: gin/flax/), the run (`train.*`, gin/flax/train/), the
optimizer (`AdafactorOptimizer.*`), the schedule
(`learning_rate_schedules.*`), the mesh (`mesh_shape.data`,
`mesh_shape.model`) and the checkpoints (`checkpoint_options.*`).
`--module_import` registers tasks (default: t5_tasks). Run again with
the same --model_dir to resume from its newest checkpoint.

Before anything compiles or is written, the run is checked: one line on
stderr and exit status 2 for a TPU slice of several hosts without
--multi_host, --platform=tpu with no TPU visible, a gin file that is not
there, a mesh shape that the devices do not fill, a batch that the data
axis does not divide, no variant chosen, an unknown task (or one whose
data is not there), a model directory of another model, an init
checkpoint missing or of another model (docs/jax_training.md).

Needs the JAX environment (.venv-jax, requirements-jax.lock).
"""

import argparse
import os
import sys
from typing import List, Optional, Sequence, TextIO, Tuple

from mtf_synthesizer.commands import flax_from_mesh

PROGRAM = "mtf-synthesizer-jax-train"


def parse_args(argv: Sequence[str]) -> Tuple[argparse.Namespace, List[str]]:
  """The command line: (the flags, the gin bindings in order)."""
  parser = argparse.ArgumentParser(prog=PROGRAM,
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True,
                      help="where checkpoints, configs and metrics go")
  parser.add_argument("--gin_file", action="append", default=[],
                      help="a gin file (gin/flax/...), in order")
  parser.add_argument("--module_import", action="append", default=None,
                      help="a module that registers tasks (default: "
                           "t5_tasks)")
  parser.add_argument("--platform", choices=("tpu", "gpu", "cpu"),
                      help="refuse to run unless JAX sees this platform")
  parser.add_argument("--multi_host", action="store_true",
                      help="a run over several hosts: calls "
                           "jax.distributed.initialize() first")
  parser.add_argument("--cpu_devices", type=int, default=0,
                      help="on a CPU, split it into this many JAX devices "
                           "(jax_num_cpu_devices), to try a mesh shape")
  bindings, rest = flax_from_mesh.split_gin_bindings(argv)
  args = parser.parse_args(rest)
  if not args.gin_file:
    parser.error("name the model and the run with --gin_file (gin/flax/)")
  return args, bindings


class _FirstLine:
  """A text stream that writes `line` before the first text written to it."""

  def __init__(self, line: str, stream: TextIO):
    self._line = line
    self._stream = stream

  def write(self, text: str) -> int:
    if self._line is not None:
      self._stream.write(self._line + "\n")
      self._line = None
    return self._stream.write(text)

  def flush(self) -> None:
    self._stream.flush()


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Trains; returns the exit status (2: bad input, nothing written)."""
  args, bindings = parse_args(sys.argv[1:] if argv is None else argv)
  # pylint: disable=g-import-not-at-top
  from mtf_synthesizer.flax_train import preflight

  def refuse(message: str) -> int:
    message = str(message).split("\n  In call to configurable")[0]
    print("%s: %s" % (PROGRAM, message.splitlines()[0] if message else
                      "error"), file=sys.stderr)
    return 2

  try:
    preflight.check_hosts(args.multi_host)
  except preflight.PreflightError as e:
    return refuse(e)
  import jax
  if args.cpu_devices:
    try:
      jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    except RuntimeError:  # a caller's JAX that has started its backend
      return refuse("--cpu_devices must be set before JAX starts; this "
                    "process has started it")
  if args.multi_host:
    try:
      jax.distributed.initialize()
    except (RuntimeError, ValueError) as e:
      return refuse("jax.distributed.initialize() failed: %s" % e)
  import gin
  import mtf_synthesizer  # the gin folder on gin's search path
  from mtf_synthesizer.flax_train import data
  from mtf_synthesizer.flax_train import partitioning
  from mtf_synthesizer.flax_train import train
  # pylint: enable=g-import-not-at-top
  bindings = ["train.model_dir = %r" % args.model_dir] + bindings
  if args.module_import is not None:
    bindings.insert(0, "train.module_imports = %r" % (args.module_import,))
  try:  # the tasks' modules first: their configurables may be bound
    data.import_modules(args.module_import or data.DEFAULT_MODULES)
  except ImportError as e:
    return refuse("--module_import: %s" % e)
  gin_files = []  # found here, else in the package's gin folder
  for name in args.gin_file:
    found = [p for p in (name, os.path.join(mtf_synthesizer.GIN_DIR, name))
             if os.path.isfile(p)]
    if not found:
      return refuse("--gin_file=%s: no such file here or in the package's "
                    "gin folder (%s)" % (name, mtf_synthesizer.GIN_DIR))
    gin_files.append(found[0])
  try:
    gin.parse_config_files_and_bindings(gin_files, bindings)
  except (IOError, ValueError) as e:  # a missing file, a bad binding
    return refuse(e)
  try:
    batch_size = gin.query_parameter("train.batch_size")
  except ValueError:
    batch_size = None
  try:
    line = preflight.check_devices(
        args.platform, partitioning.mesh_shape(),
        batch_size if isinstance(batch_size, int) else None)
  except preflight.PreflightError as e:
    return refuse(e)
  try:
    # The devices' line comes once the run is checked, before its own.
    train.train(stream=_FirstLine("%s: %s" % (PROGRAM, line), sys.stderr))
  except train.TrainError as e:
    # Raised while the run is checked, before anything is written.
    return refuse(e)
  return 0

if __name__ == "__main__":
  sys.exit(main())
