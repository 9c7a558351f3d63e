# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""What inductor generates for one training step of each model.

Each model compiled whole (inductor), one step (forward with the loss,
backward); the table counts its graphs, generated kernels, external calls
(matmuls, sdpa), IR nodes and the bytes its kernels move, with ratios to V.
One block a stack by default: the counts per block. Needs torch and
transformers only. See `workbench/pytorch/inductor_census.py`.

  .venv/bin/python tools/inductor_census.py --models T5,V,D+V,R+V \
      --output_dir runs/inductor_census
"""

import argparse
import dataclasses
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from workbench.pytorch import inductor_census
from workbench.pytorch import measure
from workbench.pytorch import models as bench_models


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the census; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--models", default="T5,V,D+V,R+V",
                      help="comma-separated, among %s" %
                      ", ".join(bench_models.model_labels()))
  parser.add_argument("--preset", default="cpu",
                      choices=sorted(bench_models.PRESETS))
  parser.add_argument("--device", default=None,
                      help="cuda or cpu (default: cuda when present)")
  for field in dataclasses.fields(bench_models.Dims):
    parser.add_argument("--" + field.name, type=int, default=None)
  parser.add_argument("--output_dir", default=None,
                      help="also writes inductor_census.md and .json there")
  args = parser.parse_args(argv)
  labels = [m.strip() for m in args.models.split(",") if m.strip()]
  unknown = [m for m in labels if m not in bench_models.model_labels()]
  if unknown:
    print("error: unknown models %s (known: %s)" % (
        unknown, ", ".join(bench_models.model_labels())), file=sys.stderr)
    return 2
  sizes = {"num_layers": 1, "num_decoder_layers": 1}
  sizes.update({f.name: getattr(args, f.name)
                for f in dataclasses.fields(bench_models.Dims)
                if getattr(args, f.name) is not None})
  dims = dataclasses.replace(bench_models.PRESETS[args.preset], **sizes)
  device = measure.resolve_device(args.device)
  results = inductor_census.run(
      labels, dims, device, say=lambda m: print(m, file=sys.stderr,
                                               flush=True))
  text = inductor_census.markdown(results, dims, device)
  print(text, end="")
  if args.output_dir:
    measure.write_report(
        args.output_dir, "inductor_census", text,
        {"device": measure.device_name(device),
         "dims": dataclasses.asdict(dims),
         "results": [dataclasses.asdict(r) for r in results]})
  return 0


if __name__ == "__main__":
  sys.exit(main())
