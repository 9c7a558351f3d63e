# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Exports a trained model to a Hugging Face `transformers` directory.

  mtf-synthesizer-export-hf MODEL_DIR OUT_DIR [--vocabulary=byte] [--t5]
      [--checkpoint=STEP_OR_PREFIX] [--module_import=MY_TASKS ...]
      [--extension=MY_FUNCTION_mtf_synthesizer.py ...] [--overwrite]

(or `python -m mtf_synthesizer.commands.export_hf`, or, in a checkout,
`python tools/export_hf.py`). MODEL_DIR is the stock CLI's model directory
(operative_config.gin and checkpoints); OUT_DIR then loads in PyTorch with

  AutoModelForSeq2SeqLM.from_pretrained(OUT_DIR, trust_remote_code=True)

(`AutoModelForCausalLM` for a decoder-only language model); with --t5, a
model of mesh's SelfAttention is written as transformers' own T5. The export
itself needs TensorFlow, not torch; loading needs
`pip install torch` (README.md, recipe 3).

The vocabulary is the one the run's task (its gin MIXTURE_NAME) has; a task
of the user's own is found when `--module_import` imports the module that
registers it, as the stock CLI's flag of that name did in training. A
model that uses a synthesizing function from outside the package takes
`--module_import` of the module defining its mesh class (as in training)
and `--extension` of its PyTorch module's file (docs/architecture.md,
"From outside the package"), which the export copies beside the model.
--help, argument errors and an OUT_DIR that may not be written answer
before TensorFlow is imported.

OUT_DIR is written whole or not at all (`whole_dir`): the files go into a
directory beside it, moved into place when all are written, so an
interrupted export leaves no OUT_DIR; an OUT_DIR that holds files is
refused (status 2) unless --overwrite, which replaces it whole.
"""

import argparse
import importlib
import importlib.util
import json
import sys
from typing import Optional, Sequence

from mtf_synthesizer.commands import whole_dir


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  """Parses the command line (without the program name)."""
  parser = argparse.ArgumentParser(
      prog="mtf-synthesizer-export-hf", description=__doc__.split("\n")[0])
  parser.add_argument("model_dir", help="the stock CLI's model directory")
  parser.add_argument("out_dir", help="the directory to write (refused when "
                      "it holds files, unless --overwrite)")
  parser.add_argument(
      "--vocabulary", default=None,
      help="'byte' or a SentencePiece model path (default: the run's)")
  parser.add_argument(
      "--checkpoint", default=None,
      help="a checkpoint prefix, or the step of one in MODEL_DIR (default: "
           "the latest)")
  parser.add_argument(
      "--t5", action="store_true",
      help="write transformers' own T5ForConditionalGeneration (no remote "
           "code); only for a model that is plain T5 (mesh's SelfAttention)")
  parser.add_argument(
      "--module_import", action="append", default=[], metavar="MODULE",
      help="a module to import before the vocabulary is looked up, e.g. "
           "the one registering the run's task (repeatable; as the stock "
           "CLI's --module_import)")
  parser.add_argument(
      "--extension", action="append", default=[], metavar="PATH",
      help="the PyTorch module (<name>_mtf_synthesizer.py) of a "
           "synthesizing function from outside the package that the model "
           "uses (repeatable; `hf_tools.extensions.load_extension`); it is "
           "copied beside the model")
  parser.add_argument(
      "--overwrite", action="store_true",
      help="replace an OUT_DIR that holds files, whole (no old file is "
           "left)")
  return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Writes the export; prints its summary as JSON; returns the status.

  Args:
    argv: the arguments (default: the command line's).

  Returns:
    0, or 2 when the model directory cannot be exported or OUT_DIR holds
    files without --overwrite (the reason on stderr).
  """
  args = parse_args(sys.argv[1:] if argv is None else argv)
  inputs = [args.model_dir] + [
      path for path in (args.checkpoint, args.vocabulary)
      if path and not path.isdigit() and path != "byte"]
  try:
    whole_dir.check(args.out_dir, args.overwrite, inputs)
  except whole_dir.OutputDirError as e:
    print("error: %s" % e, file=sys.stderr)
    return 2
  if importlib.util.find_spec("torch") is None:
    print("note: the export needs no torch, but loading it does: pip "
          "install torch (this package installs from a checkout with pip "
          "install --no-deps .: t5's declared dependencies would pull "
          "tensorflow-datasets beside tfds-nightly)", file=sys.stderr)
  # pylint: disable-next=g-import-not-at-top
  import mtf_synthesizer
  mtf_synthesizer.import_layers()  # TensorFlow, mesh and the gin names
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.export import hf_export
  for module in args.module_import:
    try:
      importlib.import_module(module)
    except ImportError as e:
      print("error: --module_import=%s: %s" % (module, e), file=sys.stderr)
      return 2
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.hf_tools import extensions
  for path in args.extension:
    try:
      extensions.load_extension(path)
    except (ImportError, OSError, ValueError) as e:
      print("error: --extension=%s: %s" % (path, e), file=sys.stderr)
      return 2
  try:
    with whole_dir.written_whole(args.out_dir, args.overwrite,
                                 inputs) as partial:
      summary = hf_export.export(args.model_dir, partial,
                                 vocabulary=args.vocabulary,
                                 checkpoint=args.checkpoint,
                                 plain_t5=args.t5)
  except (hf_export.ExportError, FileNotFoundError,
          whole_dir.OutputDirError) as e:
    print("error: %s" % e, file=sys.stderr)
    return 2
  print(json.dumps(summary))
  return 0


if __name__ == "__main__":
  sys.exit(main())
