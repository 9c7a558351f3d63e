# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Audits the collectives of each variant on a model-parallel mesh.

No variant may force an all-gather of a length x length tensor per example.
For each variant, the tiny T5-style Bitransformer's training step and greedy
decoding are lowered on meshes of 4 logical devices, and every collective
is listed with the Mesh TensorFlow tensor it communicates; see
`workbench/comm_audit.py` for how.

Usage:
  python tools/mesh_comm_audit.py [--variants=random,dense]
      [--meshes="model:2,batch:2;model:4"] [--layout=...] [--packed] [--all]

`--packed` trains on packed examples (explicit sequence ids and positions,
and positional embeddings, without which mesh drops the positions), where
the synthesizers gather their position tables per example;
`--all` prints every collective, not only those with a length-like
dimension. The exit status is 1 if any variant fails the audit.
"""

import argparse
import collections
import sys
from typing import Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
import tensorflow.compat.v1 as tf

from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import mesh_defaults
from workbench import comm_audit
from workbench import tiny_model


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Audits the variants; returns the exit status (1 if any fails)."""
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--variants", default=",".join(comm_audit.VARIANTS),
                      help="comma-separated variant names (and/or %s)" %
                      attentions.MESH_SELF_ATTENTION.name)
  parser.add_argument("--meshes", default=";".join(comm_audit.MESHES),
                      help="semicolon-separated mesh shapes")
  parser.add_argument("--layout", default=mesh_defaults.LAYOUT_RULES)
  parser.add_argument("--batch", type=int, default=tiny_model.BATCH)
  parser.add_argument("--length", type=int, default=tiny_model.LENGTH)
  parser.add_argument("--no_optimizer", action="store_true",
                      help="leave out the Adafactor update")
  parser.add_argument("--packed", action="store_true",
                      help="train on packed examples")
  parser.add_argument("--all", action="store_true",
                      help="list every collective, not only those with a "
                      "length-like dimension")
  args = parser.parse_args(argv)
  tf.disable_v2_behavior()
  tf.logging.set_verbosity(tf.logging.ERROR)
  failed = []
  for variant in args.variants.split(","):
    audits = comm_audit.audit_variant(
        variant, args.meshes.split(";"), args.layout, batch=args.batch,
        length=args.length, optimizer=not args.no_optimizer,
        packed=args.packed)
    for mesh_shape, audit in audits.items():
      found = comm_audit.problems(audit)
      print("== %s on %s: %d collectives (%s), %s" % (
          variant, mesh_shape, len(audit.collectives), ", ".join(
              "%d %s" % (n, k) for k, n in sorted(collections.Counter(
                  c.kind for c in audit.collectives).items())),
          "%d PROBLEMS" % len(found) if found else "ok"))
      print(comm_audit.format_table(audit.collectives,
                                    only_length=not args.all))
      for message in found:
        print("PROBLEM: " + message)
      print()
      if found:
        failed.append((variant, mesh_shape))
  if failed:
    print("FAILED: " + ", ".join("%s on %s" % f for f in failed))
    return 1
  print("OK: no collective communicates a per-example length x length "
        "tensor.")
  return 0


if __name__ == "__main__":
  sys.exit(main())
