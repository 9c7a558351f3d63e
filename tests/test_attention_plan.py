# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention plan: docs/pytorch.md's table is what plan_attention says.

The table gives, for every variant of the table and each situation a T5
meets (training or inference, CPU or CUDA, with or without a relative
bias that trains, a decoding step), the route of its self-attention's
fused call. The rules the plan encodes are checked one by one here; the
routes' results, fused == eager, in tests/test_torch_fused.py.
"""

import os

import pytest

import conftest
import model_code
from mtf_synthesizer import attentions

# (column of the table, CUDA, training, a relative bias, one query)
SITUATIONS = (
    ("CPU, training", False, True, True, False),
    ("CPU, training, no relative bias", False, True, False, False),
    ("CPU, inference", False, False, True, False),
    ("CUDA, training", True, True, True, False),
    ("CUDA, inference", True, False, True, False),
    ("a decoding step", False, False, True, True),
)
D_KV = 64


def _route(components, is_cuda, training, relative, one_query):
  attention = model_code.load("attention")
  functions = model_code.load("functions").FUNCTIONS
  classes = [functions[name] for name in components]
  # pylint: disable=protected-access
  in_bias = attention.bias_functions(
      classes, attention._kernel_layout(is_cuda, True).bias_gradient)
  layout = attention._kernel_layout(is_cuda, True)  # masks: always a bias
  # pylint: enable=protected-access
  needs_grad = training and (relative or any(
      functions[name].trainable for name in in_bias))
  # A padded training batch; in inference an unpadded one.
  per_example = training or any(
      not functions[name].input_independent for name in in_bias)
  return attention.plan_attention(tuple(components), in_bias, layout, D_KV,
                                  one_query, needs_grad, per_example).value


def table() -> str:
  """The markdown table of routes."""
  lines = ["| variant | " + " | ".join(s[0] for s in SITUATIONS) + " |",
           "|---|" + "---|" * len(SITUATIONS)]
  for variant in attentions.VARIANTS:
    lines.append("| %s | %s |" % (variant.label, " | ".join(
        _route(variant.components, *s[1:]) for s in SITUATIONS)))
  return "\n".join(lines)


def test_the_docs_table_is_the_plan():
  with open(os.path.join(conftest.REPO, "docs", "pytorch.md")) as f:
    text = f.read()
  assert table() in text, table()


@pytest.mark.parametrize("is_cuda", [False, True])
def test_the_rules(is_cuda):
  attention = model_code.load("attention")
  layout = attention._kernel_layout(is_cuda, True)  # pylint: disable=protected-access
  route = attention.Route
  plan = attention.plan_attention
  # V alone: the kernel's own call, at a head width the kernel takes.
  assert plan(("dot_product",), frozenset(), layout, 64, False, True,
              True) is route.DOT_PRODUCT
  # A decoding step: the logits join the bias.
  assert plan(("dense", "dot_product"), frozenset(), layout, 64, True, False,
              False) is route.LOGITS
  # A bias with a gradient stays in the kernel only where it takes one.
  assert (plan(("dense",), frozenset(), layout, 64, False, True, True)
          is (route.COLUMNS if is_cuda else route.LOGITS))
  # Everything in the bias: its softmax, or zero columns where the values
  # keep their own width and the bias differs per example.
  assert plan(("random",), frozenset({"random"}), layout, 64, False, False,
              False) is route.SOFTMAX_OF_BIAS
  assert (plan(("factorized_dense",), frozenset({"factorized_dense"}),
               layout, 64, False, False, True)
          is (route.ZERO_COLUMNS if is_cuda else route.SOFTMAX_OF_BIAS))


def test_what_joins_the_bias():
  attention = model_code.load("attention")
  functions = model_code.load("functions").FUNCTIONS
  every = list(functions.values())
  on_cpu = attention.bias_functions(every, False)
  on_cuda = attention.bias_functions(every, True)
  assert on_cpu == {n for n, f in functions.items()
                    if f.contributes == "bias"}
  assert on_cuda == on_cpu | {n for n, f in functions.items()
                              if f.input_independent}
  assert "dot_product" not in on_cuda
