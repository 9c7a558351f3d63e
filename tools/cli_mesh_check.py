# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Stock-CLI check: a model-parallel mesh trains like one device.

For each variant gin file, a tiny T5 1.1 model (models/t5.1.1.tiny.gin, 2
heads, no dropout) is trained through the stock `t5_mesh_transformer` on the
offline `pydocs_span_corruption` task, three times:
  1. one device, one step: writes the starting checkpoint (variable
     initialization is not seeded in the stock CLI, so runs 2 and 3 start
     from this checkpoint instead);
  2. one device, from that checkpoint (`utils.run.init_checkpoint`), one
     more step, unshuffled data with a fixed seed;
  3. the same on mesh `model:2,batch:2` with the TPU layout rules.
The losses the estimator reports for the final step of runs 2 and 3 must be
equal (within float tolerance).

About the devices: the stock CLI builds its estimator with no session config
on CPU, and gin cannot give it one. The mesh run sets
`MTF_SYNTH_CPU_DEVICES=4` (see mtf_synthesizer/cpu_devices.py), so that its
session has 4 logical CPU devices with soft placement off, and places the 4
mesh slices on `/cpu:0` ... `/cpu:3` (`utils.run.mesh_devices`).

Usage:
  python tools/cli_mesh_check.py [--variants=random,dense] [--workdir=/tmp/x]
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

MESH_SHAPE = "model:2,batch:2"
NUM_DEVICES = 4
LAYOUT = "heads:model,batch:batch,d_ff:model,vocab:model"
LENGTH = 32
VARIANTS = ("vanilla", "random", "fixed_random", "factorized_random", "dense",
            "factorized_dense", "random_dense", "dense_vanilla",
            "random_vanilla", "factorized_random_vanilla")
_LOSS = re.compile(
    r"Loss for final step: ([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|nan|inf)")


def cli_path() -> str:
  """The stock CLI of the running interpreter's environment."""
  return os.path.join(os.path.dirname(sys.executable), "t5_mesh_transformer")


def train_command(model_dir: str, variant: str, steps: int,
                  mesh_shape: str = "",
                  init_checkpoint: Optional[str] = None) -> List[str]:
  """The stock CLI command for the tiny model."""
  params = [
      "MIXTURE_NAME = 'pydocs_span_corruption'",
      "mesh_train_dataset_fn.shuffle = False",
      "mesh_train_dataset_fn.seed = 1",
      "utils.run.mesh_shape = '%s'" % mesh_shape,
      "utils.run.layout_rules = '%s'" % LAYOUT,
      "utils.run.train_steps = %d" % steps,
      "utils.run.save_checkpoints_steps = %d" % steps,
      "utils.run.sequence_length = {'inputs': %d, 'targets': %d}" % (
          LENGTH, LENGTH),
      "utils.run.batch_size = ('sequences_per_batch', 4)",
      "SynthesizerAttention.max_length = %d" % LENGTH,
      "synthesizers.FactorizedRandom.k = 4",
  ]
  if init_checkpoint:
    params.append("utils.run.init_checkpoint = '%s'" % init_checkpoint)
  if mesh_shape:
    params.append("utils.run.mesh_devices = %r" % [
        "/cpu:%d" % i for i in range(NUM_DEVICES)])
  return ([cli_path(), "--module_import=mtf_synthesizer",
           "--module_import=t5_tasks", "--model_dir=" + model_dir,
           "--gin_file=dataset.gin", "--gin_file=models/t5.1.1.tiny.gin",
           "--gin_file=synthesizer/%s.gin" % variant] +
          ["--gin_param=" + p for p in params])


def _run(argv: Sequence[str], num_devices: int = 1) -> Tuple[float, str]:
  env = dict(os.environ)
  env.setdefault("MTF_SYNTH_VOCAB", "byte")
  env["MTF_SYNTH_CPU_DEVICES"] = str(num_devices)
  proc = subprocess.run(list(argv), capture_output=True, text=True, env=env,
                        check=False)
  if proc.returncode != 0:
    raise RuntimeError("command failed (%d): %s\n%s" % (
        proc.returncode, " ".join(argv), proc.stderr[-4000:]))
  found = _LOSS.findall(proc.stderr)
  if not found:
    raise RuntimeError("no final loss in the output of %s\n%s" % (
        " ".join(argv), proc.stderr[-4000:]))
  return float(found[-1]), proc.stderr


def check_variant(variant: str, workdir: str) -> Dict[str, float]:
  """Trains `variant` as described in the module doc; returns both losses.

  Args:
    variant: a variant gin file name (without .gin).
    workdir: a fresh directory for the model directories.

  Returns:
    {"one_device": loss, MESH_SHAPE: loss}.
  """
  root = os.path.join(workdir, variant)
  init_dir = os.path.join(root, "init")
  _run(train_command(init_dir, variant, steps=1))
  ckpt = os.path.join(init_dir, "model.ckpt-1")
  runs = {"one_device": train_command(os.path.join(root, "one"), variant, 2,
                                      "", ckpt),
          MESH_SHAPE: train_command(os.path.join(root, "mesh"), variant, 2,
                                    MESH_SHAPE, ckpt)}
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    futures = {k: pool.submit(_run, v, NUM_DEVICES if k == MESH_SHAPE else 1)
               for k, v in runs.items()}
    return {k: f.result()[0] for k, f in futures.items()}


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--variants", default=",".join(VARIANTS))
  p.add_argument("--workdir", default=None)
  p.add_argument("--rtol", type=float, default=1e-4)
  args = p.parse_args(argv)
  workdir = args.workdir or tempfile.mkdtemp(prefix="cli_mesh_check_")
  failed = []
  for variant in args.variants.split(","):
    losses = check_variant(variant, workdir)
    one, mesh = losses["one_device"], losses[MESH_SHAPE]
    ok = abs(one - mesh) <= args.rtol * abs(one)
    print("%-26s one device %.6f  %s %.6f  %s" % (
        variant, one, MESH_SHAPE, mesh, "ok" if ok else "DIFFERENT"),
          flush=True)
    if not ok:
      failed.append(variant)
  if failed:
    print("different losses: %s" % ", ".join(failed))
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
