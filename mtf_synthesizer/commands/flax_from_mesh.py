# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Converts a mesh model directory into the Flax model's orbax checkpoint.

  mtf-synthesizer-flax-from-mesh --model_dir=MESH_MODEL_DIR \
      --gin_file=flax/t5_1_1.gin --gin_file=flax/t5_1_1_small.gin \
      --gin_file=flax/dense_vanilla.gin --output_dir=OUT_DIR

(or `python -m mtf_synthesizer.commands.flax_from_mesh`). The gin files and
`--gin.KEY=VALUE` bindings (T5X's syntax) choose the Flax model, as
`gin/flax/` offers them: a layout, sizes and a variant; `make_model.
decoder_only = True` (`flax/decoder_only.gin`) for a language model.
--model_dir is a mesh model directory (its latest checkpoint) or a
checkpoint prefix (`.../model.ckpt-N`), local or `gs://` (with gcsfs
installed). The checkpoint is read without TensorFlow and named as the
Flax tree (`checkpoints.flax_names`, `init_from_t5`'s rule: a released T5
family into a Synthesizer variant restores T5's weights and draws the
Synthesizer's own, `--seed`). OUT_DIR gets the parameters (orbax),
`config.gin` and `source.json` (`flax_model.checkpointing`), and loads with

  model, params = flax_model.checkpointing.restore(OUT_DIR)

OUT_DIR, a local directory, is written whole or not at all (`whole_dir`);
one that holds files is refused unless --overwrite. A directory without a checkpoint, a truncated
or corrupted checkpoint, a checkpoint of another variant, width or layout
than the gin files ask for, or an unknown variant: one line on stderr, exit
status 2, nothing written.

Needs JAX, Flax and orbax (.venv-jax, requirements-jax.lock), not
TensorFlow.
"""

import argparse
import json
import sys
from typing import List, Optional, Sequence, Tuple

PROGRAM = "mtf-synthesizer-flax-from-mesh"
GIN_PREFIX = "--gin."


def split_gin_bindings(argv: Sequence[str]) -> Tuple[List[str], List[str]]:
  """T5X's `--gin.KEY=VALUE` flags as gin bindings, and the other arguments.

  Args:
    argv: the command line, without the program.

  Returns:
    (the bindings "KEY = VALUE", in order; the other arguments, in order).
  """
  bindings, rest = [], []
  for arg in argv:
    if arg.startswith(GIN_PREFIX) and "=" in arg:
      key, value = arg[len(GIN_PREFIX):].split("=", 1)
      bindings.append("%s = %s" % (key, value))
    else:
      rest.append(arg)
  return bindings, rest


def parse_args(argv: Sequence[str]) -> Tuple[argparse.Namespace, List[str]]:
  """The command line: (the flags, the `--gin.KEY=VALUE` bindings)."""
  parser = argparse.ArgumentParser(prog=PROGRAM,
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True,
                      help="a mesh model directory or checkpoint prefix")
  parser.add_argument("--gin_file", action="append", default=[],
                      help="a gin file of the Flax model (gin/flax/...)")
  parser.add_argument("--output_dir", required=True,
                      help="the directory to write (refused when it holds "
                           "files, unless --overwrite)")
  parser.add_argument("--overwrite", action="store_true",
                      help="replace an --output_dir that holds files, whole")
  parser.add_argument("--seed", type=int, default=0,
                      help="the PRNG seed of the parameters the checkpoint "
                           "lacks")
  bindings, rest = split_gin_bindings(argv)
  args = parser.parse_args(rest)
  if not args.gin_file:
    parser.error("name the Flax model with --gin_file (a layout, sizes and "
                 "a variant of gin/flax/)")
  return args, bindings


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Converts; returns the exit status (2: bad input, nothing written)."""
  args, bindings = parse_args(sys.argv[1:] if argv is None else argv)
  # pylint: disable=g-import-not-at-top
  import gin
  from mtf_synthesizer.checkpoints import flax_names
  from mtf_synthesizer.checkpoints import tf_format
  from mtf_synthesizer.commands import whole_dir
  from mtf_synthesizer.flax_model import checkpointing
  from mtf_synthesizer.flax_model import mesh_checkpoint
  from mtf_synthesizer.flax_model import t5
  # pylint: enable=g-import-not-at-top

  def refuse(message: str) -> int:
    # gin adds the configurable a call raised in; the message names it.
    message = message.split("\n  In call to configurable")[0]
    print("%s: %s" % (PROGRAM, message), file=sys.stderr)
    return 2

  if "://" in args.output_dir:
    return refuse("--output_dir=%s: write a local directory (it is written "
                  "whole or not at all), then copy it (gsutil -m cp -r)" %
                  args.output_dir)
  try:
    whole_dir.check(args.output_dir, args.overwrite, inputs=[args.model_dir])
    gin.parse_config_files_and_bindings(args.gin_file, bindings)
    config = t5.T5Config()
    model = t5.make_model(config=config)  # decoder_only: gin's binding
    decoder_only = isinstance(model, t5.DecoderOnly)
    print("%s: reading %s" % (PROGRAM, args.model_dir), file=sys.stderr)
    loaded = mesh_checkpoint.load(model, args.model_dir, seed=args.seed)
  except (whole_dir.OutputDirError, tf_format.CheckpointError,
          flax_names.MappingError, ValueError, IOError) as e:
    return refuse(str(e))
  source = {"checkpoint": loaded.checkpoint, "restored": loaded.restored,
            "fresh": loaded.fresh, "unused": loaded.unused}
  with whole_dir.written_whole(args.output_dir, args.overwrite,
                               inputs=[args.model_dir]) as out:
    checkpointing.save(out, loaded.params,
                       checkpointing.config_gin(config, decoder_only), source)
  print(json.dumps({"output_dir": args.output_dir,
                    "checkpoint": loaded.checkpoint,
                    "restored": len(loaded.restored),
                    "fresh": loaded.fresh, "unused": loaded.unused},
                   indent=1))
  return 0


if __name__ == "__main__":
  sys.exit(main())
