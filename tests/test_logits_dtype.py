# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The logits are float32 under bfloat16 activations (the stock TPU setup).

Each synthesizing function is built alone in a small mesh graph, once with
bfloat16 activations (float32 master and slice variables, as mesh's
`activation_dtype = "bfloat16"`) and once with float32 activations, from the
same inputs and variable values. The first layers (W1 X + b1 and the FD
factor projections A and B) may run in the activation dtype, as mesh's query
and key projections do; what makes the logits (the W2 product, A * B, the
R1 R2^T and Q K^T products, the mixture weights) must be float32.

To tell the two apart, the inputs are chosen so that the bfloat16 rounding of
the inputs is the only rounding the permitted bfloat16 part can do:
  * X and the first-layer variables (w1, b1, wa, ba, wb, bb) lie on a coarse
    dyadic grid, small enough that W1 X + b1, A and B are exact in bfloat16;
  * every other variable (R, R1, R2, w2, b2, the mixture's alpha logits) and
    the queries and keys are generic values rounded to bfloat16: exact in
    both runs as inputs, but their products need more than bfloat16's 8
    significant bits.
Then the bfloat16 run must equal the float32 run to float32 precision, while
any product or scaling done in bfloat16 is off by up to 2^-9 relative; each
case checks that rounding its float32 logits to bfloat16 would fail the
1e-6 tolerance.
"""

import zlib

import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import lowering as lowering_lib
from mtf_synthesizer.core import interface
from mtf_synthesizer.core import mixture
from mtf_synthesizer.core import reference as ref
from mtf_synthesizer.core import synthesizers

BATCH, LENGTH, D_MODEL, HEADS, DK, MAX_LEN = 2, 6, 8, 2, 4, 8
BF16 = tf.bfloat16.as_numpy_dtype
RTOL, ATOL = 1e-6, 1e-6

# Variables of the first layers (activation dtype allowed): integer
# numerators in [-top, top] over a power-of-two denominator, (top,
# denominator), such that W1 X + b1, A and B are exact in bf16 (checked by
# test_first_layers_are_exact_in_bfloat16); X holds integers in [-1, 1].
GRID = {"w1": (3, 8), "b1": (3, 8), "wa": (2, 8), "wb": (2, 8),
        "ba": (32, 64), "bb": (32, 64)}

# Every synthesizing function (small sizes), and Dense's other form.
_ARGS = {"factorized_random": {"k": 3}}
FUNCTIONS = {
    name: (lambda cls=cls, name=name: cls(**_ARGS.get(name, {})))
    for name, cls in synthesizers.BY_NAME.items()}
FUNCTIONS["dense_shared_query"] = lambda: synthesizers.Dense(
    use_bias=False, share_query_projection=True)
ALL_FUNCTIONS = tuple(synthesizers.BY_NAME)

CASES = [((name,), False) for name in FUNCTIONS] + [
    (("dense", "dot_product"), False),
    (("random", "dot_product"), False),
    (("factorized_random", "factorized_dense"), False),
    (ALL_FUNCTIONS, False),
    (ALL_FUNCTIONS, True),  # packed: per-example positions, gathers
]


def _bf16(a: np.ndarray) -> np.ndarray:
  """a rounded to bfloat16, as float32."""
  return np.asarray(a, np.float32).astype(BF16).astype(np.float32)


def _generic(seed: int, shape) -> np.ndarray:
  return _bf16(np.random.RandomState(seed).randn(*shape))


def _variable_value(name: str, shape) -> np.ndarray:
  """The value of a variable, the same in both runs (seeded by its name)."""
  seed = zlib.crc32(name.encode())
  local = name.split("/")[-1]
  if local in GRID:
    top, denominator = GRID[local]
    return np.random.RandomState(seed).randint(
        -top, top + 1, shape).astype(np.float32) / denominator
  return _generic(seed, shape)


def _function(kinds):
  functions = [FUNCTIONS[k]() for k in kinds]
  return mixture.compose(functions)


def synthesized_logits(kinds, activation_dtype: tf.DType,
                       packed: bool) -> np.ndarray:
  """Builds and runs the logits of `kinds` with the given activation dtype.

  Args:
    kinds: names in FUNCTIONS; several make a Mixture with learned weights.
    activation_dtype: tf.bfloat16 or tf.float32.
    packed: give explicit per-example query and memory positions.

  Returns:
    The logits, float32 [batch, heads, length, memory_length] (a dim of size
    one where the logits do not carry it).
  """
  x = np.random.RandomState(0).randint(-1, 2, (BATCH, LENGTH, D_MODEL))
  queries = _generic(1, (BATCH, LENGTH, HEADS, DK))
  keys = _generic(2, (BATCH, LENGTH, HEADS, DK))
  positions = np.array([[0, 1, 2, 3, 0, 1], [0, 1, 2, 0, 1, 2]], np.int32)
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    batch = mtf.Dimension("batch", BATCH)
    length = mtf.Dimension("length", LENGTH)
    memory_length = mtf.Dimension("memory_length", LENGTH)
    model = mtf.Dimension("d_model", D_MODEL)
    heads = mtf.Dimension("heads", HEADS)
    key_dim = mtf.Dimension("d_k", DK)

    def constant(value, dims, dtype=activation_dtype):
      return mtf.import_tf_tensor(mesh, tf.constant(value, dtype), dims)

    query_positions = memory_positions = None
    if packed:
      query_positions = constant(positions, [batch, length], tf.int32)
      memory_positions = constant(positions, [batch, memory_length],
                                  tf.int32)
    inputs = interface.SynthesisInputs(
        x=constant(x, [batch, length, model]),
        model_dim=model,
        heads_dims=[heads],
        length_dim=length,
        memory_length_dim=memory_length,
        query_positions=query_positions,
        memory_positions=memory_positions,
        max_length=MAX_LEN,
        key_dim=key_dim,
        variable_dtype=mtf.VariableDType(
            master_dtype=tf.float32, slice_dtype=tf.float32,
            activation_dtype=activation_dtype),
        queries=constant(queries, [batch, length, heads, key_dim]),
        keys=constant(keys, [batch, memory_length, heads, key_dim]))
    logits = _function(kinds)(inputs)
    assert logits.dtype == tf.float32, logits.dtype
    order = [batch, heads, length, memory_length]
    missing = [d for d in order if d not in logits.shape.dims]
    logits = mtf.transpose(
        logits, [d for d in order if d in logits.shape.dims])
    lowering = lowering_lib.lower(graph, mesh)
    output = lowering.export_to_tf_tensor(logits)
    with tf.Session(graph=tf_graph) as sess:
      sess.run(tf.global_variables_initializer())
      for variable in graph.all_variables:
        variable.get_master().load(
            _variable_value(variable.name,
                            variable.outputs[0].shape.to_integer_list),
            sess)
      sess.run(lowering.copy_masters_to_slices())
      value = sess.run(output)
  for d in missing:
    value = np.expand_dims(value, order.index(d))
  assert value.dtype == np.float32
  return value


def _logits_are_a_variable(kinds) -> bool:
  """One input-independent function whose only variable (Table 1) is its
  [heads, N, N] logits table."""
  if len(kinds) != 1 or kinds[0] not in synthesizers.BY_NAME:
    return False
  shapes = list(ref.variable_shapes(kinds[0], d_model=5, num_heads=3, d_kv=2,
                                    max_length=7).values())
  return (synthesizers.BY_NAME[kinds[0]].input_independent
          and shapes == [[3, 7, 7]])


@pytest.mark.parametrize(
    "kinds,packed", CASES,
    ids=["+".join(k) + ("-packed" if p else "") for k, p in CASES])
def test_logits_are_float32_under_bfloat16_activations(kinds, packed):
  expected = synthesized_logits(kinds, tf.float32, packed)
  actual = synthesized_logits(kinds, tf.bfloat16, packed)
  # The check is meaningful: rounding the logits to bfloat16 (what a
  # product in bfloat16 does) would fail it -- except for a function alone
  # whose logits are its one (bfloat16-exact) variable, as R's and Fix's.
  if not _logits_are_a_variable(kinds):
    rounding = np.abs(_bf16(expected) - expected)
    assert np.max(rounding - (ATOL + RTOL * np.abs(expected))) > 0
  np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def test_first_layers_are_exact_in_bfloat16():
  """The premise above: W1 X + b1, A and B are exact in bfloat16.

  A sum of multiples of a power of two 2^-e whose partial sums stay within
  256 * 2^-e is exact in bfloat16 (8 significant bits), whatever the order.
  """
  def units(terms, bias, step):
    return (terms + bias) / step

  w1_top, w1_den = GRID["w1"]
  b1_top, b1_den = GRID["b1"]
  hidden_step = 1.0 / np.lcm(w1_den, b1_den)  # X is integer
  hidden_terms = D_MODEL * w1_top / w1_den    # |x| <= 1
  hidden_bound = hidden_terms + b1_top / b1_den
  assert units(hidden_terms, b1_top / b1_den, hidden_step) <= 256
  for weight, bias in (("wa", "ba"), ("wb", "bb")):
    w_top, w_den = GRID[weight]
    b_top, b_den = GRID[bias]
    step = 1.0 / np.lcm(int(round(w_den / hidden_step)), b_den)
    terms = DK * hidden_bound * w_top / w_den  # hidden size = d_kv
    assert units(terms, b_top / b_den, step) <= 256, weight
