# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Stock-CLI check: a model-parallel mesh trains like one device.

For a variant, a tiny T5 1.1 model (models/t5.1.1.tiny.gin, 2 heads, no
dropout) is trained through the stock `t5_mesh_transformer` on the offline
`pydocs_span_corruption` task, three times:
  1. one device, one step: writes the starting checkpoint (variable
     initialization is not seeded in the stock CLI, so runs 2 and 3 start
     from this checkpoint instead);
  2. one device, from that checkpoint (`utils.run.init_checkpoint`), one
     more step, unshuffled data with a fixed seed;
  3. the same on mesh `model:2,batch:2` with the TPU layout rules.
The losses the estimator reports for the final step of runs 2 and 3 must be
equal (within float tolerance): tools/cli_mesh_check.py checks every
variant, tests/test_cli_mesh.py one.

About the devices: the stock CLI builds its estimator with no session config
on CPU, and gin cannot give it one. The mesh run sets
`MTF_SYNTH_CPU_DEVICES=4` (see mtf_synthesizer/stock_cli/cpu_devices.py), so
that its session has 4 logical CPU devices with soft placement off, and
places the 4 mesh slices on `/cpu:0` ... `/cpu:3` (`utils.run.mesh_devices`).
"""

import concurrent.futures
import os
import re
from typing import Dict, Optional

from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import mesh_defaults
from mtf_synthesizer.jobs import runner

MESH_SHAPE = "model:2,batch:2"
NUM_DEVICES = 4
LAYOUT = mesh_defaults.LAYOUT_RULES
LENGTH = 32
_LOSS = re.compile(
    r"Loss for final step: ([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|nan|inf)")


def train_command(model_dir: str, variant: str, steps: int,
                  mesh_shape: str = "",
                  init_checkpoint: Optional[str] = None,
                  num_devices: Optional[int] = None) -> commands.Command:
  """The stock CLI command for the tiny model.

  Args:
    model_dir: the model directory.
    variant: a variant name.
    steps: training steps (absolute: a restored global_step counts).
    mesh_shape: "" (one device) or a mesh such as MESH_SHAPE, whose slices
      go on /cpu:0 ... /cpu:NUM_DEVICES-1.
    init_checkpoint: the checkpoint to start from.
    num_devices: logical CPU devices of the session (MTF_SYNTH_CPU_DEVICES;
      default NUM_DEVICES with a mesh, else 1).

  Returns:
    The Command (the byte vocabulary unless MTF_SYNTH_VOCAB says otherwise).
  """
  if num_devices is None:
    num_devices = NUM_DEVICES if mesh_shape else 1
  params = [
      "mesh_train_dataset_fn.shuffle = False",
      "mesh_train_dataset_fn.seed = 1",
      "utils.run.layout_rules = '%s'" % LAYOUT,
      "synthesizers.FactorizedRandom.k = 4",
  ]
  if init_checkpoint:
    params.append("utils.run.init_checkpoint = '%s'" % init_checkpoint)
  devices = ["/cpu:%d" % i for i in range(NUM_DEVICES)] if mesh_shape else None
  return commands.local_train(
      model_dir, variant, steps, length=LENGTH, mesh_shape=mesh_shape,
      mesh_devices=devices, gin_params=params,
      env={"MTF_SYNTH_VOCAB": os.environ.get("MTF_SYNTH_VOCAB", "byte"),
           "MTF_SYNTH_CPU_DEVICES": str(num_devices)})


def final_loss(command: commands.Command) -> float:
  """Runs a training command; returns the loss of its final step.

  Args:
    command: a training Command.

  Returns:
    The "Loss for final step" the estimator logs.

  Raises:
    RuntimeError: when the command fails or logs no final loss (with the
      end of its output).
  """
  result = runner.run(command)
  shell = " ".join(result.argv)
  if result.returncode != 0:
    raise RuntimeError("command failed (%d): %s\n%s" % (
        result.returncode, shell, result.output[-4000:]))
  found = _LOSS.findall(result.output)
  if not found:
    raise RuntimeError("no final loss in the output of %s\n%s" % (
        shell, result.output[-4000:]))
  return float(found[-1])


def check_variant(variant: str, workdir: str) -> Dict[str, float]:
  """Trains `variant` as described in the module doc; returns both losses.

  Args:
    variant: a variant name.
    workdir: a fresh directory for the model directories.

  Returns:
    {"one_device": loss, MESH_SHAPE: loss}.
  """
  root = os.path.join(workdir, variant)
  init_dir = os.path.join(root, "init")
  final_loss(train_command(init_dir, variant, steps=1))
  ckpt = os.path.join(init_dir, "model.ckpt-1")
  runs = {"one_device": train_command(os.path.join(root, "one"), variant, 2,
                                      "", ckpt),
          MESH_SHAPE: train_command(os.path.join(root, "mesh"), variant, 2,
                                    MESH_SHAPE, ckpt)}
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    futures = {k: pool.submit(final_loss, v) for k, v in runs.items()}
    return {k: f.result() for k, f in futures.items()}
