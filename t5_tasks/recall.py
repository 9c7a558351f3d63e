# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Key-value recall: a two-segment task that needs content-based matching.

The paper finds that Random and Dense Synthesizers fall behind dot-product
attention where a task needs token-token interactions between two segments
(e.g. the sentence pairs of GLUE/SuperGLUE) and that mixing in dot-product
attention (+V) closes the gap. This generated task isolates that need: the
first segment names a key, the second lists key-value pairs, and the target
is that key's value. Where the key sits changes from example to example, so
no fixed (position-only) attention pattern can find it:

  inputs:  "k | q3 e8 x0 b5 k1 s9 h3 u2"   targets: "1"

The query comes first so that an encoder-only classifier, which writes its
answer at position 0, holds the query there (T5's relative position buckets
are coarse at long distances); finding the matching key is the content-based
step.

Keys are distinct lowercase letters, values digits, all drawn from one seeded
stream (`recall_config.seed`): the same examples on every machine, no
download. Task `key_value_recall`, metric accuracy, byte vocabulary unless
`t5_tasks.vocabulary` is told otherwise.

`key_presence` is the one-step form of the same need: is the letter of the
first segment among the letters of the second ("yes"/"no", balanced)?
Dot-product attention answers it with one look-up; the recall needs two (find
the key, read the value beside it), which tiny models learn slowly.
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
from t5_tasks import registry
from t5_tasks import vocabulary

SPLITS = ("train", "validation", "test")
SEPARATOR = "|"
VOCABULARY = vocabulary.OFFLINE_VOCABULARY


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
  return "%s %s %s" % (keys[query], SEPARATOR, pairs), values[query]



def make_presence_example(rng: random.Random,
                          num_pairs: int) -> Tuple[str, str]:
  """Draws one example of the membership variant (`key_presence`).

  The first segment is a letter, the second `num_pairs` distinct letters;
  the target is "yes" when the letter is among them (half of the examples).

  Args:
    rng: the random stream.
    num_pairs: letters in the second segment.

  Returns:
    (inputs, target) texts.
  """
  letters = rng.sample(string.ascii_lowercase, num_pairs + 1)
  present = rng.random() < 0.5
  query = rng.choice(letters[:num_pairs]) if present else letters[num_pairs]
  return ("%s %s %s" % (query, SEPARATOR, " ".join(letters[:num_pairs])),
          "yes" if present else "no")


def answer(inputs: str) -> str:
  """Reads the answer off an input text (an independent check of labels).

  Args:
    inputs: a text made by `make_example` or `make_presence_example`.

  Returns:
    The value of the queried key, or "yes"/"no" for membership.
  """
  query, pairs = inputs.split(" %s " % SEPARATOR)
  items = pairs.split()
  if all(len(p) == 1 for p in items):  # membership
    return "yes" if query in items else "no"
  table = {p[0]: p[1:] for p in items}
  return table[query]


_MAKERS = {"key_value_recall": make_example,
           "key_presence": make_presence_example}


@functools.lru_cache(maxsize=16)
def generate_splits(
    cfg: RecallConfig,
    task: str = "key_value_recall") -> Dict[str, Tuple[Tuple[str, str], ...]]:
  """All three splits, from one stream (cached per configuration).

  Args:
    cfg: generator options.
    task: "key_value_recall" or "key_presence".

  Returns:
    split -> tuple of (inputs, target).
  """
  rng = random.Random(cfg.seed)
  make = _MAKERS[task]
  return {split: tuple(make(rng, cfg.num_pairs) for _ in range(n))
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
                      seed: Optional[int] = None,
                      task: str = "key_value_recall") -> tf.data.Dataset:
  """A seqio dataset function: the examples of one split.

  Args:
    split: "train", "validation" or "test".
    shuffle_files: unused.
    seed: unused (the data depend on the generator's seed only).
    task: "key_value_recall" or "key_presence".

  Returns:
    A dataset of {"inputs", "targets"} strings.
  """
  del shuffle_files, seed
  examples = generate_splits(recall_config(), task)[split]
  return tf.data.Dataset.from_tensor_slices({
      "inputs": tf.constant([e[0] for e in examples], dtype=tf.string),
      "targets": tf.constant([e[1] for e in examples], dtype=tf.string),
  })


class _RecallSource(seqio.FunctionDataSource):
  """FunctionDataSource whose example counts follow the current config."""

  def __init__(self, task: str):
    super().__init__(dataset_fn=functools.partial(recall_dataset_fn,
                                                  task=task), splits=SPLITS)

  def num_input_examples(self, split: str) -> int:
    cfg = recall_config()
    return {"train": cfg.num_train, "validation": cfg.num_validation,
            "test": cfg.num_test}[split]


for _name in _MAKERS:
  registry.add_task(
      _name,
      source=_RecallSource(_name),
      preprocessors=registry.tokenize_and_eos(),
      output_features=vocabulary.output_features(vocab=VOCABULARY),
      metric_fns=[metrics.accuracy])
