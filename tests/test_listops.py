# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Tests of the ListOps generator, evaluator and seqio task."""

import re

import gin
import numpy as np
import pytest
import seqio

from t5_tasks import listops

SMALL = listops.ListOpsConfig(seed=3, max_depth=6, max_args=5, min_length=5,
                              max_length=40, num_train=300,
                              num_validation=60, num_test=60)


def reference_value(expression):
  """Evaluates ListOps text by rewriting it into a Python call expression."""
  tokens = [t for t in expression.split() if t not in ("(", ")")]
  text = " ".join(tokens)
  text = (text.replace("[MAX", "mx(").replace("[MIN", "mn(")
          .replace("[MED", "md(").replace("[SM", "sm(").replace("]", ")"))
  # A comma between two arguments: after a digit or ")" and before a digit or
  # the start of a call.
  text = re.sub(r"(?<=[\d)])\s+(?=[\dmsd])", ", ", text)
  env = {
      "mx": lambda *a: int(np.max(a)),
      "mn": lambda *a: int(np.min(a)),
      "md": lambda *a: int(np.median(a)),  # LRA's definition.
      "sm": lambda *a: int(np.sum(a)) % 10,
  }
  return eval(text, {"__builtins__": {}}, env)  # pylint: disable=eval-used


def nesting_depth(expression):
  """Deepest operator nesting (root operator = 1), digits not counted."""
  depth = deepest = 0
  for token in expression.split():
    if token.startswith("["):
      depth += 1
      deepest = max(deepest, depth)
    elif token == "]":
      depth -= 1
  return deepest


def max_arity(expression):
  """Largest number of arguments of one operator, counted on the text."""
  counts, best = [], 0
  for token in expression.split():
    if token.startswith("["):
      if counts:
        counts[-1] += 1
      counts.append(0)
    elif token == "]":
      best = max(best, counts.pop())
    elif token.isdigit():
      counts[-1] += 1
  return best


@pytest.fixture(scope="module")
def small_splits():
  return listops.generate_splits(SMALL)


@pytest.mark.parametrize("expression,value", [
    ("7", 7),
    ("[MAX 2 9 ]", 9),
    ("[MIN 4 1 8 ]", 1),
    ("[MED 1 2 ]", 1),          # (1 + 2) / 2 = 1.5, truncated.
    ("[MED 3 1 2 4 ]", 2),      # middle values 2 and 3.
    ("[MED 9 0 5 ]", 5),
    ("[SM 9 9 9 ]", 7),         # 27 mod 10.
    ("[MAX 4 [SM 3 9 ] 0 ]", 4),
    ("[MIN [MAX 1 8 ] [MED 7 7 6 ] 9 ]", 7),
    ("( ( ( [MAX 2 ) 9 ) ] )", 9),
])
def test_evaluate_known_values(expression, value):
  assert listops.evaluate(expression) == value
  assert reference_value(expression) == value


@pytest.mark.parametrize("bad", ["", "[MAX 1 2", "[MAX ]", "1 2", "[FOO 1 ]",
                                 "[MAX 1 ] ]", "12"])
def test_evaluate_rejects_malformed(bad):
  with pytest.raises(ValueError):
    listops.evaluate(bad)


def test_labels_match_independent_evaluation(small_splits):
  for split in listops.SPLITS:
    for text, label in small_splits[split]:
      assert label == reference_value(text), text
      assert label == listops.evaluate(text)


def test_split_sizes_disjoint_and_unique(small_splits):
  assert [len(small_splits[s]) for s in ("train", "validation", "test")] == [
      300, 60, 60]
  sets = {s: {t for t, _ in small_splits[s]} for s in listops.SPLITS}
  for s in listops.SPLITS:
    assert len(sets[s]) == len(small_splits[s])
  assert not sets["train"] & sets["validation"]
  assert not sets["train"] & sets["test"]
  assert not sets["validation"] & sets["test"]


def test_structure_respects_options(small_splits):
  lengths, ops = [], set()
  for text, _ in small_splits["train"]:
    tokens = text.split()
    # LRA's length: digits count 1, operators 2 (name and "]") - i.e. tokens.
    assert SMALL.min_length <= len(tokens) <= SMALL.max_length
    assert set(tokens) <= {"[MAX", "[MIN", "[MED", "[SM", "]"} | set(
        "0123456789")
    # Digits sit at depth <= max_depth, so operators at <= max_depth - 1.
    assert nesting_depth(text) <= SMALL.max_depth - 1
    assert 2 <= max_arity(text) <= SMALL.max_args
    lengths.append(len(tokens))
    ops |= {t for t in tokens if t.startswith("[")}
  assert ops == {"[MAX", "[MIN", "[MED", "[SM"}
  assert min(lengths) < 10 and max(lengths) > 30  # the range is used.
  labels = {label for _, label in small_splits["train"]}
  assert labels == set(range(10))


def test_deterministic_for_a_seed():
  fresh = listops.generate_splits.__wrapped__  # bypass the cache
  first, second = fresh(SMALL), fresh(SMALL)
  assert first == second
  other = fresh(listops.ListOpsConfig(**{**SMALL.__dict__, "seed": 4}))
  assert other["train"] != first["train"]


def test_parens_form_is_lra_text():
  cfg = listops.ListOpsConfig(seed=1, max_depth=4, max_args=3, min_length=4,
                              max_length=12, num_train=20, num_validation=1,
                              num_test=1, parens=True)
  plain = listops.generate_splits(
      listops.ListOpsConfig(**{**cfg.__dict__, "parens": False}))
  with_parens = listops.generate_splits(cfg)
  for (p_text, p_label), (q_text, q_label) in zip(plain["train"],
                                                  with_parens["train"]):
    assert p_label == q_label == reference_value(q_text)
    assert [t for t in q_text.split() if t not in "()"] == p_text.split()
    # One "(" per argument plus one per operator, all balanced.
    ops = q_text.count("[")
    args = sum(1 for t in p_text.split() if t != "]") - 1
    assert q_text.split().count("(") == ops + args
    assert q_text.split().count("(") == q_text.split().count(")")
  assert listops.tree_to_string(("[MAX", [2, 9]), parens=True) == (
      "( ( ( [MAX 2 ) 9 ) ] )")


def test_lra_lengths_reachable():
  cfg = listops.ListOpsConfig(seed=0, min_length=500, max_length=2000,
                              num_train=3, num_validation=1, num_test=1)
  for text, label in listops.generate_splits(cfg)["train"]:
    assert 500 <= len(text.split()) <= 2000
    assert label == reference_value(text)


def test_invalid_options():
  with pytest.raises(ValueError):
    listops.ListOpsConfig(max_args=1)
  with pytest.raises(ValueError):
    listops.ListOpsConfig(min_length=10, max_length=5)


def test_seqio_task(byte_vocab):  # pylint: disable=redefined-outer-name
  del byte_vocab
  assert "listops" in seqio.TaskRegistry.names()
  assert "synth_listops" not in seqio.TaskRegistry.names()  # one name
  task = seqio.get_mixture_or_task("listops")
  assert set(task.splits) == {"train", "validation", "test"}
  cfg = listops.listops_config()
  assert task.source.num_input_examples("train") == cfg.num_train
  ds = task.get_dataset({"inputs": 256, "targets": 4}, split="validation",
                        shuffle=False, use_cached=False,
                        try_in_mem_cache=False)
  expected = listops.generate_splits(cfg)["validation"]
  n = 0
  for ex, (text, label) in zip(ds.as_numpy_iterator(), expected):
    # ByteVocabulary: id = byte + 3, EOS = 1.
    targets = list(ex["targets"])
    assert targets == [ord(str(label)) + 3, 1]
    inputs = list(ex["inputs"])
    if len(text) + 1 <= 256:
      assert inputs[-1] == 1
      assert bytes(i - 3 for i in inputs[:-1]).decode() == text
    assert int(ex["targets_pretokenized"]) == reference_value(text)
    n += 1
  assert n == cfg.num_validation
  assert task.metric_fns[0](["1", "2", "3", "4"], ["1", "2", "0", "4"]) == {
      "accuracy": 75.0}


def test_gin_options_reach_the_task():
  name = "t5_tasks.listops.listops_config"
  try:
    gin.bind_parameter(f"{name}.num_test", 7)
    gin.bind_parameter(f"{name}.max_length", 20)
    gin.bind_parameter(f"{name}.num_train", 30)
    source = seqio.get_mixture_or_task("listops").source
    assert source.num_input_examples("test") == 7
    rows = list(source.get_dataset("test").as_numpy_iterator())
    assert len(rows) == 7
    for row in rows:
      text = row["inputs"].decode()
      assert len(text.split()) <= 20
      assert int(row["targets"]) == reference_value(text)
  finally:
    gin.bind_parameter(f"{name}.num_test", 200)
    gin.bind_parameter(f"{name}.max_length", 64)
    gin.bind_parameter(f"{name}.num_train", 2000)
