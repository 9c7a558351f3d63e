# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""ListOps (Long Range Arena) generated deterministically from a seed.

An expression is a digit 0-9 or an operator applied to 2..`max_args`
sub-expressions, written in prefix form with a closing bracket, e.g.
`[MAX 4 [SM 3 9 ] 0 ]` (= 4). Operators, as in LRA:

* `[MAX` / `[MIN`: largest / smallest argument;
* `[MED`: median, the mean of the two middle values truncated to an integer
  when the count is even (LRA's `int(np.median(...))`);
* `[SM`: sum modulo 10.

The generator follows LRA's recipe: a node at depth < `max_depth` is an
operator with probability 0.25 (else a digit), a node at `max_depth` is a
digit; operator and digit are uniform. An expression's length is LRA's: digits
count 1, each operator 2 (its name and `]`); expressions outside
[`min_length`, `max_length`] are rejected, as are duplicates. The splits are
drawn from one stream (validation, test, then train) and are disjoint.
`parens=True` writes LRA's released text form, which adds a pair of grouping
parentheses per argument: `( ( ( [MAX 2 ) 9 ) ] )`. LRA used max_depth 10,
max_args 10, lengths 500-2000 and 96k/2k/2k examples; the defaults here are
small so that the task builds in seconds (set them with gin, see
`docs/tasks.md`).

The seqio task `listops` has `inputs` = expression, `targets` = the label
digit as text, metric accuracy. It is offline by default: the byte
vocabulary, unless `t5_tasks.vocabulary` is told otherwise.
"""

import dataclasses
import functools
import random
from typing import Dict, List, Optional, Sequence, Tuple, Union

import gin
import seqio
import tensorflow.compat.v2 as tf

from t5.evaluation import metrics
from t5_tasks import registry
from t5_tasks import vocabulary

MAX = "[MAX"
MIN = "[MIN"
MED = "[MED"
SUM_MOD = "[SM"
END = "]"
OPERATORS = (MAX, MIN, MED, SUM_MOD)
VALUE_PROBABILITY = 0.75  # LRA: an operator is drawn when random() <= 0.25.

# A tree is a digit or (operator, [children]).
Tree = Union[int, Tuple[str, List["Tree"]]]


@dataclasses.dataclass(frozen=True)
class ListOpsConfig:
  """Options of the generator (LRA's values in brackets).

  Attributes:
    seed: seed of the single random stream all splits are drawn from.
    max_depth: depth limit; the root has depth 1 and a node at depth
      `max_depth` is always a digit [10].
    max_args: most arguments of one operator (at least 2) [10].
    min_length: shortest accepted length, inclusive [500].
    max_length: longest accepted length, inclusive [2000].
    num_train: examples in `train` [96000].
    num_validation: examples in `validation` [2000].
    num_test: examples in `test` [2000].
    parens: write LRA's grouping parentheses.
  """
  seed: int = 0
  max_depth: int = 10
  max_args: int = 10
  min_length: int = 8
  max_length: int = 64
  num_train: int = 2000
  num_validation: int = 200
  num_test: int = 200
  parens: bool = False

  def __post_init__(self):
    if self.max_args < 2:
      raise ValueError(f"max_args must be >= 2, got {self.max_args}")
    if self.max_depth < 1:
      raise ValueError(f"max_depth must be >= 1, got {self.max_depth}")
    if not 1 <= self.min_length <= self.max_length:
      raise ValueError("Need 1 <= min_length <= max_length, got "
                       f"{self.min_length}, {self.max_length}")
    if self.max_depth == 1 and self.min_length > 1:
      raise ValueError("max_depth 1 allows single digits only (length 1).")


class _TooLong(Exception):
  pass


def _grow(rng: random.Random, depth: int, cfg: ListOpsConfig,
          budget: List[int]) -> Tree:
  """Draws a random tree, counting its length down in `budget[0]`."""
  if depth < cfg.max_depth and rng.random() > VALUE_PROBABILITY:
    budget[0] -= 2
    if budget[0] < 0:
      raise _TooLong()
    num_args = rng.randint(2, cfg.max_args)
    children = [_grow(rng, depth + 1, cfg, budget) for _ in range(num_args)]
    return (rng.choice(OPERATORS), children)
  budget[0] -= 1
  if budget[0] < 0:
    raise _TooLong()
  return rng.randint(0, 9)


def random_tree(rng: random.Random,
                cfg: ListOpsConfig) -> Tuple[Tree, int]:
  """Draws one tree of at most `cfg.max_length` (no lower bound).

  Drawing stops as soon as the tree is longer than `max_length`, and a new one
  is drawn; the accepted trees are distributed as in LRA's full-draw-and-reject.

  Args:
    rng: the random stream.
    cfg: generator options.

  Returns:
    (tree, length).
  """
  while True:
    budget = [cfg.max_length]
    try:
      tree = _grow(rng, 1, cfg, budget)
    except _TooLong:
      continue
    return tree, cfg.max_length - budget[0]


def tree_value(tree: Tree) -> int:
  """Evaluates a tree (recursively).

  Args:
    tree: a digit or (operator, children).

  Returns:
    The value, 0-9.
  """
  if isinstance(tree, int):
    return tree
  op, children = tree
  values = [tree_value(c) for c in children]
  return apply_operator(op, values)


def apply_operator(op: str, values: Sequence[int]) -> int:
  """Applies a ListOps operator.

  Args:
    op: one of `OPERATORS`.
    values: the arguments (digits).

  Returns:
    The result, 0-9.
  """
  if op == MAX:
    return max(values)
  if op == MIN:
    return min(values)
  if op == SUM_MOD:
    return sum(values) % 10
  if op == MED:
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
      return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) // 2
  raise ValueError(f"Unknown operator {op!r}")


def tree_to_string(tree: Tree, parens: bool = False) -> str:
  """Writes a tree as ListOps text.

  Args:
    tree: a digit or (operator, children).
    parens: add LRA's grouping parentheses.

  Returns:
    The expression, tokens separated by single spaces.
  """
  if isinstance(tree, int):
    return str(tree)
  op, children = tree
  parts = [tree_to_string(c, parens) for c in children]
  if not parens:
    return " ".join([op] + parts + [END])
  out = "( " * (len(parts) + 1) + op + " " + parts[0] + " )"
  for part in parts[1:]:
    out += " " + part + " )"
  return out + " " + END + " )"


def tree_length(tree: Tree) -> int:
  """Returns LRA's length: 1 per digit, 2 per operator."""
  if isinstance(tree, int):
    return 1
  return 2 + sum(tree_length(c) for c in tree[1])


def evaluate(expression: str) -> int:
  """Evaluates ListOps text directly (with or without parentheses).

  Args:
    expression: e.g. `"[MAX 4 [SM 3 9 ] 0 ]"`.

  Returns:
    The value, 0-9.

  Raises:
    ValueError: the text is not a well-formed expression.
  """
  stack: List[Tuple[str, List[int]]] = []
  result: Optional[int] = None
  for token in expression.split():
    if token in ("(", ")"):
      continue
    if result is not None:
      raise ValueError(f"Trailing tokens in {expression!r}")
    if token in OPERATORS:
      stack.append((token, []))
    elif token == END:
      if not stack or not stack[-1][1]:
        raise ValueError(f"Unbalanced or empty operator in {expression!r}")
      op, values = stack.pop()
      value = apply_operator(op, values)
      if stack:
        stack[-1][1].append(value)
      else:
        result = value
    elif len(token) == 1 and token.isdigit():
      if stack:
        stack[-1][1].append(int(token))
      else:
        result = int(token)
    else:
      raise ValueError(f"Unknown token {token!r} in {expression!r}")
  if stack or result is None:
    raise ValueError(f"Incomplete expression {expression!r}")
  return result


SPLITS = ("train", "validation", "test")
# Offline by default: the byte vocabulary unless t5_tasks.vocabulary is told
# otherwise (gin or MTF_SYNTH_VOCAB), like the pydocs tasks.
VOCABULARY = vocabulary.OFFLINE_VOCABULARY
_MAX_CONSECUTIVE_MISSES = 200_000


@functools.lru_cache(maxsize=8)
def generate_splits(
    cfg: ListOpsConfig) -> Dict[str, Tuple[Tuple[str, int], ...]]:
  """Generates all three splits (cached per configuration).

  Args:
    cfg: generator options.

  Returns:
    A dict split -> tuple of (expression, label) pairs.
  """
  rng = random.Random(cfg.seed)
  seen = set()
  out = {}
  for split, count in (("validation", cfg.num_validation),
                       ("test", cfg.num_test), ("train", cfg.num_train)):
    examples = []
    misses = 0
    while len(examples) < count:
      tree, length = random_tree(rng, cfg)
      text = tree_to_string(tree, cfg.parens)
      if length < cfg.min_length or text in seen:
        misses += 1
        if misses > _MAX_CONSECUTIVE_MISSES:
          raise RuntimeError(
              f"ListOps: {misses} draws in a row were too short or repeated; "
              f"the options {cfg} cannot give {count} {split} examples.")
        continue
      misses = 0
      seen.add(text)
      examples.append((text, tree_value(tree)))
    out[split] = tuple(examples)
  return out


@gin.configurable
def listops_config(seed: int = 0,
                   max_depth: int = 10,
                   max_args: int = 10,
                   min_length: int = 8,
                   max_length: int = 64,
                   num_train: int = 2000,
                   num_validation: int = 200,
                   num_test: int = 200,
                   parens: bool = False) -> ListOpsConfig:
  """The generator options the `listops` task uses (gin-configurable).

  Bind e.g. `t5_tasks.listops.listops_config.max_length = 2000`. See
  `ListOpsConfig` for the meaning of each argument.

  Args:
    seed: seed of the random stream.
    max_depth: depth limit (nodes at this depth are digits).
    max_args: most arguments of one operator.
    min_length: shortest accepted length.
    max_length: longest accepted length.
    num_train: examples in train.
    num_validation: examples in validation.
    num_test: examples in test.
    parens: write LRA's grouping parentheses.

  Returns:
    A `ListOpsConfig`.
  """
  return ListOpsConfig(seed=seed, max_depth=max_depth, max_args=max_args,
                       min_length=min_length, max_length=max_length,
                       num_train=num_train, num_validation=num_validation,
                       num_test=num_test, parens=parens)


def listops_dataset_fn(split: str,
                       shuffle_files: bool = False,
                       seed: Optional[int] = None,
                       config: Optional[ListOpsConfig] = None
                       ) -> tf.data.Dataset:
  """A seqio dataset function: ListOps examples of one split.

  Args:
    split: "train", "validation" or "test".
    shuffle_files: unused (a split is one in-memory list).
    seed: unused (the data depend on the generator's own seed only).
    config: generator options; `listops_config()` when None.

  Returns:
    A dataset of {"inputs": expression, "targets": label digit} strings.
  """
  del shuffle_files, seed
  cfg = config or listops_config()
  examples = generate_splits(cfg)[split]
  texts = [e[0] for e in examples]
  labels = [str(e[1]) for e in examples]
  return tf.data.Dataset.from_tensor_slices({
      "inputs": tf.constant(texts, dtype=tf.string),
      "targets": tf.constant(labels, dtype=tf.string),
  })


class ListOpsDataSource(seqio.FunctionDataSource):
  """FunctionDataSource whose example counts follow the current config."""

  def __init__(self):
    super().__init__(dataset_fn=listops_dataset_fn, splits=SPLITS)

  def num_input_examples(self, split: str) -> int:
    cfg = listops_config()
    return {"train": cfg.num_train, "validation": cfg.num_validation,
            "test": cfg.num_test}[split]


registry.add_task(
    "listops",
    source=ListOpsDataSource(),
    preprocessors=registry.tokenize_and_eos(),
    output_features=vocabulary.output_features(vocab=VOCABULARY),
    metric_fns=[metrics.accuracy])
