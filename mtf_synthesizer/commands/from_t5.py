# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Writes a Synthesizer built around a transformers T5 checkpoint.

  mtf-synthesizer-from-t5 --t5=google/t5-v1_1-small --variant=D+V \
      --output_dir=OUT_DIR [--synthesizer_max_length=512]

(or `python -m mtf_synthesizer.commands.from_t5`, or, in a checkout,
`python tools/from_t5.py`). --t5 is a path or Hub name that
`T5ForConditionalGeneration.from_pretrained` loads (T5, T5 v1.1, FLAN-T5,
mT5, ByT5); --variant a variant of the table (`mtf_synthesizer.attentions`:
its label, e.g. D+V, or name, e.g. dense_vanilla) for the encoder's and the
decoder's self-attention. Every T5 weight is copied
(`MtfSynthesizerForConditionalGeneration.from_t5`); the query and key
kernels a variant has no place for are listed in the printed summary. OUT_DIR
holds the model, its code and the T5's tokenizer, and loads with

  AutoModelForSeq2SeqLM.from_pretrained(OUT_DIR, trust_remote_code=True)

A T5 without a tokenizer gives the model without one: the summary's
"tokenizer" is null, its "notes" (also printed on stderr) say "no tokenizer
written", and the status is 0, the model being whole. OUT_DIR is written
whole or not at all (`whole_dir`): the files go beside it and are moved
into place when all are written; an OUT_DIR that holds files is refused
(status 2) unless --overwrite, which replaces it whole.

Needs torch and transformers, not TensorFlow.
"""

import argparse
import json
import os
import sys
from typing import Any, Dict, Optional, Sequence

from huggingface_hub.errors import StrictDataclassError

from mtf_synthesizer import attentions
from mtf_synthesizer.commands import whole_dir

ARCHITECTURE = "MtfSynthesizerForConditionalGeneration"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  """Parses the command line (without the program name)."""
  parser = argparse.ArgumentParser(
      prog="mtf-synthesizer-from-t5", description=__doc__.split("\n")[0])
  parser.add_argument("--t5", required=True,
                      help="a T5 checkpoint: a directory or a Hub name")
  parser.add_argument(
      "--variant", required=True,
      help="the variant's label or name: %s" % ", ".join(
          v.label for v in attentions.VARIANTS))
  parser.add_argument("--output_dir", required=True,
                      help="the directory to write (refused when it holds "
                           "files, unless --overwrite)")
  parser.add_argument(
      "--overwrite", action="store_true",
      help="replace an --output_dir that holds files, whole (no old file "
           "is left)")
  parser.add_argument(
      "--synthesizer_max_length", type=int, default=512,
      help="N, the positions of R, FR, D and FD: the longest sequence "
           "(default 512)")
  args = parser.parse_args(argv)
  try:
    args.components = variant_components(args.variant)
  except ValueError as e:
    parser.error(str(e))
  return args


def variant_components(variant: str) -> Sequence[str]:
  """The synthesizing functions of a variant of the table.

  Args:
    variant: a label ("D+V") or a name ("dense_vanilla").

  Returns:
    Its components, e.g. ("dense", "dot_product").

  Raises:
    ValueError: no variant of that label or name.
  """
  for row in attentions.VARIANTS:
    if variant in (row.label, row.name):
      return row.components
  raise ValueError("no variant %r; the variants: %s" % (
      variant, ", ".join("%s (%s)" % (v.label, v.name)
                         for v in attentions.VARIANTS)))


# Files of which one is in every saved transformers tokenizer of a T5
# (T5Tokenizer, its fast twin, ByT5Tokenizer).
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "spiece.model")


def has_tokenizer(t5: str) -> bool:
  """Whether a T5 checkpoint comes with a tokenizer.

  transformers' AutoTokenizer makes a T5Tokenizer of special tokens only
  for a T5 directory that holds none, so the files are looked for first.

  Args:
    t5: a directory or a Hub name (looked up as `transformers.utils.has_file`
      does: the cache when offline).

  Returns:
    Whether one of TOKENIZER_FILES is there.
  """
  if os.path.isdir(t5):
    return any(os.path.isfile(os.path.join(t5, name))
               for name in TOKENIZER_FILES)
  # pylint: disable-next=g-import-not-at-top
  from transformers.utils import has_file
  return any(has_file(t5, name) for name in TOKENIZER_FILES)


def convert(t5: str, components: Sequence[str], output_dir: str,
            synthesizer_max_length: int = 512,
            overwrite: bool = False) -> Dict[str, Any]:
  """Builds the Synthesizer around the T5 and writes it whole.

  The files are written beside output_dir and moved there when all are
  written (`whole_dir.written_whole`).

  Args:
    t5: a path or Hub name of a T5ForConditionalGeneration.
    components: the self-attention's synthesizing functions (both stacks).
    output_dir: the directory to write.
    synthesizer_max_length: N.
    overwrite: replace an output_dir that holds files (else refused).

  Returns:
    A summary: {"output_dir", "architecture", "parameters", "tokenizer"
    (its class, or None when none was written), "unused_t5_weights",
    "initialized_weights", "notes" (what the user must know, e.g. that no
    tokenizer was written)}.

  Raises:
    whole_dir.OutputDirError: output_dir holds files and not overwrite,
      or is or holds the T5 directory.
  """
  # pylint: disable=g-import-not-at-top
  import transformers
  from mtf_synthesizer.hf_tools import saving
  from mtf_synthesizer.hf_tools import t5_conversion
  whole_dir.check(output_dir, overwrite, [t5])  # before the T5 is loaded
  model, info = t5_conversion.from_t5(
      t5, encoder_synthesizers=components, decoder_synthesizers=components,
      synthesizer_max_length=synthesizer_max_length,
      output_loading_info=True)
  notes = []
  tokenizer = None
  if not has_tokenizer(t5):
    notes.append("no tokenizer written: %s has no tokenizer (none of %s); "
                 "save the T5's tokenizer into %s to use the model on text" %
                 (t5, ", ".join(TOKENIZER_FILES), output_dir))
  else:
    try:
      tokenizer = transformers.AutoTokenizer.from_pretrained(t5)
    except (OSError, ValueError) as e:
      notes.append("no tokenizer written: %s's tokenizer does not load (%s)"
                   % (t5, str(e).split("\n")[0]))
  with whole_dir.written_whole(output_dir, overwrite, [t5]) as partial:
    saving.save_pretrained(  # with the model's code, auto_map, a card
        model, partial,
        "converted from the T5 %s by mtf-synthesizer-from-t5: T5's weights "
        "where the Synthesizer has them, the synthesizing functions' own "
        "drawn as mesh initializes them" % t5,
        base_model=None if os.path.isdir(t5) else t5)
    if tokenizer is not None:
      tokenizer.save_pretrained(partial)
  return {"output_dir": output_dir, "architecture": ARCHITECTURE,
          "parameters": sum(p.numel() for p in model.parameters()),
          "tokenizer": type(tokenizer).__name__ if tokenizer else None,
          "unused_t5_weights": info.unused_t5_weights,
          "initialized_weights": info.initialized_weights,
          "notes": notes}


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Writes the model; prints its summary as JSON; returns the status.

  Args:
    argv: the arguments (default: the command line's).

  Returns:
    0 (also when the T5 has no tokenizer: the summary's notes say so), or
    2 when the T5 does not load or has a weight with no place, an option's
    value is refused, or --output_dir holds files without --overwrite (the
    reason on stderr, one line).
  """
  args = parse_args(sys.argv[1:] if argv is None else argv)
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.hf_tools import t5_conversion
  try:
    summary = convert(args.t5, args.components, args.output_dir,
                      args.synthesizer_max_length, args.overwrite)
  except (OSError, ValueError, StrictDataclassError,
          t5_conversion.T5ConversionError) as e:
    # A bad value (the configuration's checks name it): one line.
    print("error: %s" % " ".join(str(e).split()), file=sys.stderr)
    return 2
  for note in summary["notes"]:
    print("note: %s" % note, file=sys.stderr)
  print(json.dumps(summary))
  return 0


if __name__ == "__main__":
  sys.exit(main())
