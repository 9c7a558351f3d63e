# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Models and measurements of the speed and memory benchmark.

`tools/benchmark.py` runs them (with `benchmark_report`).

Every model is a mesh-tensorflow Transformer (a decoder-only LM, or a T5-style
encoder-decoder) whose self-attention layers are one attention variant. Each
model gets its own tf.Graph and tf.Session, built once; the timing loop then
alternates between the models (rounds x models x K steps), so that all models
see the same machine load and ratios to the reference (mesh's SelfAttention,
`REFERENCE`) can be taken within one round.

What is timed, per model: the training step (forward + backward + Adafactor
update: mesh's, or the same update with fewer temporaries, `OPTIMIZERS`),
one `session.run` of the grouped update ops per step; and incremental
decoding per token (greedy `sample_autoregressive`, timed as the difference
between two decodes of the same prompt that stop after `short` and `long`
steps, so that the full-length "first_part" pass and the session overhead
cancel). A model also states its parameters (the sizes of the graph's
trainable variables) and its step's matmul FLOPs (`benchmark_trace`, which
also reads a traced step's time and memory by op); `benchmark_memory`
estimates its memory before it is built.
"""

import dataclasses
import time
from typing import List, Optional, Type

import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers
import numpy as np
import tensorflow.compat.v1 as tf

from mtf_synthesizer import attentions
from mtf_synthesizer.core import layer as layer_lib
from mtf_synthesizer.core import reference as ref
from mtf_synthesizer.training import optimize
from workbench import benchmark_trace
from workbench import tiny_model

ModelShape = tiny_model.ModelShape


@dataclasses.dataclass(frozen=True)
class Candidate:
  """One attention under test: a row of the table, a release mode or ours.

  Attributes:
    name: the short name used in tables ("V (mesh)", "R+V", "release:random",
      "LightConv", ...).
    family: "mesh" (mesh's own SelfAttention), "ours" (SynthesizerAttention),
      "release" (mesh's transformer_layers.Synthesizer) or "baseline" (a row
      of `mtf_synthesizer.attentions`).
    make_layer: builds the self-attention layer of a single stack (LM or
      encoder-only model), and of an encoder-decoder's stacks unless
      overridden below.
    mode: for the release's layer and our equivalent, the synthesize_mode.
    make_encoder_layer: an encoder-decoder's encoder self-attention (None:
      make_layer).
    mesh_decoder: an encoder-decoder's decoder keeps mesh's
      SelfAttention (False: make_layer).
    causal: the layer can serve a causal stack (a decoder-only LM). False
      (Linformer): the runner does not build it in one, and says why.
    live_logits: how many [batch, heads, length, memory] float32 tensors
      per attention layer `estimate_memory` counts as live at the training
      step's peak (0: the layer has none).
    memory_length: the memory axis of those tensors (None: the length).
    position_tables: [heads, N, N] variables per attention layer (R's).
  """
  name: str
  family: str
  make_layer: tiny_model.LayerFactory
  mode: Optional[str] = None
  make_encoder_layer: Optional[tiny_model.LayerFactory] = None
  mesh_decoder: bool = False
  causal: bool = True
  live_logits: float = 4.0
  memory_length: Optional[int] = None
  position_tables: int = 0


def _ours_mode(mode: str) -> tiny_model.LayerFactory:
  def make(max_length: int, shape: ModelShape):
    return layer_lib.SynthesizerAttention(
        synthesize_mode=mode, max_length=max_length,
        num_heads=shape.num_heads, key_value_size=shape.d_kv)
  return make


def _release(mode: str) -> tiny_model.LayerFactory:
  def make(max_length: int, shape: ModelShape):
    # The release reads max_length from attention_kwargs (default 512); its
    # plus modes and `factorized` ignore it and use 512.
    return transformer_layers.Synthesizer(
        synthesize_mode=mode, num_heads=shape.num_heads,
        key_value_size=shape.d_kv,
        attention_kwargs={"max_length": max_length})
  return make


# Live [batch, heads, length, memory] float32 tensors per attention layer at
# a training step's peak, for `estimate_memory`: upper bounds of the step
# peaks measured at 4096 x 1 (V 3.8, our layer 1.0-2.8 with FD below V, the
# release's layer 3.6-3.8 logits-sized tensors per layer, including the
# small tensors).
LIVE_LOGITS_MESH = 4.0
LIVE_LOGITS_OURS = 3.0
# The baselines' memory, by their layer class (`Attention.layer`): the
# convolutions have no logits; Linformer's memory axis is its k.
_BASELINE_MEMORY = {
    "DecodableLocalConvAttnBlock": dict(live_logits=0.0),
    "WindowedSelfAttention": {},
    "LinformerAttention": dict(memory_length=tiny_model.LINFORMER_K),
}


# The release's synthesize modes, each benchmarked beside our layer in the
# same mode. `factorized` is degenerate (one attention row for every query).
RELEASE_MODES = ("random", "dense_minus", "random_plus", "random_plus_alpha",
                 "dense_plus", "dense_plus_alpha", "factorized")
# Mesh's own SelfAttention (attentions.MESH_SELF_ATTENTION): the reference.
REFERENCE = attentions.MESH_SELF_ATTENTION.label  # "V (mesh)"
# The training step's optimizer, by the name the tool's --optimizer takes:
# mesh's Adafactor (the stock CLI's default) or the same update with fewer
# full-size temporaries (mtf_synthesizer/training/optimize.py).
OPTIMIZERS = {"mesh": mtf.optimize.AdafactorOptimizer,
              "lean": optimize.LeanAdafactorOptimizer}
DEFAULT_OPTIMIZER = "lean"
# Our modes that are the same composition as a variant of the table are not
# built twice: `random` is R, and `random_plus_alpha` is R+V (the same two
# terms with learned weights, in the other order).
ALIASES = {"ours:random": "R", "ours:random_plus_alpha": "R+V"}
# The release's `factorized` mode is degenerate (see docs): left out of runs.
SKIPPED = ("ours:factorized", "release:factorized")
# The release's modes timed in the length sweep, beside every table variant.
SWEEP_RELEASE_MODES = ("random", "dense_minus", "random_plus_alpha",
                       "dense_plus_alpha")


def table_name(variant: attentions.Attention) -> str:
  """The benchmark's name of a row of the attention table: its label.

  Args:
    variant: a row of `attentions.ATTENTIONS`.

  Returns:
    E.g. "V (mesh)" for mesh's SelfAttention (the reference), "V" for the
    dot product inside SynthesizerAttention, "R+V".
  """
  return variant.label


def table_names() -> List[str]:
  """Mesh's attention, then every row of the variant table."""
  return [table_name(v) for v in
          (attentions.MESH_SELF_ATTENTION,) + tuple(attentions.VARIANTS)]


def _table_variant(variant: attentions.Attention, fr_rank: int) -> Candidate:
  if not variant.components:
    return Candidate(table_name(variant), "mesh",
                   tiny_model.attention_layer(variant, fr_rank),
                   live_logits=LIVE_LOGITS_MESH)
  return Candidate(
      table_name(variant), "ours", tiny_model.attention_layer(
          variant, fr_rank),
      live_logits=LIVE_LOGITS_OURS,
      position_tables=sum(_position_tables(c) for c in variant.components))


def _position_tables(function: str) -> int:
  """How many [heads, N, N] variables a function holds (Table 1)."""
  heads, n = 3, 7
  shapes = ref.variable_shapes(function, d_model=5, num_heads=heads, d_kv=2,
                               max_length=n)
  return sum(shape == [heads, n, n] for shape in shapes.values())


def baseline_variants() -> List[Candidate]:
  """The baselines of `attentions.BASELINES`, as their gin files bind them.

  Labels are the table's (LightConv, DyConv, Local, Linformer). The
  convolutions' kernel (width 7) is causal in an autoregressive stack (LM,
  decoder) and centred in any other (encoder, encoder-only model); Local is
  a window of radius 128 on full attention; Linformer (k = 32) is not
  causal: in an encoder-decoder it replaces the encoder's self-attention
  only (the decoder keeps mesh's), and it is not built in a decoder-only LM.

  Returns:
    One Candidate per baseline, in the table's order.
  """
  out = []
  for baseline in attentions.BASELINES:
    if baseline.layer not in _BASELINE_MEMORY:
      raise ValueError("No memory model of %s's layer %r: add it to "
                       "_BASELINE_MEMORY." % (baseline.name, baseline.layer))
    out.append(Candidate(
        baseline.label, "baseline", tiny_model.baseline_layer(baseline.name),
        causal=baseline.causal, mesh_decoder=not baseline.causal,
        **_BASELINE_MEMORY[baseline.layer]))
  return out


def all_variants(fr_rank: int = 8) -> List[Candidate]:
  """Returns every variant: mesh's, the table's, the release's, baselines.

  Args:
    fr_rank: k of Factorized Random (the paper's default is 8).

  Returns:
    Variants; the first is mesh's SelfAttention (the reference).
  """
  out = [_table_variant(v, fr_rank)
         for v in (attentions.MESH_SELF_ATTENTION,) + attentions.VARIANTS]
  for mode in RELEASE_MODES:
    out.append(Candidate("ours:" + mode, "ours", _ours_mode(mode), mode,
                       live_logits=LIVE_LOGITS_OURS,
                       position_tables=int("random" in mode)))
    # The release's plus modes size R for 512 positions whatever the length.
    out.append(Candidate("release:" + mode, "release", _release(mode), mode,
                       live_logits=LIVE_LOGITS_MESH,
                       position_tables=int(mode == "random")))
  return out + baseline_variants()


def baseline_names() -> List[str]:
  """The baselines' labels, in the table's order."""
  return [b.label for b in attentions.BASELINES]


@dataclasses.dataclass(frozen=True)
class RunShape:
  """The data shape of one benchmark point.

  Attributes:
    length: tokens per sequence (decoder; and encoder for enc-dec).
    batch: sequences per step.
    target_length: decoder length of an encoder-decoder (None: = length).
  """
  length: int
  batch: int
  target_length: Optional[int] = None

  @property
  def tokens(self) -> int:
    return self.batch * (self.target_length or self.length)

  @property
  def label(self) -> str:
    if self.target_length:
      return "%dx%d->%d" % (self.length, self.batch, self.target_length)
    return "%dx%d" % (self.length, self.batch)


def build_transformer(variant: Candidate, shape: ModelShape, run: RunShape):
  """Returns a mesh Unitransformer (LM, encoder-only) or Bitransformer."""
  return tiny_model.build_transformer(
      variant.make_layer, shape, max(run.length, run.target_length or 0),
      make_encoder_attention=variant.make_encoder_layer,
      make_decoder_attention=(
          tiny_model.attention_layer(attentions.MESH_SELF_ATTENTION)
          if variant.mesh_decoder else None))


def is_causal_lm(shape: ModelShape) -> bool:
  """Whether the model is a decoder-only LM (a single causal stack)."""
  return not shape.encoder_layers and shape.causal


def not_causal_reason(variant: Candidate, shape: ModelShape) -> Optional[str]:
  """Why the variant is not built in this model, or None.

  Args:
    variant: the attention variant.
    shape: the model.

  Returns:
    A sentence for the report when the model is a decoder-only LM and the
    variant cannot be causal; else None.
  """
  if variant.causal or not is_causal_lm(shape):
    return None
  return ("not causal: its length projection mixes future positions into "
          "every key, so it cannot serve a decoder-only LM or decode; timed "
          "in the encoder-only and encoder-decoder (encoder) blocks")


@dataclasses.dataclass
class BuiltModel:
  """A model's graph and session, ready to be timed."""
  variant: Candidate
  session: tf.Session
  train_op: tf.Operation
  decode_op: Optional[tf.Tensor]
  max_steps: Optional[tf.Tensor]
  num_params: int
  flops: int
  state_bytes: int

  def train(self, steps: int) -> float:
    """Runs `steps` training steps; returns seconds per step."""
    start = time.perf_counter()
    for _ in range(steps):
      self.session.run(self.train_op)
    return (time.perf_counter() - start) / steps

  def decode(self, steps: int) -> float:
    """Runs the greedy decode that stops after `steps` tokens; seconds."""
    start = time.perf_counter()
    self.session.run(self.decode_op, {self.max_steps: steps})
    return time.perf_counter() - start

  def trace_train(self) -> tf.RunMetadata:
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    metadata = tf.RunMetadata()
    self.session.run(self.train_op, options=options, run_metadata=metadata)
    return metadata

  def close(self):
    self.session.close()


def build_model(variant: Candidate, shape: ModelShape, run: RunShape, *,
                decode: bool = False, threads: int = 2,
                seed: int = 0,
                optimizer: Type[mtf.optimize.Optimizer] = (
                    optimize.LeanAdafactorOptimizer)) -> BuiltModel:
  """Builds the training step (and decodes) of one model in its own graph.

  Args:
    variant: the attention variant of every self-attention layer.
    shape: the Transformer's sizes.
    run: the data shape.
    decode: also build greedy incremental decoding (decoder-only LM only).
    threads: intra- and inter-op threads of the session.
    seed: graph-level random seed.
    optimizer: the optimizer class, built with its defaults.

  Returns:
    A BuiltModel; raises whatever the layer raises if it cannot be built.
  """
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.set_random_seed(seed)
    tf.train.get_or_create_global_step()
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    batch_dim = mtf.Dimension("batch", run.batch)
    length_dim = mtf.Dimension("length", run.length)
    rng = np.random.RandomState(seed)
    model = build_transformer(variant, shape, run)

    def tokens(length_dim_, low=2):
      ids = rng.randint(low, shape.vocab,
                        size=(run.batch, length_dim_.size)).astype(np.int32)
      return mtf.import_tf_tensor(mesh, tf.constant(ids),
                                  [batch_dim, length_dim_])

    with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
      if shape.encoder_layers:
        target_dim = mtf.Dimension("length", run.target_length or run.length)
        targets = tokens(target_dim)
        _, loss = model.call_simple(
            inputs=tokens(length_dim), targets=targets, compute_loss=True,
            mode=tf.estimator.ModeKeys.TRAIN)
      elif not shape.causal:
        # Encoder-only: the loss at every position, on a target token of
        # its own.
        _, loss = model.call_simple(
            inputs=tokens(length_dim), targets=tokens(length_dim),
            compute_loss=True, mode=tf.estimator.ModeKeys.TRAIN)
      else:
        targets = tokens(length_dim)
        _, loss = model.call_simple(
            inputs=transformer.autoregressive_inputs(targets),
            targets=targets, compute_loss=True,
            mode=tf.estimator.ModeKeys.TRAIN)
      decoded = None
      max_steps = None
      if decode and is_causal_lm(shape):
        prompt_len = 8
        prompt = np.zeros((run.batch, run.length), np.int32)
        prompt[:, :prompt_len] = rng.randint(2, shape.vocab,
                                             (run.batch, prompt_len))
        prompt_t = mtf.import_tf_tensor(mesh, tf.constant(prompt),
                                        [batch_dim, length_dim])
        # One decoding graph; how many tokens it decodes is fed at run time.
        max_steps = tf.placeholder(tf.int32, [], name="max_steps")
        decoded = model.sample_autoregressive(
            prompt_t, stop_at_token=shape.vocab + 1,  # never produced
            max_steps=mtf.import_tf_tensor(mesh, max_steps, mtf.Shape([])),
            temperature=0.0, never_end=True)
    variables = graph.trainable_variables
    grads = mtf.gradients([loss], [v.outputs[0] for v in variables])
    update_ops = optimizer().apply_grads(grads, variables)
    lowering = tiny_model.lower(graph, mesh,
                                tiny_model.placement_mesh_impl(),
                                autostack=True)
    train_op = tf.group([lowering.lowered_operation(op) for op in update_ops]
                        + [lowering.export_to_tf_tensor(loss).op])
    decode_op = (lowering.export_to_tf_tensor(decoded)
                 if decoded is not None else None)
    num_params = sum(v.shape.size for v in variables)
    flops = benchmark_trace.step_flops(train_op)
    # Variables and optimizer slots, alive between steps.
    state_bytes = sum(v.shape.num_elements() * v.dtype.base_dtype.size
                      for v in tf.global_variables())
    init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
    session = tf.Session(graph=tf_graph,
                         config=benchmark_trace.session_config(threads))
    session.run(init)
    session.run(lowering.copy_masters_to_slices())
    tf_graph.finalize()
  return BuiltModel(variant=variant, session=session, train_op=train_op,
                    decode_op=decode_op, max_steps=max_steps,
                    num_params=num_params, flops=flops,
                    state_bytes=state_bytes)
