# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What a Cloud TPU compiles, compiled whole by XLA on the CPU.

For every variant and baseline of the table, in an encoder-decoder and in a
decoder-only language model (Linformer in the encoder only: it is not
causal), the TPU programs of a tiny model (`xla_harness`: a one-core TPU
mesh, `SimdMeshImpl`) are built twice, as a plain TF graph and wrapped whole
in `xla.compile`, and run once each from the same variable values:

  * the training step: forward pass, gradients and mesh's Adafactor update;
  * the decoding that T5's eval runs: greedy and beam search (a
    `Bitransformer`'s `decode`; a language model's `sample_autoregressive`
    and `beam_search`);

with float32 activations and with bfloat16 activations (float32 variables,
`activation_dtype` as T5's TPU configurations set it). XLA must compile
every op (xla.compile does not fall back to TF's kernels), the compiled
loss and decodes must equal the plain graph's, and the compiled program
must hold no float64 tensor (a TPU has none) and no summary op (a TPU
cannot run one; summaries leave through the host call, test_tpu_summaries).

The controls: a copy of a synthesizing function (R) whose logits pass
through a `tf.py_function` (no XLA kernel) or through a tensor whose shape
is known only at run time runs in the plain graph and makes the compiled
one fail, with an error that names the op. `tf.unique`, whose output size
depends on the values too, compiles: XLA's kernel bounds it by its input's
size (TPUs pad such shapes to the bound), so it is no such control.

XLA's CPU backend compiles at optimization level 0 here
(`--xla_backend_optimization_level=0`): the LLVM code generation is faster
and what is compiled, and which op XLA rejects, stays the same.
"""

import os
from typing import Iterator

import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import xla_harness
from mtf_synthesizer import attentions
from mtf_synthesizer.core import layer as layer_lib
from mtf_synthesizer.core import synthesizers

# Builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

ROWS = attentions.VARIANTS + attentions.BASELINES
CASES = [(row.name, architecture) for row in ROWS
         for architecture in xla_harness.ARCHITECTURES
         if xla_harness.valid(row, architecture)]
# bfloat16 has 8 bits of mantissa: its rounding, where XLA fuses ops and
# keeps intermediate results in float32, moves the loss by a few of them.
LOSS_RTOL = {tf.float32: 1e-5, tf.bfloat16: 2e-2}


@pytest.fixture(scope="module", autouse=True)
def fast_xla_backend() -> Iterator[None]:
  """XLA's CPU code generation at optimization level 0 (see module doc)."""
  before = os.environ.get("XLA_FLAGS")
  os.environ["XLA_FLAGS"] = ("%s --xla_backend_optimization_level=0" % (
      before or "")).strip()
  yield
  if before is None:
    del os.environ["XLA_FLAGS"]
  else:
    os.environ["XLA_FLAGS"] = before


def test_every_attention_of_the_table_is_a_case():
  names = {name for name, _ in CASES}
  assert names == set(attentions.VARIANT_NAMES + attentions.BASELINE_NAMES)
  # Both architectures for every attention that can be causal.
  for row in ROWS:
    count = sum(1 for name, _ in CASES if name == row.name)
    assert count == (2 if row.causal else 1), row.name


@pytest.mark.parametrize("name,architecture", CASES)
def test_the_tpu_programs_compile_and_compute_the_plain_graphs_values(
    name, architecture):
  results = xla_harness.build_and_run(attentions.BY_NAME[name], architecture)
  for (what, dtype, compiled), result in results.items():
    label = "%s %s %s %s" % (name, architecture, what, dtype.name)
    if not compiled:
      assert not result.compiled_ops
      continue
    assert result.compiled_ops, "%s: nothing was compiled" % label
    assert not xla_harness.float64_and_summaries(result), (
        label, xla_harness.float64_and_summaries(result)[:5])
    plain = results.get((what, dtype, False))
    if plain is None:
      # The bfloat16 decodes: at bfloat16's resolution the tiny model's
      # logits tie often, and XLA keeps fused intermediate results in
      # float32, so the argmax may break ties another way than TF's
      # kernels. They must be token ids of the float32 decodes' shape.
      reference = results[(what, tf.float32, False)].outputs
      assert sorted(result.outputs) == sorted(reference), label
      for key, ids in result.outputs.items():
        assert ids.shape == reference[key].shape, (label, key)
        assert ids.min() >= 0 and ids.max() < xla_harness.padded_vocab(), (
            label, key, ids)
      continue
    assert sorted(result.outputs) == sorted(plain.outputs), label
    for key, value in plain.outputs.items():
      if key == "loss":
        assert np.isfinite(value), label
        np.testing.assert_allclose(result.outputs[key], value,
                                   rtol=LOSS_RTOL[dtype], err_msg=label)
      else:  # token ids
        np.testing.assert_array_equal(result.outputs[key], value,
                                      err_msg="%s %s" % (label, key))
        # Not all padding.
        assert np.count_nonzero(value), "%s %s" % (label, key)


class _WithTfOp(synthesizers.Random, register=False):
  """Bad on purpose: Random whose logits pass through a TF op.

  `tf_op` maps the logits' slice to a tensor; its sum, times zero, is
  added to the logits, so that the values do not change and the op stays
  in the program. Not registered in `synthesizers.BY_NAME`.
  """
  name = "random"
  tf_op = None

  def logits(self, inputs, scale=None):
    logits = super().logits(inputs, scale)

    def through(x):
      extra = tf.cast(tf.reduce_sum(type(self).tf_op(x)), x.dtype)
      return x + 0 * extra

    return mtf.slicewise(through, [logits], output_shape=logits.shape,
                         output_dtype=logits.dtype,
                         splittable_dims=logits.shape.dims,
                         grad_function=lambda op, dy: [dy],
                         name="through_tf_op")


def _py_function(x):
  """A Python function: no XLA kernel."""
  return tf.py_function(lambda t: t, [x], x.dtype)


def _run_time_shape(x):
  """Zeros whose number depends on the values: no static shape."""
  return tf.zeros(tf.cast(tf.reduce_sum(tf.abs(x)), tf.int32))


def _unique(x):
  """tf.unique: XLA's kernel bounds its output by the input's size."""
  return tf.unique(tf.reshape(x, [-1]))[0]


def _layer_through(tf_op):
  """The attention layers of a model whose R passes its logits to tf_op."""
  bad_random = type("BadRandom", (_WithTfOp,),
                    {"tf_op": staticmethod(tf_op)})

  def make_layer(max_length, shape):
    return layer_lib.SynthesizerAttention(
        synthesizers=[bad_random()], max_length=max_length,
        num_heads=shape.num_heads, key_value_size=shape.d_kv)

  return make_layer


def _program_through(tf_op, compiled: bool) -> xla_harness.Result:
  """The training step of an LM whose R passes its logits to tf_op, run."""
  key = ("train", tf.float32, compiled)
  return xla_harness.build_and_run(
      attentions.BY_NAME["random"], xla_harness.LANGUAGE_MODEL, keys=[key],
      make_layer=_layer_through(tf_op))[key]


@pytest.mark.parametrize("tf_op,message", [
    (_py_function, "No registered 'EagerPyFunc' OpKernel for XLA_CPU_JIT"),
    (_run_time_shape, "with op Fill must be a compile-time constant")])
def test_an_op_that_xla_cannot_compile_fails_the_compiled_program(
    tf_op, message):
  # The plain graph runs it.
  assert np.isfinite(_program_through(tf_op, False).outputs["loss"])
  # The compiled one fails, naming the op.
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    _program_through(tf_op, True)
  assert message in str(error.value), str(error.value)[:2000]


def test_float64_and_summaries_in_the_compiled_program_are_found():
  """The check of the compiled programs sees a float64 and a summary."""

  def float64_and_summary(x):
    # The summary op a placement mesh writes (training/summaries.py).
    tf.raw_ops.ScalarSummary(tags="inside", values=tf.reduce_sum(x))
    return tf.cast(x, tf.float64)

  with tf.Graph().as_default():  # built, not run
    program = xla_harness.build(
        attentions.BY_NAME["random"], xla_harness.LANGUAGE_MODEL, "train",
        tf.float32, True, make_layer=_layer_through(float64_and_summary))
  found = xla_harness.float64_and_summaries(xla_harness.Result(
      {}, program.compiled_ops, program.compiled_functions))
  assert any(f.endswith(": float64") for f in found), found
  assert any(f.endswith("(ScalarSummary): summary") for f in found), found


def test_tf_unique_is_compiled():
  """tf.unique has an XLA kernel (a shape bounded by its input's)."""
  result = _program_through(_unique, True)
  assert "Unique" in {op.type for op in result.compiled_ops}
  assert np.isfinite(result.outputs["loss"])
