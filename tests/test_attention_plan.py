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

# (column of the table, kernel: "cpu", "cuda" (sdpa's) or "eager",
# training, a relative bias, one query)
SITUATIONS = (
    ("CPU, training", "cpu", True, True, False),
    ("CPU, training, no relative bias", "cpu", True, False, False),
    ("CPU, inference", "cpu", False, True, False),
    ("CUDA, training", "cuda", True, True, False),
    ("CUDA, inference", "cuda", False, True, False),
    ("a decoding step", "cpu", False, True, True),
    ("eager, training", "eager", True, True, False),
    ("eager, inference", "eager", False, True, False),
)
D_KV = 64


def _route(components, kernel, training, relative, one_query):
  attention = model_code.load("attention")
  functions = model_code.load("functions").FUNCTIONS
  classes = [functions[name] for name in components]
  # pylint: disable-next=protected-access
  layout = (attention.EAGER_LAYOUT if kernel == "eager"
            else attention._kernel_layout(kernel == "cuda", True))
  in_bias = attention.bias_functions(classes, layout.bias_gradient)
  needs_grad = training and (relative or any(
      functions[name].trainable for name in in_bias))
  # A padded training batch; in inference an unpadded one.
  per_example = training or any(
      not functions[name].input_independent for name in in_bias)
  return attention.plan_attention(classes, in_bias, layout, one_query,
                                  needs_grad, per_example).route.value


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


def _classes(*properties):
  """The functions of FUNCTIONS with each of (property, value)."""
  return [f for f in model_code.load("functions").FUNCTIONS.values()
          if all(getattr(f, p) == v for p, v in properties)]


@pytest.mark.parametrize("is_cuda", [False, True])
def test_the_rules(is_cuda):
  """Each rule, on functions picked by their properties, not their names."""
  attention = model_code.load("attention")
  # pylint: disable-next=protected-access
  layout = attention._kernel_layout(is_cuda, True)
  route = attention.Route
  plan = attention.plan_attention
  own = _classes(("needs_keys", True))  # the layer's own columns (V)
  weights = _classes(("needs_keys", False), ("contributes", "columns"),
                     ("input_independent", False))  # D: weights as keys
  bias = _classes(("contributes", "bias"), ("input_independent", True))
  per_example = _classes(("contributes", "bias"),
                         ("input_independent", False))
  assert own and weights and bias and per_example
  none = frozenset()
  # The layer's own columns: the kernel, in every situation.
  for one_query in (False, True):
    for needs_grad in (False, True):
      assert plan(own, none, layout, one_query, needs_grad,
                  True) == (route.COLUMNS, none)
  # A decoding step: the logits of a function whose keys are weights join
  # the bias; the layer's own columns stay the kernel's.
  names = frozenset(f.name for f in weights)
  assert plan(weights + own, none, layout, True, False,
              False) == (route.LOGITS, names)
  # A bias with a gradient stays in the kernel only where it takes one.
  assert plan(weights + own, none, layout, False, True, True) == (
      (route.COLUMNS, none) if is_cuda else (route.LOGITS, names))
  assert plan(weights, none, layout, False, True, True) == (
      (route.COLUMNS, none) if is_cuda else (route.SOFTMAX_OF_BIAS, names))
  # Everything in the bias: its softmax, or zero columns where the values
  # keep their own width and the bias differs per example (not for one
  # query).
  for functions in (bias, per_example):
    in_bias = frozenset(f.name for f in functions)
    assert plan(functions, in_bias, layout, False, False,
                False).route is route.SOFTMAX_OF_BIAS
    assert (plan(functions, in_bias, layout, False, False, True).route
            is (route.ZERO_COLUMNS if is_cuda else route.SOFTMAX_OF_BIAS))
    assert plan(functions, in_bias, layout, True, False,
                True).route is route.SOFTMAX_OF_BIAS
  # The eager kernel writes the logits: every function's but the layer's
  # own columns join the bias.
  every = list(model_code.load("functions").FUNCTIONS.values())
  eager = attention.EAGER_LAYOUT
  in_bias = attention.bias_functions(every, eager.bias_gradient)
  logits = plan(every, in_bias, eager, False, False, False).logits
  assert in_bias | logits == {f.name for f in every if not f.needs_keys}


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
  assert not any(functions[n].needs_keys for n in on_cuda)


def test_every_route_is_taken_by_some_variant():
  """No route of `Route` is dead code: the table's situations take each."""
  attention = model_code.load("attention")
  taken = {_route(variant.components, *situation[1:])
           for variant in attentions.VARIANTS for situation in SITUATIONS}
  assert taken == {route.value for route in attention.Route}
