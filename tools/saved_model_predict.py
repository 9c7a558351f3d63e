# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Decodes strings with an exported model, using nothing but TensorFlow.

A SavedModel exported by `t5_mesh_transformer --use_model_api
--mode=export_predict` or `MtfModel.export` holds the whole graph: the
tokenizer (for the byte vocabulary: plain TF string ops), the model and
greedy decoding. This script imports only TensorFlow (no mesh, t5, gin or
mtf_synthesizer), as a server would, loads the model and runs its
`serving_default` signature (input `inputs`: a batch of strings; outputs
`inputs`, as truncated to the exported input length, and `outputs`).

  python tools/saved_model_predict.py <export_dir>/<timestamp> \
      "first input" "second input"
  python tools/saved_model_predict.py <export_dir>/<timestamp> \
      --input_file=inputs.txt

Prints one JSON object per input: {"input": ..., "output": ...}. A request
holds at most the batch size the model was exported with; longer input
lists are sent in chunks of `--batch_size`.
"""

import argparse
import json
import sys
from typing import List, Sequence

import tensorflow as tf


def predict(saved_model_dir: str, inputs: Sequence[str],
            batch_size: int) -> List[dict]:
  """Runs the serving signature on `inputs`, in chunks of `batch_size`.

  Args:
    saved_model_dir: the SavedModel folder (the one holding saved_model.pb).
    inputs: the input strings.
    batch_size: the most examples per request (the export's batch size).

  Returns:
    One {"input", "truncated_input", "output"} dict per input, in order.
  """
  signature = tf.saved_model.load(saved_model_dir).signatures[
      "serving_default"]
  results = []
  for start in range(0, len(inputs), batch_size):
    chunk = list(inputs[start:start + batch_size])
    out = signature(inputs=tf.constant(chunk, dtype=tf.string))
    for text, seen, output in zip(chunk, out["inputs"].numpy(),
                                  out["outputs"].numpy()):
      results.append({"input": text,
                      "truncated_input": seen.decode("utf-8", "replace"),
                      "output": output.decode("utf-8", "replace")})
  return results


def main(argv: Sequence[str]) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("saved_model_dir")
  parser.add_argument("inputs", nargs="*")
  parser.add_argument("--input_file", help="one input per line")
  parser.add_argument("--batch_size", type=int, default=1,
                      help="examples per request (at most the export's)")
  args = parser.parse_intermixed_args(argv)
  inputs = list(args.inputs)
  if args.input_file:
    with open(args.input_file) as f:
      inputs += [line.rstrip("\n") for line in f]
  if not inputs:
    parser.error("give inputs as arguments or with --input_file")
  for result in predict(args.saved_model_dir, inputs, args.batch_size):
    print(json.dumps(result))


if __name__ == "__main__":
  main(sys.argv[1:])
