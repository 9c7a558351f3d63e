# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""T5's Python API with a Synthesizer: finetune a plain T5 model, use it.

What T5's notebook does with `t5.models.MtfModel`, with
`mtf_synthesizer.MtfModel(variant=...)` instead:

  1. a plain T5 model (mesh's SelfAttention, no variant file) stands for a
     released checkpoint: `--pretrained_model_dir` (e.g.
     gs://t5-data/pretrained_models/small), or, by default, a tiny T5.1.1
     trained here for a few steps with `t5.models.MtfModel`;
  2. `finetune` it into the variant: q/k/v/o (and everything else T5 has)
     come from the checkpoint, the synthesizer's own weights (R, alpha, ...)
     start fresh;
  3. `predict` a file of inputs, `score` (input, target) pairs;
  4. `export` a SavedModel, which serves without mesh, t5 or this package.

Offline by default: the task is `pydocs_span_corruption` (CPython's own
documentation, byte vocabulary). Usage:

  python tools/python_api_example.py --output_dir=runs/python_api \
      [--variant=random_vanilla] [--pretrained_model_dir=...] \
      [--task=pydocs_span_corruption] [--finetune_steps=2]

The results (decodes, scores, SavedModel path) are printed and written to
`<output_dir>/results.json`.
"""

import argparse
import json
import os
from typing import Dict, List, Optional, Sequence

import _checkout  # pylint: disable=unused-import  (the checkout first)
from absl import logging
import gin
import mesh_tensorflow as mtf
import mtf_synthesizer
import t5.models
import t5_tasks  # pylint: disable=unused-import  (registers the tasks)

INPUTS = ("The \"assert\" statement is a convenient way to insert",
          "A class definition defines a class object.")
TARGETS = ("debugging assertions into a program.",
           "It is executed in a new namespace.")
LENGTH = 64


def model_kwargs(length: int) -> Dict:
  """T5's MtfModel arguments for the local CPU (one device, float32)."""
  return dict(tpu=None, mesh_shape="", mesh_devices=[""],
              batch_size=("tokens_per_batch", 4 * length),
              sequence_length={"inputs": length, "targets": length},
              learning_rate_schedule=0.01, save_checkpoints_steps=1000)


def train_plain_t5(model_dir: str, task: str, steps: int) -> str:
  """Trains a tiny plain T5.1.1 (mesh's SelfAttention); returns its dir."""
  # What the stock CLI parses first: mesh's defaults (the layer stacks),
  # then a model file of T5's gin folder (on the search path, for its
  # includes).
  gin.parse_config_file(os.path.join(
      os.path.dirname(mtf.transformer.__file__), "gin", "defaults.gin"))
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(t5.models.__file__), "gin"))
  gin.parse_config_file("models/t5.1.1.tiny.gin")
  model = t5.models.MtfModel(model_dir=model_dir, **model_kwargs(LENGTH))
  model.train(task, steps=steps)
  return model_dir


def write_lines(path: str, lines: Sequence[str]) -> str:
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  return path


def run(output_dir: str, variant: str, task: str, finetune_steps: int,
        pretrained_model_dir: Optional[str] = None,
        pretrain_steps: int = 2) -> Dict:
  """Runs steps 1-4 of the module doc.

  Args:
    output_dir: where the models, files and results go.
    variant: the variant's name or paper label.
    task: a registered task or mixture (its vocabulary is used).
    finetune_steps: steps after the pretrained checkpoint.
    pretrained_model_dir: a plain T5 model directory; None trains one.
    pretrain_steps: steps of the plain T5 trained when there is none.

  Returns:
    The results: directories, decodes, scores and the SavedModel path.
  """
  os.makedirs(output_dir, exist_ok=True)
  if not pretrained_model_dir:
    pretrained_model_dir = train_plain_t5(
        os.path.join(output_dir, "t5_plain"), task, pretrain_steps)
  model_dir = os.path.join(output_dir, variant)
  model = mtf_synthesizer.MtfModel(
      variant=variant, model_dir=model_dir,
      extra_gin_bindings=["SynthesizerAttention.max_length = %d" % LENGTH],
      **model_kwargs(LENGTH))
  model.finetune(task, finetune_steps=finetune_steps,
                 pretrained_model_dir=pretrained_model_dir)

  vocabulary = t5.models.utils.get_vocabulary(task)
  inputs_file = write_lines(os.path.join(output_dir, "inputs.txt"), INPUTS)
  decodes_file = os.path.join(output_dir, "decodes.txt")
  model.predict(inputs_file, decodes_file, vocabulary=vocabulary,
                temperature=0.0)
  step = t5.models.utils.get_latest_checkpoint_from_dir(model_dir)
  with open("%s-%d" % (decodes_file, step)) as f:
    decodes: List[str] = f.read().split("\n")[:len(INPUTS)]
  scores, _ = model.score(list(INPUTS), list(TARGETS), vocabulary=vocabulary)
  saved_model = model.export(os.path.join(output_dir, "export"),
                             vocabulary=vocabulary, temperature=0.0)
  return {
      "variant": variant,
      "pretrained_model_dir": pretrained_model_dir,
      "model_dir": model_dir,
      "checkpoint_step": step,
      "inputs": list(INPUTS),
      "decodes": decodes,
      "targets": list(TARGETS),
      "scores": [float(s) for s in scores],
      "saved_model": saved_model.decode() if isinstance(saved_model, bytes)
                     else saved_model,
  }


def main(argv: Optional[Sequence[str]] = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--variant", default="random_vanilla")
  parser.add_argument("--task", default="pydocs_span_corruption")
  parser.add_argument("--pretrained_model_dir", default=None)
  parser.add_argument("--finetune_steps", type=int, default=2)
  args = parser.parse_args(argv)
  logging.set_verbosity(logging.INFO)
  results = run(args.output_dir, args.variant, args.task, args.finetune_steps,
                args.pretrained_model_dir)
  with open(os.path.join(args.output_dir, "results.json"), "w") as f:
    json.dump(results, f, indent=1)
  print(json.dumps(results, indent=1))


if __name__ == "__main__":
  main()
