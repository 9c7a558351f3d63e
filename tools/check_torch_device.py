# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""The fused attention path equals eager on a device, in fused kernels.

Every variant: a training step's logits and gradients, fused (sdpa)
against eager in float32; on CUDA sdpa's math kernel is not allowed, so a
call it would take raises. Exit status 1 if a variant fails. Needs torch
and transformers only. See `workbench/pytorch/device_check.py`.

  .venv/bin/python tools/check_torch_device.py
  python3 tools/check_torch_device.py --device cuda --variants D,D+V \
      --output_dir runs/torch_device_check
"""

import argparse
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from workbench.pytorch import benchmark
from workbench.pytorch import device_check
from workbench.pytorch import measure


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the check; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--device", default=None,
                      help="cuda or cpu (default: cuda when present)")
  parser.add_argument("--variants", default=None,
                      help="comma-separated labels (default: every variant)")
  parser.add_argument("--output_dir", default=None,
                      help="also writes torch_device_check.json and "
                      "torch_device_check.md there")
  args = parser.parse_args(argv)
  device = benchmark.resolve_device(args.device)
  labels = None
  if args.variants:
    labels = [v.strip() for v in args.variants.split(",") if v.strip()]
    known = [label for label, _ in benchmark.variants()]
    unknown = [v for v in labels if v not in known]
    if unknown:
      print("error: unknown variants %s (known: %s)" % (
          unknown, ", ".join(known)), file=sys.stderr)
      return 2
  results = device_check.check(device, labels)
  text = device_check.markdown(results, device)
  print(text, end="")
  if args.output_dir:
    measure.write_report(args.output_dir, "torch_device_check", text,
                         device_check.as_json(results))
  return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
  sys.exit(main())
