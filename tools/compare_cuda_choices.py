# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""The fused path's open choices, each pair timed side by side.

D's b2 in the kernel's bias or as a key column (D, D+V), the model's norm
or `torch.nn.functional.rms_norm`, FD's logits as sdpa's bias or inside
FlexAttention's `score_mod`: each pair checked equal in float32, then
timed in turns (forward and backward, bf16 autocast on CUDA). On CUDA
when present, at the `gpu` preset's dims. Needs torch and transformers
only. See `workbench/pytorch/cuda_choices.py`. Named only (`--choices`):
the attention plan's decisions, each against its other outcome for every
variant and situation (routes, b2_rule, shared_softmax, values_apart;
`workbench/pytorch/route_choices.py`); `workbench/pytorch/choices.py` runs
either.

  python3 tools/compare_cuda_choices.py --output_dir runs/cuda_choices
  .venv/bin/python tools/compare_cuda_choices.py --device cpu --batch 2 \
      --length 32 --d_model 64 --num_heads 4 --d_kv 16 --fd_factors 4,8
  .venv/bin/python tools/compare_cuda_choices.py --device cpu \
      --choices routes,b2_rule,shared_softmax --threads 1 --batch 4 \
      --length 256 --d_model 256 --num_heads 4 --d_kv 64 --fd_factors 16,16
"""

import argparse
import dataclasses
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
import torch

from workbench.pytorch import choices
from workbench.pytorch import measure
from workbench.pytorch import timed_pairs


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the comparisons; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--device", default=None,
                      help="cuda or cpu (default: cuda when present)")
  parser.add_argument("--choices", default=",".join(choices.DEFAULT),
                      help="comma-separated, among %s (default: the "
                      "first three)" % ", ".join(choices.KNOWN))
  for field in dataclasses.fields(timed_pairs.Dims):
    if field.name != "fd_factors":
      parser.add_argument("--" + field.name, type=int, default=None)
  parser.add_argument("--fd_factors", default=None, help="a,b")
  parser.add_argument("--threads", type=int, default=None,
                      help="torch's CPU threads (default: torch's own); "
                      "one keeps a shared machine's timings steady")
  parser.add_argument("--rounds", type=int, default=10)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--output_dir", default=None,
                      help="also writes cuda_choices.json and "
                      "cuda_choices.md there")
  args = parser.parse_args(argv)
  if args.threads:
    torch.set_num_threads(args.threads)
  device = measure.resolve_device(args.device)
  sizes = {f.name: getattr(args, f.name)
           for f in dataclasses.fields(timed_pairs.Dims)
           if f.name != "fd_factors" and getattr(args, f.name) is not None}
  if args.fd_factors:
    sizes["fd_factors"] = tuple(int(x) for x in args.fd_factors.split(","))
  dims = timed_pairs.Dims(**sizes)
  wanted = tuple(c.strip() for c in args.choices.split(",") if c.strip())
  unknown = [c for c in wanted if c not in choices.KNOWN]
  if unknown:
    print("error: unknown choices %s (known: %s)" % (
        unknown, ", ".join(choices.KNOWN)), file=sys.stderr)
    return 2
  results = choices.compare(dims, device, wanted, args.rounds, args.repeats,
                            say=lambda m: print(m, file=sys.stderr,
                                                flush=True))
  text = timed_pairs.markdown(results, device, dims)
  print(text, end="")
  if args.output_dir:
    measure.write_report(
        args.output_dir, "cuda_choices", text,
        {"device": measure.device_name(device),
         "dims": dataclasses.asdict(dims),
         "results": [dict(dataclasses.asdict(r), speedup=r.speedup)
                     for r in results]})
  return 0


if __name__ == "__main__":
  sys.exit(main())
