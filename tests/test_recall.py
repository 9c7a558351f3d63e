# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The key-value recall task: deterministic, labels right, needs matching."""

import collections
import random

import pytest
import seqio

import t5_tasks  # pylint: disable=unused-import
from t5_tasks import recall


def test_same_seed_same_examples_other_seed_other_examples():
  a = recall.generate_splits(recall.RecallConfig(seed=3, num_train=50))
  b = recall.generate_splits(recall.RecallConfig(seed=3, num_train=50))
  c = recall.generate_splits(recall.RecallConfig(seed=4, num_train=50))
  assert a == b
  assert a["train"] != c["train"]


def test_targets_are_the_value_of_the_queried_key():
  splits = recall.generate_splits(recall.RecallConfig(num_train=2000))
  for examples in splits.values():
    for inputs, target in examples:
      query, pairs = inputs.split(" | ")
      keys = [p[0] for p in pairs.split()]
      assert len(keys) == len(set(keys)) == 8
      assert query in keys
      # Independent of the generator: the pair that starts with the query.
      matching = [p[1:] for p in pairs.split() if p[0] == query]
      assert matching == [target]
      assert recall.answer(inputs) == target
      assert target.isdigit() and len(target) == 1


def test_the_answer_is_not_at_a_fixed_position():
  # A position-only (Random Synthesizer) pattern cannot find the key: the
  # queried pair is spread evenly over the slots.
  examples = recall.generate_splits(recall.RecallConfig(num_train=4000))
  slots = collections.Counter()
  for inputs, _ in examples["train"]:
    query, pairs = inputs.split(" | ")
    slots[[p[0] for p in pairs.split()].index(query)] += 1
  assert len(slots) == 8
  assert max(slots.values()) < 1.25 * min(slots.values())


def test_make_example_uses_the_stream_only():
  assert (recall.make_example(random.Random(1), 5) ==
          recall.make_example(random.Random(1), 5))


def test_bad_num_pairs():
  with pytest.raises(ValueError, match="num_pairs"):
    recall.RecallConfig(num_pairs=27)


def test_task_tokenizes_offline_with_bytes():
  task = seqio.get_mixture_or_task("key_value_recall")
  ds = task.get_dataset({"inputs": 64, "targets": 4}, split="validation",
                        shuffle=False)
  ex = next(iter(ds.as_numpy_iterator()))
  inputs, target = recall.generate_splits(recall.recall_config())[
      "validation"][0]
  # Byte vocabulary: byte + 3, then EOS (1).
  assert list(ex["inputs"]) == [b + 3 for b in inputs.encode()] + [1]
  assert list(ex["targets"]) == [ord(target) + 3, 1]


def test_presence_labels_are_balanced_and_right():
  splits = recall.generate_splits(recall.RecallConfig(num_train=2000),
                                  "key_presence")
  labels = collections.Counter()
  for examples in splits.values():
    for inputs, target in examples:
      query, letters = inputs.split(" | ")
      letters = letters.split()
      assert len(letters) == len(set(letters)) == 8
      # Independent of the generator: membership, read off the text.
      assert target == ("yes" if query in letters else "no")
      assert recall.answer(inputs) == target
      labels[target] += 1
  assert abs(labels["yes"] - labels["no"]) < 0.1 * sum(labels.values())


def test_presence_task_is_registered():
  task = seqio.get_mixture_or_task("key_presence")
  ex = next(iter(task.get_dataset({"inputs": 32, "targets": 4},
                                  split="validation",
                                  shuffle=False).as_numpy_iterator()))
  inputs, target = recall.generate_splits(recall.recall_config(),
                                          "key_presence")["validation"][0]
  assert list(ex["inputs"]) == [b + 3 for b in inputs.encode()] + [1]
  assert list(ex["targets"]) == [b + 3 for b in target.encode()] + [1]
