# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""PersonaChat dialogue generation from local files (paper Table 3).

`synth_personachat` reads `<dir>/<split>.jsonl` or `<dir>/<split>.tsv` for
the splits train, validation and test, where `<dir>` is the gin binding
`t5_tasks.dialogue.personachat_dir.path` or else the environment variable
`MTF_SYNTH_PERSONACHAT_DIR`. Nothing is read at import: a missing directory or
file raises `FileNotFoundError` when a split is first requested.

File formats (UTF-8, one example a line):

* JSONL: `{"context": ..., "response": "...", "persona": [...]}`; `context`
  is a string or a list of turns (joined with `" | "`), `persona` is optional
  (a string or a list of sentences).
* TSV: `context<TAB>response` (no header; no tabs or newlines inside fields).

Inputs are `"persona: <persona> context: <context>"` (`"context: <context>"`
without a persona), targets the response. Metrics, those of the paper's
Table 3: sacreBLEU (t5's corpus BLEU-4), ROUGE-1/2/L/Lsum, METEOR (exact
matches only, no stemming or synonyms) and CIDEr-D (`t5_tasks.metrics`).
"""

import json
import os
from typing import Dict, List, Optional

import gin
import seqio
import tensorflow.compat.v2 as tf

from t5.evaluation import metrics as t5_metrics
from t5_tasks import metrics
from t5_tasks import registry

ENV_VAR = "MTF_SYNTH_PERSONACHAT_DIR"
SPLITS = ("train", "validation", "test")
TURN_SEPARATOR = " | "


@gin.configurable
def personachat_dir(path: Optional[str] = None) -> str:
  """Returns the PersonaChat directory (gin binding, else `$ENV_VAR`).

  Args:
    path: the directory; when None, `MTF_SYNTH_PERSONACHAT_DIR`.

  Returns:
    The directory path.

  Raises:
    FileNotFoundError: no directory is configured or it does not exist.
  """
  path = path or os.environ.get(ENV_VAR, "")
  if not path:
    raise FileNotFoundError(
        "PersonaChat data not configured: set the gin binding "
        "t5_tasks.dialogue.personachat_dir.path or the environment variable "
        f"{ENV_VAR} to a directory holding train/validation/test .jsonl or "
        ".tsv files (see docs/tasks.md).")
  if not tf.io.gfile.isdir(path):
    raise FileNotFoundError(f"PersonaChat directory {path!r} does not exist.")
  return path


def split_file(split: str) -> str:
  """Returns the file of one split.

  Args:
    split: "train", "validation" or "test".

  Returns:
    The path of `<dir>/<split>.jsonl` or, failing that, `<dir>/<split>.tsv`.

  Raises:
    FileNotFoundError: neither file exists.
  """
  directory = personachat_dir()
  for ext in ("jsonl", "tsv"):
    path = os.path.join(directory, f"{split}.{ext}")
    if tf.io.gfile.exists(path):
      return path
  raise FileNotFoundError(
      f"PersonaChat: no {split}.jsonl or {split}.tsv in {directory!r}.")


def _text(value, separator: str) -> str:
  if isinstance(value, (list, tuple)):
    return separator.join(str(v).strip() for v in value)
  return str(value).strip()


def read_examples(path: str) -> List[Dict[str, str]]:
  """Reads a PersonaChat file into {"inputs", "targets"} texts.

  Args:
    path: a `.jsonl` or `.tsv` file in the documented format.

  Returns:
    One dict per non-empty line.

  Raises:
    ValueError: a line is malformed (the message names file and line).
  """
  out = []
  with tf.io.gfile.GFile(path, "r") as f:
    for number, line in enumerate(f, start=1):
      line = line.rstrip("\n")
      if not line.strip():
        continue
      if path.endswith(".tsv"):
        fields = line.split("\t")
        if len(fields) != 2:
          raise ValueError(f"{path}:{number}: expected context<TAB>response, "
                           f"got {len(fields)} fields")
        context, response, persona = fields[0], fields[1], ""
      else:
        try:
          record = json.loads(line)
          context, response = record["context"], record["response"]
        except (ValueError, KeyError, TypeError) as e:
          raise ValueError(f"{path}:{number}: expected a JSON object with "
                           f"'context' and 'response' ({e})") from e
        persona = record.get("persona") or ""
      context = _text(context, TURN_SEPARATOR)
      persona = _text(persona, " ")
      inputs = f"context: {context}"
      if persona:
        inputs = f"persona: {persona} {inputs}"
      out.append({"inputs": inputs, "targets": _text(response, " ")})
  return out


def personachat_dataset_fn(split: str, shuffle_files: bool = False,
                           seed: Optional[int] = None) -> tf.data.Dataset:
  """seqio dataset function over the configured PersonaChat files.

  Args:
    split: "train", "validation" or "test".
    shuffle_files: unused (one file per split).
    seed: unused.

  Returns:
    A dataset of {"inputs", "targets"} strings.
  """
  del shuffle_files, seed
  examples = read_examples(split_file(split))
  return tf.data.Dataset.from_tensor_slices({
      "inputs": tf.constant([e["inputs"] for e in examples], tf.string),
      "targets": tf.constant([e["targets"] for e in examples], tf.string),
  })


registry.add_task(
    "synth_personachat",
    source=seqio.FunctionDataSource(personachat_dataset_fn, splits=SPLITS),
    preprocessors=[
        *registry.tokenize_and_eos(),
    ],
    metric_fns=[t5_metrics.bleu, metrics.rouge, metrics.meteor,
                metrics.cider])
