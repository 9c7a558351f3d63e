# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Runs a small decoder three ways: full pass, greedy decoding, and both.

For a layer that claims to decode: builds a language model (a mesh
Unitransformer) or a gin-configured encoder-decoder, gives every variable
random values (biases too, as after training) and returns, as NumPy:

  * the full pass on targets A and on targets B, which equal A before
    position `SPLIT` (causality: the logits up to and including SPLIT,
    which read targets before it, must agree);
  * for the language model, the logits of step-by-step decoding fed targets
    A (teacher forcing), from an empty prefix and after a prefix of PREFIX
    tokens: they must be the full pass's logits. This is the sharp check:
    greedy decodes of random weights tend to repeat one token, whatever the
    logits' small differences;
  * for the encoder-decoder, a greedy decode through mesh's own decoding
    loop (`Bitransformer.decode`), with the full pass over it: its argmax
    must be the decode itself.
"""

import dataclasses
from typing import Callable, Dict, Optional, Sequence

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import utils as mtf_utils
import numpy as np
import tensorflow.compat.v1 as tf

import lowering as lowering_lib

BATCH, LENGTH, VOCAB, D_MODEL = 2, 8, 40, 16
SPLIT, PREFIX = 3, 3
_EVAL = tf.estimator.ModeKeys.EVAL


@dataclasses.dataclass
class DecodeRun:
  """The results, as NumPy arrays ([batch, length(, vocab)])."""
  logits_a: np.ndarray
  logits_b: np.ndarray
  # Encoder-decoder only: a greedy decode (mesh's decoding loop) and the
  # full pass over it.
  decoded: Optional[np.ndarray] = None
  logits_decoded: Optional[np.ndarray] = None
  # Language model only: prefix length -> the logits of step-by-step
  # decoding fed targets A after their first `prefix length` tokens, for
  # the positions from there on ([batch, length - prefix length, vocab]).
  stepped: Optional[Dict[int, np.ndarray]] = None


def _tokens(seed: int):
  """Encoder inputs (row 0 padded), targets A and B."""
  rng = np.random.RandomState(seed)
  inputs = rng.randint(2, VOCAB, size=(BATCH, LENGTH)).astype(np.int32)
  inputs[0, LENGTH - 3:] = 0
  targets_a = rng.randint(2, VOCAB, size=(BATCH, LENGTH)).astype(np.int32)
  targets_b = targets_a.copy()
  targets_b[:, SPLIT:] = rng.randint(2, VOCAB, size=(BATCH, LENGTH - SPLIT))
  return inputs, targets_a, targets_b


def _run(build: Callable[[Callable[[np.ndarray], mtf.Tensor]],
                         Dict[str, mtf.Tensor]],
         seed: int) -> Dict[str, np.ndarray]:
  """Builds the graph with `build(import_tokens)` and runs its outputs.

  Args:
    build: returns {name: mtf Tensor}; `import_tokens` turns a [batch,
      length] int32 array into an mtf Tensor.
    seed: the seed of the variables' random values.

  Returns:
    {name: value}.
  """
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.set_random_seed(0)
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    shape = [mtf.Dimension("batch", BATCH), mtf.Dimension("length", LENGTH)]

    def import_tokens(a):
      return mtf.import_tf_tensor(mesh, tf.constant(a, tf.int32), shape)

    with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
      outputs = build(import_tokens)
    lowering = lowering_lib.lower(graph, mesh)
    fetch = {k: lowering.export_to_tf_tensor(t) for k, t in outputs.items()}
    with tf.Session(graph=tf_graph,
                    config=lowering_lib.session_config()) as sess:
      sess.run(tf.global_variables_initializer())
      values = np.random.RandomState(seed)
      for v in graph.trainable_variables:
        v.get_master().load((values.randn(
            *v.shape.to_integer_list) * 0.5).astype(np.float32), sess)
      sess.run(lowering.copy_masters_to_slices())
      return sess.run(fetch)


def _stepped_logits(model: transformer.Unitransformer, targets: mtf.Tensor,
                    prefix_length: int) -> Dict[str, mtf.Tensor]:
  """The logits of step-by-step decoding, fed `targets` (teacher forcing).

  Drives the model's layers as `Unitransformer.sample_autoregressive` does:
  a "first_part" pass over the first `prefix_length` targets (the partial
  sequences), then one "incremental" step per later position, whose input
  is the previous target.

  Args:
    model: the language model (variables already built).
    targets: [batch, length] int32.
    prefix_length: the length of the partial sequences (0: none).

  Returns:
    {"step_<position>": [batch, vocab] logits} for the decoded positions.
  """
  # pylint: disable=protected-access
  mesh = targets.mesh
  batch_dims, length_dim = targets.shape.dims[:-1], targets.shape.dims[-1]
  positions = mtf.range(mesh, length_dim, tf.int32)
  partial = targets * mtf.to_int32(mtf.less(positions, prefix_length))
  common = dict(model=model, mesh=mesh, batch_dims=batch_dims,
                length_dim=length_dim,
                variable_dtype=mtf.VariableDType(tf.float32),
                write_priority=positions)
  first = transformer.Context(
      mode="first_part", position=positions, position_is_default=True,
      new_states=[], constant_states=[], read_priority=positions,
      initial_position=mtf.reduce_sum(
          mtf.to_int32(mtf.not_equal(partial, 0)), reduced_dim=length_dim),
      inputs=partial, **common)
  with tf.variable_scope(model.name, reuse=True):
    model._call_internal(first, transformer.autoregressive_inputs(partial))
  states = first.new_states
  inputs = transformer.autoregressive_inputs(targets)
  out = {}
  for t in range(prefix_length, LENGTH):
    position = mtf.constant(mesh, t, dtype=tf.int32)
    step_inputs = mtf.gather(inputs, position, length_dim)
    step = transformer.Context(
        mode="incremental", position=position, states=states, new_states=[],
        constant_states=first.constant_states, read_priority=position,
        inputs=step_inputs, **common)
    with tf.variable_scope(model.name, reuse=True):
      out["step_%d" % t] = model._call_internal(step, step_inputs)
    states = step.new_states
  return out


def run_language_model(layers: Sequence[transformer.TransformerLayer],
                       num_layers: int = 2, seed: int = 3) -> DecodeRun:
  """A causal language model whose blocks are `layers`, run three ways.

  Args:
    layers: the layers of one block (e.g. [attention, DenseReluDense]).
    num_layers: how many times the block is repeated (same layer objects,
      separate variables).
    seed: the seed of the tokens and of the variables' values.

  Returns:
    A DecodeRun, with the teacher-forced step-by-step logits.
  """
  _, targets_a, targets_b = _tokens(seed)

  def build(imp):
    model = transformer.Unitransformer(
        layer_stack=transformer.LayerStack(
            list(layers) * num_layers,
            sublayers_initial=[],
            sublayers_per_layer=[transformer.sublayer_rms_norm,
                                 transformer.sublayer_call_layer,
                                 transformer.sublayer_residual],
            sublayers_final=[transformer.sublayer_rms_norm]),
        d_model=D_MODEL, input_vocab_size=VOCAB, output_vocab_size=VOCAB,
        autoregressive=True, max_length=LENGTH, vocab_divisor=1)

    def full_pass(targets):
      return model.call_simple(
          transformer.autoregressive_inputs(targets), targets, False,
          mode=_EVAL)[0]

    out = {"logits_a": full_pass(imp(targets_a)),
           "logits_b": full_pass(imp(targets_b))}
    for prefix_length in (0, PREFIX):
      for k, v in _stepped_logits(model, imp(targets_a),
                                  prefix_length).items():
        out["%d/%s" % (prefix_length, k)] = v
    return out

  values = _run(build, seed)
  stepped = {}
  for prefix_length in (0, PREFIX):
    stepped[prefix_length] = np.stack(
        [values.pop("%d/step_%d" % (prefix_length, t))
         for t in range(prefix_length, LENGTH)], axis=1)
  return DecodeRun(stepped=stepped, **values)


def run_bitransformer(gin_files: Sequence[str],
                      gin_params: Sequence[str] = (),
                      seed: int = 3) -> DecodeRun:
  """The encoder-decoder the gin files configure, run three ways.

  Gin is cleared before and after. The files are parsed with every
  position decoded (no stop at EOS); the vocabulary is VOCAB tokens.

  Args:
    gin_files: e.g. ["defaults.gin", "models/t5.1.1.tiny.gin", <baseline>].
    gin_params: bindings after the files.
    seed: the seed of the tokens and of the variables' values.

  Returns:
    A DecodeRun, without teacher-forced steps.
  """
  inputs, targets_a, targets_b = _tokens(seed)
  gin.clear_config()
  gin.parse_config_files_and_bindings(
      list(gin_files),
      ["Unitransformer.sample_autoregressive.never_end = True"] +
      list(gin_params))

  def build(imp):
    model = transformer.make_bitransformer(
        input_vocab_size=VOCAB, output_vocab_size=VOCAB)

    def full_pass(targets):
      return model.call_simple(imp(inputs), targets, False, mode=_EVAL)[0]

    decoded = model.decode(imp(inputs), temperature=0.0)
    return {"logits_a": full_pass(imp(targets_a)),
            "logits_b": full_pass(imp(targets_b)),
            "decoded": decoded, "logits_decoded": full_pass(decoded)}

  try:
    return DecodeRun(**_run(build, seed))
  finally:
    gin.clear_config()


def run_aligned_model(gin_files: Sequence[str],
                      gin_params: Sequence[str] = (),
                      seed: int = 3) -> Dict[int, np.ndarray]:
  """mesh's encoder-only model ('aligned') the gin files configure.

  Built as the stock CLI builds it (`utils.build_model`), with the model
  type the files bind (`utils.run.model_type`). Gin is cleared before and
  after.

  Args:
    gin_files: e.g. [..., "experiments/_encoder_classifier.gin", <layer>].
    gin_params: bindings after the files.
    seed: the seed of the tokens and of the variables' values.

  Returns:
    {-1: the logits of inputs A, p: the logits of inputs A with the token at
    position p changed, for every p}; each [batch, length, vocab].
  """
  inputs, _, _ = _tokens(seed)
  inputs[0, LENGTH - 3:] = inputs[1, LENGTH - 3:]  # no padding
  changed = {-1: inputs}
  for p in range(LENGTH):
    changed[p] = inputs.copy()
    changed[p][:, p] = 2 + (inputs[:, p] - 1) % (VOCAB - 2)  # another id
  gin.clear_config()
  gin.parse_config_files_and_bindings(list(gin_files), list(gin_params))

  def build(imp):
    model = mtf_utils.build_model(
        model_type=gin.query_parameter("utils.run.model_type"),
        input_vocab_size=VOCAB, output_vocab_size=VOCAB,
        layout_rules=mtf.convert_to_layout_rules(""),
        mesh_shape=mtf.convert_to_shape(""))
    return {str(p): model.call_simple(imp(x), imp(x), False, mode=_EVAL)[0]
            for p, x in changed.items()}

  try:
    return {int(p): v for p, v in _run(build, seed).items()}
  finally:
    gin.clear_config()


def check_causal(run: DecodeRun) -> None:
  """Asserts the logits read only earlier targets (and do read them)."""
  np.testing.assert_allclose(run.logits_a[:, :SPLIT + 1],
                             run.logits_b[:, :SPLIT + 1], rtol=1e-5,
                             atol=1e-5)
  for i in range(SPLIT + 1, LENGTH):  # each later position sees the change
    assert not np.allclose(run.logits_a[:, i], run.logits_b[:, i],
                           atol=1e-3), i


def check_decodes_are_the_full_pass(run: DecodeRun) -> None:
  """Asserts step-by-step decoding computes what the full pass computes.

  The teacher-forced steps' logits must be the full pass's logits on
  targets A; a greedy decode must be the argmax of the full pass over it
  (EOS, which the decode may not choose, left out).
  """
  if run.decoded is not None:
    logits = run.logits_decoded.copy()
    logits[..., 1] = -np.inf  # never_end: the decode never picks EOS (id 1)
    np.testing.assert_array_equal(np.argmax(logits, -1), run.decoded)
  for prefix_length, stepped in (run.stepped or {}).items():
    np.testing.assert_allclose(
        stepped, run.logits_a[:, prefix_length:], rtol=1e-4, atol=1e-4,
        err_msg="after a prefix of %d" % prefix_length)
