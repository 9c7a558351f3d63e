# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Stock-CLI check: a model-parallel mesh trains like one device.

For each variant, a tiny T5 1.1 model is trained through the stock
`t5_mesh_transformer` for one step from the same checkpoint on one device and
on mesh `model:2,batch:2` (4 logical CPU devices); the final losses must be
equal within --rtol. The runs are described in
`workbench/mesh_check.py`. About 2-3 minutes per variant on
2 cores.

Usage:
  python tools/cli_mesh_check.py [--variants=random,dense] [--workdir=/tmp/x]
"""

import argparse
import sys
import tempfile
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from mtf_synthesizer import attentions
from workbench import checkout
from workbench import mesh_check


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Checks the variants; returns 1 if any loss differs."""
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--variants", default=",".join(attentions.VARIANT_NAMES))
  p.add_argument("--workdir", default=None)
  p.add_argument("--rtol", type=float, default=1e-4)
  args = p.parse_args(argv)
  checkout.use_for_subprocesses()
  workdir = args.workdir or tempfile.mkdtemp(prefix="cli_mesh_check_")
  failed = []
  for variant in args.variants.split(","):
    losses = mesh_check.check_variant(variant, workdir)
    one, mesh = losses["one_device"], losses[mesh_check.MESH_SHAPE]
    ok = abs(one - mesh) <= args.rtol * abs(one)
    print("%-26s one device %.6f  %s %.6f  %s" % (
        variant, one, mesh_check.MESH_SHAPE, mesh,
        "ok" if ok else "DIFFERENT"), flush=True)
    if not ok:
      failed.append(variant)
  if failed:
    print("different losses: %s" % ", ".join(failed))
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
