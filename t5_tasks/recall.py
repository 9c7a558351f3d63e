# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Key-value recall: a two-segment task that needs content-based matching.

The paper finds that Random and Dense Synthesizers fall behind dot-product
attention where a task needs token-token interactions between two segments
(e.g. the sentence pairs of GLUE/SuperGLUE) and that mixing in dot-product
attention (+V) closes the gap. This generated task isolates that need: the
first segment lists key-value pairs, the second names a key, and the target
is that key's value. Where the key sits changes from example to example, so
no fixed (position-only) attention pattern can find it:

  inputs:  "q3 e8 x0 b5 k1 s9 h3 u2 | k"   targets: "1"

Keys are distinct lowercase letters, values digits, all drawn from one seeded
stream (`recall_config.seed`): the same examples on every machine, no
download. Task `key_value_recall`, metric accuracy, byte vocabulary unless
`t5_tasks.vocabulary` is told otherwise.
"""

import dataclasses
import functools
import random
import string
from typing import Dict, Optional, Tuple

import gin
import seqio
import tensorflow.compat.v2 as tf

from t5.evaluation import metrics
from t5_tasks import vocabulary

SPLITS = ("train", "validation", "test")
SEPARATOR = "|"
VOCABULARY = vocabulary.LazyVocabulary(default="byte")


@dataclasses.dataclass(frozen=True)
class RecallConfig:
  """Options of the generator.

  Attributes:
    seed: seed of the random stream.
    num_pairs: key-value pairs in the first segment (at most 26).
    num_train: examples in train.
    num_validation: examples in validation.
    num_test: examples in test.
  """
  seed: int = 0
  num_pairs: int = 8
  num_train: int = 20000
  num_validation: int = 500
  num_test: int = 500

  def __post_init__(self):
    if not 1 <= self.num_pairs <= len(string.ascii_lowercase):
      raise ValueError("key_value_recall: num_pairs must be in 1..26, got "
                       "%r" % (self.num_pairs,))


def make_example(rng: random.Random, num_pairs: int) -> Tuple[str, str]:
  """Draws one example.

  Args:
    rng: the random stream.
    num_pairs: key-value pairs in the first segment.

  Returns:
    (inputs, target) texts.
  """
  keys = rng.sample(string.ascii_lowercase, num_pairs)
  values = [rng.choice(string.digits) for _ in keys]
  query = rng.randrange(num_pairs)
  pairs = " ".join(k + v for k, v in zip(keys, values))
  return "%s %s %s" % (pairs, SEPARATOR, keys[query]), values[query]


def answer(inputs: str) -> str:
  """Reads the answer off an input text (an independent check of labels).

  Args:
    inputs: a text made by `make_example`.

  Returns:
    The value of the queried key.
  """
  pairs, query = inputs.split(" %s " % SEPARATOR)
  table = {p[0]: p[1:] for p in pairs.split()}
  return table[query]


@functools.lru_cache(maxsize=8)
def generate_splits(cfg: RecallConfig) -> Dict[str, Tuple[Tuple[str, str],
                                                          ...]]:
  """All three splits, from one stream (cached per configuration).

  Args:
    cfg: generator options.

  Returns:
    split -> tuple of (inputs, target).
  """
  rng = random.Random(cfg.seed)
  return {split: tuple(make_example(rng, cfg.num_pairs) for _ in range(n))
          for split, n in (("validation", cfg.num_validation),
                           ("test", cfg.num_test),
                           ("train", cfg.num_train))}


@gin.configurable
def recall_config(seed: int = 0, num_pairs: int = 8, num_train: int = 20000,
                  num_validation: int = 500,
                  num_test: int = 500) -> RecallConfig:
  """The options the task uses (gin-configurable, see `RecallConfig`).

  Args:
    seed: seed of the random stream.
    num_pairs: key-value pairs per example.
    num_train: examples in train.
    num_validation: examples in validation.
    num_test: examples in test.

  Returns:
    A `RecallConfig`.
  """
  return RecallConfig(seed=seed, num_pairs=num_pairs, num_train=num_train,
                      num_validation=num_validation, num_test=num_test)


def recall_dataset_fn(split: str, shuffle_files: bool = False,
                      seed: Optional[int] = None) -> tf.data.Dataset:
  """A seqio dataset function: the examples of one split.

  Args:
    split: "train", "validation" or "test".
    shuffle_files: unused.
    seed: unused (the data depend on the generator's seed only).

  Returns:
    A dataset of {"inputs", "targets"} strings.
  """
  del shuffle_files, seed
  examples = generate_splits(recall_config())[split]
  return tf.data.Dataset.from_tensor_slices({
      "inputs": tf.constant([e[0] for e in examples], dtype=tf.string),
      "targets": tf.constant([e[1] for e in examples], dtype=tf.string),
  })


class _RecallSource(seqio.FunctionDataSource):
  """FunctionDataSource whose example counts follow the current config."""

  def __init__(self):
    super().__init__(dataset_fn=recall_dataset_fn, splits=SPLITS)

  def num_input_examples(self, split: str) -> int:
    cfg = recall_config()
    return {"train": cfg.num_train, "validation": cfg.num_validation,
            "test": cfg.num_test}[split]


if "key_value_recall" not in seqio.TaskRegistry.names():
  seqio.TaskRegistry.add(
      "key_value_recall",
      source=_RecallSource(),
      preprocessors=[
          seqio.preprocessors.tokenize,
          seqio.CacheDatasetPlaceholder(),
          seqio.preprocessors.append_eos_after_trim,
      ],
      output_features=vocabulary.output_features(vocab=VOCABULARY),
      metric_fns=[metrics.accuracy])
