# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every synthesizing function and mixture against the NumPy reference."""

import logging

import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import graph_order
import layer_harness
import lowering as lowering_lib
import mtf_synthesizer as ms
from mtf_synthesizer.core import reference as ref
from mtf_synthesizer.ops import products

HEADS, DK, D_MODEL, MAX_LEN = 2, 4, 8, 8
BATCH, LENGTH = 2, 6

# Every synthesizing function, with its defaults unless listed here (a
# small rank k, so that FR's factors are not square).
_ARGS = {"factorized_random": {"k": 3}}
FUNCTIONS = {
    name: (lambda name=name: ms.synthesizers.BY_NAME[name](
        **_ARGS.get(name, {})))
    for name in ms.synthesizers.BY_NAME
}

# The compositions checked against the reference: every variant of the
# table (alternately causal), every function alone, and all of them at once.
_KINDS = list(dict.fromkeys(
    [v.components for v in ms.attentions.VARIANTS] +
    [(name,) for name in sorted(FUNCTIONS)] +
    [tuple(FUNCTIONS)]))
CASES = [(kinds, i % 2 == 1) for i, kinds in enumerate(_KINDS)]


def _x(seed=0, length=LENGTH):
  return np.random.RandomState(seed).randn(BATCH, length, D_MODEL).astype(
      np.float32)


def _layer(kinds, **kwargs):
  kwargs.setdefault("num_heads", HEADS)
  kwargs.setdefault("key_value_size", DK)
  kwargs.setdefault("max_length", MAX_LEN)
  return ms.SynthesizerAttention(
      synthesizers=[FUNCTIONS[k]() for k in kinds], **kwargs)


_local = layer_harness.local_variables


def _perturb(run, kinds, seed):
  """Makes zero-initialised variables non-trivial (biases, mixture logits)."""
  rng = np.random.RandomState(seed)
  values = {}
  for name, value in run.variables.items():
    if not np.any(value):
      values[name] = rng.randn(*value.shape).astype(np.float32)
  return values


@pytest.fixture(scope="module", params=CASES,
                ids=lambda c: "+".join(c[0]) + ("-causal" if c[1] else ""))
def case_run(request):
  kinds, causal = request.param
  x = _x()
  first = layer_harness.run_layer(_layer(kinds), x, causal=causal)
  run = layer_harness.run_layer(_layer(kinds), x, causal=causal,
                                variable_values=_perturb(first, kinds, 3))
  return kinds, causal, x, run


def test_forward_matches_numpy(case_run):
  kinds, causal, x, run = case_run
  expected = ref.layer_output(kinds, _local(run.variables), x, HEADS, DK,
                              causal=causal)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)


# The functions whose variables are not trained (their `trainable`).
FROZEN = tuple(name for name, cls in ms.synthesizers.BY_NAME.items()
               if not cls.trainable)


def _trainable(variable: str) -> bool:
  """Whether a variable of the layer ("layer/<function>/...") is trained."""
  return not any(("/%s/" % kind) in ("/%s/" % variable) for kind in FROZEN)


def test_gradients_match_numpy(case_run):
  kinds, causal, x, run = case_run
  checked = layer_harness.assert_gradients_match(
      run, x, lambda v, xs: ref.layer_output(kinds, v, xs, HEADS, DK,
                                             causal=causal),
      trainable=_trainable)
  # Every trainable variable, the value and output projections included.
  assert checked == sum(_trainable(k) for k in run.variables)
  assert "layer/o" in run.grads
  assert "layer/kv" in run.grads or "layer/v" in run.grads


@pytest.mark.parametrize("kind", FROZEN)
def test_a_frozen_function_has_no_gradient(kind):
  run = layer_harness.run_layer(_layer([kind]), _x())
  marker = "layer/" + ms.synthesizers.BY_NAME[kind].marker()
  assert marker in run.variables
  assert not [v for v in run.grads if v.startswith("layer/%s/" % kind)]
  assert "layer/kv" in run.grads


def test_mixture_weights_start_equal_and_sum_to_one():
  kinds = tuple(FUNCTIONS)
  run = layer_harness.run_layer(_layer(kinds), _x())
  v = _local(run.variables)
  np.testing.assert_array_equal(v["mixture/alpha_logits"],
                                np.zeros((len(kinds), HEADS)))
  # With alpha_i = 1/n the layer equals the reference with equal weights.
  expected = ref.layer_output(kinds, v, _x(), HEADS, DK)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)


def test_mixture_weights_are_summarized_in_training_only():
  kinds = ("random", "dot_product")
  logits = np.array([[0.3, -1.0, 2.0, 0.0], [1.0, 0.5, -0.5, 0.0]],
                    np.float32)[:, :HEADS]
  values = {"layer/mixture/alpha_logits": logits}
  run = layer_harness.run_layer(_layer(kinds), _x(), train=True,
                                variable_values=values)
  # alpha = softmax over the functions, per head; the summary is the mean
  # over heads, one scalar per function and layer.
  alpha = np.exp(logits) / np.exp(logits).sum(axis=0)
  assert sorted(run.summaries) == [
      "layer/mixture/alpha_dot_product",
      "layer/mixture/alpha_random"]
  np.testing.assert_allclose(
      run.summaries["layer/mixture/alpha_random"],
      alpha[0].mean(), rtol=1e-6)
  np.testing.assert_allclose(
      run.summaries["layer/mixture/alpha_dot_product"],
      alpha[1].mean(), rtol=1e-6)
  assert not layer_harness.run_layer(_layer(kinds), _x()).summaries


def test_unweighted_sum_mixture():
  kinds = ("random", "dot_product")
  layer = ms.SynthesizerAttention(
      synthesizers=[ms.Random(), ms.DotProduct()], max_length=MAX_LEN,
      learned_mixture_weights=False, num_heads=HEADS, key_value_size=DK)
  run = layer_harness.run_layer(layer, _x())
  assert not any("alpha" in k for k in run.variables)
  expected = ref.layer_output(kinds, _local(run.variables), _x(), HEADS, DK,
                              learned_weights=False)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)


def test_shorter_than_max_length_truncates():
  # length 3 < max_length 8: rows and columns 0..2 of R are used.
  x = _x(length=3)
  run = layer_harness.run_layer(_layer(["random"]), x, causal=True)
  expected = ref.layer_output(["random"], _local(run.variables), x, HEADS, DK,
                              causal=True)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)


POSITIONAL = sorted(k for k in FUNCTIONS
                    if ms.synthesizers.BY_NAME[k].indexes_positions)


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_indexes_positions_says_whether_positions_change_the_output(kind):
  """The property packing and layout tests select functions by."""
  x = _x()
  first = layer_harness.run_layer(_layer([kind]), x)
  values = _perturb(first, [kind], 5)
  outputs = [
      layer_harness.run_layer(
          _layer([kind]), x, positions=np.tile(np.arange(LENGTH) + shift,
                                               (BATCH, 1)),
          segment_ids=np.ones((BATCH, LENGTH), np.int32),
          variable_values=values).output
      for shift in (0, MAX_LEN - LENGTH)]
  changed = not np.allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)
  assert changed == ms.synthesizers.BY_NAME[kind].indexes_positions


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_input_independent_says_whether_the_input_changes_the_logits(kind):
  """The property the pictures tool reads tables without an input by."""
  first = layer_harness.run_layer(_layer([kind]), _x())
  v = _local({**first.variables, **_perturb(first, [kind], 5)})
  pos = np.arange(LENGTH)
  logits = [ref.synthesized_logits(kind, v, x[0], 1, DK, pos)
            for x in (_x(seed=1), _x(seed=2))]
  independent = ms.synthesizers.BY_NAME[kind].input_independent
  assert np.allclose(logits[0], logits[1]) == independent
  if independent:
    np.testing.assert_array_equal(
        ref.synthesized_logits(kind, v, None, 1, DK, pos), logits[0])
  # The marker is one of the function's variables.
  assert ms.synthesizers.BY_NAME[kind].marker() in v


@pytest.mark.parametrize("kind", POSITIONAL)
def test_packed_positions_are_relative_to_segments(kind):
  # Two segments per row: [0..3] and [0..1]; the second row one segment.
  positions = np.array([[0, 1, 2, 3, 0, 1], [0, 1, 2, 3, 4, 5]])
  segments = np.array([[1, 1, 1, 1, 2, 2], [1, 1, 1, 1, 1, 1]])
  x = _x()
  first = layer_harness.run_layer(_layer([kind]), x)
  run = layer_harness.run_layer(
      _layer([kind]), x, causal=True, positions=positions,
      segment_ids=segments, variable_values=_perturb(first, [kind], 5))
  v = _local(run.variables)
  expected = ref.layer_output([kind], v, x, HEADS, DK, causal=True,
                              positions=positions, segment_ids=segments)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)
  # Independent fact: the second segment alone, unpacked, gives the same.
  alone = ref.layer_output([kind], v, x[:1, 4:], HEADS, DK, causal=True)
  np.testing.assert_allclose(run.output[0, 4:], alone[0], rtol=2e-4,
                             atol=2e-5)


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_one_head(kind):
  layer = _layer([kind], num_heads=1, key_value_size=DK)
  run = layer_harness.run_layer(layer, _x(), causal=True)
  v = _local(run.variables)
  # A function's variables have no heads dimension with one head; add it
  # where the reference has it (first; second in the [d_model, heads,
  # hidden] first layer w1).
  v = {k: (val if "/" not in k else val[:, None] if k.endswith("/w1")
           else val[None])
       for k, val in v.items()}
  expected = ref.layer_output([kind], v, _x(), 1, DK, causal=True)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)


def test_multi_query_random():
  # num_memory_heads=1: one value head shared by all query heads.
  layer = _layer(["random"], num_memory_heads=1)
  run = layer_harness.run_layer(layer, _x(), causal=True)
  v = _local(run.variables)
  assert v["kv"].shape == (D_MODEL, DK)
  v["kv"] = np.tile(v["kv"], (1, HEADS))  # every head reads the same values
  expected = ref.layer_output(["random"], v, _x(), HEADS, DK, causal=True)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)


class _OneRowForEveryQuery(ms.FactorizedRandom):
  """The release's broken `factorized` mode: every query gets one row.

  There R1 and R2 have no query position dimension; here the row of query
  position 0 is given to every query, which has the same effect.
  """

  def logits(self, inputs, scale=None):
    logits = super().logits(inputs, scale)
    first = mtf.slice(logits, 0, 1, inputs.length_dim.name)
    first = mtf.reshape(first, logits.shape - inputs.length_dim)
    return mtf.broadcast(first, logits.shape)


def _spread_over_queries(output):
  """max |y_i - y_0| over query positions i, relative to max |y|."""
  return np.max(np.abs(output - output[:, :1])) / np.max(np.abs(output))


def test_factorized_random_rows_differ_per_query():
  # FR's logits do not depend on X, and without a mask a query's output
  # depends on its position only through its row of attention weights:
  # y_i = sum_j w_ij G(x_j) W_o. So the rows of the layer's own output
  # differ per query position iff the synthesized rows w_i differ. (Inputs
  # with identical tokens would not show it: G(x_j) would be the same for
  # every j, and y_i = G(x) W_o for any weights.)
  x = _x()
  run = layer_harness.run_layer(_layer(["factorized_random"]), x)
  expected = ref.layer_output(["factorized_random"], _local(run.variables), x,
                              HEADS, DK)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)
  assert _spread_over_queries(run.output) > 1e-2
  # The same check fails for the release's `factorized` (one row for every
  # query), with the same variables.
  broken = ms.SynthesizerAttention(
      synthesizers=[_OneRowForEveryQuery(k=3)], max_length=MAX_LEN,
      num_heads=HEADS, key_value_size=DK)
  broken_run = layer_harness.run_layer(broken, x)
  np.testing.assert_array_equal(broken_run.variables["layer/kv"],
                                run.variables["layer/kv"])
  assert _spread_over_queries(broken_run.output) < 1e-6


def test_factorized_dense_rejects_a_prime_max_length():
  # N = 7 only splits as 1 x 7: FD would be Dense.
  with pytest.raises(ValueError) as error:
    layer_harness.run_layer(
        _layer(["factorized_dense"], max_length=7), _x())
  message = str(error.value)
  for part in ("N=7", "prime", "degenerates to Dense",
               "composite SynthesizerAttention.max_length", "e.g. 8",
               "synthesizers.FactorizedDense.a / .b"):
    assert part in message, message
  with pytest.raises(ValueError, match="N=2: N is prime.*e.g. 4"):
    ms.FactorizedDense().factor_sizes(2)
  assert ms.FactorizedDense().factor_sizes(9) == (3, 3)
  with pytest.raises(ValueError, match="must be positive"):
    ms.FactorizedDense(b=0).factor_sizes(8)


@pytest.mark.parametrize("factors,expected", [
    (dict(a=1), (1, 7)), (dict(b=1), (7, 1)), (dict(a=1, b=7), (1, 7)),
    (dict(b=7), (1, 7))])
def test_factorized_dense_degenerate_split_when_explicit(
    factors, expected, caplog):
  with caplog.at_level(logging.WARNING):
    assert ms.FactorizedDense(**factors).factor_sizes(7) == expected
  assert "is not factorized" in caplog.text
  assert "a=%d, b=%d" % expected in caplog.text


def test_factorized_dense_explicit_a_1_matches_numpy():
  x = _x()
  layer = ms.SynthesizerAttention(
      synthesizers=[ms.FactorizedDense(a=1)], max_length=7, num_heads=HEADS,
      key_value_size=DK)
  first = layer_harness.run_layer(layer, x)
  run = layer_harness.run_layer(layer, x,
                                variable_values=_perturb(first, None, 4))
  v = _local(run.variables)
  assert v["factorized_dense/wa"].shape[-1] == 1
  assert v["factorized_dense/wb"].shape[-1] == 7
  expected = ref.layer_output(["factorized_dense"], v, x, HEADS, DK)
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)


# Table 1, |theta| per layer, with d = d_model = heads * d_kv and N =
# max_length; biases (b1, b2, ...) are listed separately: the paper's count
# omits them.
D, N, H = D_MODEL, MAX_LEN, HEADS
TABLE_1 = {
    "dot_product": (2 * D * D, 0),                      # 2 d^2 (q, k)
    "random": (N * N * H, 0),                           # N^2 per head
    "fixed_random": (N * N * H, 0),
    "factorized_random": (2 * N * 3 * H, 0),            # 2 N k per head
    "dense": (D * D + D * N, H * DK + H * N),           # d^2 + d N
    # d^2 + d (k1 + k2), k1 * k2 = N = 8: default factors 2 x 4.
    "factorized_dense": (D * D + D * (2 + 4), H * (DK + 2 + 4)),
}


def test_table_1_lists_every_function():
  """A function added without its Table 1 count fails here, not silently."""
  assert set(TABLE_1) == set(ms.synthesizers.BY_NAME), (
      "TABLE_1 lacks %s" % sorted(set(ms.synthesizers.BY_NAME) - set(TABLE_1)))


@pytest.mark.parametrize("kind", sorted(ms.synthesizers.BY_NAME))
def test_parameter_counts_follow_table_1(kind):
  run = layer_harness.run_layer(_layer([kind]), _x())
  own = {k: v.size for k, v in _local(run.variables).items()
         if k not in ("kv", "v", "o")}
  weights = sum(s for k, s in own.items() if "/b" not in k)
  biases = sum(s for k, s in own.items() if "/b" in k)
  assert kind in TABLE_1, "TABLE_1 lacks %r" % kind
  assert (weights, biases) == TABLE_1[kind], own


@pytest.mark.parametrize("lean", [True, False])
def test_mixture_weight_gradient_makes_no_table_sized_temporary(lean):
  """The gradient of a per-head weight alpha_i applied to R's table is a
  contraction: the right values, and no op the table's size on its way
  (mtf's product gradient multiplies the table by its gradient first)."""
  rng = np.random.RandomState(0)
  heads, rows, cols = 3, 16, 24
  x_value = rng.randn(heads, rows, cols).astype(np.float32)
  w_value = rng.randn(heads, rows, cols).astype(np.float32)
  scale_value = rng.randn(heads).astype(np.float32)
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    heads_dim = mtf.Dimension("heads", heads)
    shape = mtf.Shape([heads_dim, mtf.Dimension("rows", rows),
                       mtf.Dimension("cols", cols)])
    x = mtf.import_tf_tensor(mesh, x_value, shape)
    scale = mtf.import_tf_tensor(mesh, scale_value, mtf.Shape([heads_dim]))
    y = products.scaled(x, scale) if lean else x * scale
    # The product's gradient is w, imported: nothing table-sized makes it.
    dscale = mtf.gradients(
        [y], [scale], [mtf.import_tf_tensor(mesh, w_value, shape)])[0]
    lowering = lowering_lib.lower(graph, mesh)
    dscale_tf = lowering.export_to_tf_tensor(dscale)
    with tf.Session(graph=tf_graph) as sess:
      got = sess.run(dscale_tf)
  np.testing.assert_allclose(got, (w_value * x_value).sum(axis=(1, 2)),
                             rtol=1e-4)
  table_sized = [op.name for op in graph_order.ancestors(dscale_tf)
                 if op.type not in ("Const", "Identity", "Reshape")
                 and op.outputs
                 and op.outputs[0].shape.num_elements() == x_value.size
                 and "import_tf_tensor" not in op.name]
  assert (not table_sized) == lean, table_sized
