# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Exports a trained model to a Hugging Face `transformers` directory.

  python tools/export_hf.py MODEL_DIR OUT_DIR [--vocabulary=byte]

MODEL_DIR is the stock CLI's model directory (operative_config.gin and
checkpoints); OUT_DIR then loads in PyTorch with

  AutoModelForSeq2SeqLM.from_pretrained(OUT_DIR, trust_remote_code=True)

(`AutoModelForCausalLM` for a decoder-only language model). The export
itself needs TensorFlow, not torch; loading needs
`pip install mtf_synthesizer[torch]`. See README.md, "Take it to PyTorch".
"""

import argparse
import importlib.util
import json
import os
import sys

# Run from the checkout: its packages first (workbench/checkout.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer import hf_export


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("model_dir", help="the stock CLI's model directory")
  parser.add_argument("out_dir", help="the directory to write")
  parser.add_argument(
      "--vocabulary", default=None,
      help="'byte' or a SentencePiece model path (default: the run's)")
  parser.add_argument("--checkpoint", default=None,
                      help="a checkpoint prefix (default: the latest)")
  return parser.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  if importlib.util.find_spec("torch") is None:
    print("note: the export needs no torch, but loading it does: pip install "
          "'mtf_synthesizer[torch]'", file=sys.stderr)
  try:
    summary = hf_export.export(args.model_dir, args.out_dir,
                               vocabulary=args.vocabulary,
                               checkpoint=args.checkpoint)
  except (hf_export.ExportError, FileNotFoundError) as e:
    print("error: %s" % e, file=sys.stderr)
    return 2
  print(json.dumps(summary))
  return 0


if __name__ == "__main__":
  sys.exit(main())
