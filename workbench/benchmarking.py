# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Models and measurements of the speed and memory benchmark.

`tools/benchmark.py` runs them (with `benchmark_report`).

Every model is a mesh-tensorflow Transformer (a decoder-only LM, or a T5-style
encoder-decoder) whose self-attention layers are one attention variant. Each
model gets its own tf.Graph and tf.Session, built once; the timing loop then
alternates between the models (rounds x models x K steps), so that all models
see the same machine load and ratios to the vanilla model can be taken within
one round.

What is measured, per model:
  * training step time: forward + backward + Adafactor update (mesh's, or
    the same update with fewer temporaries, `OPTIMIZERS`), one
    `session.run` of the grouped update ops per step;
  * incremental decoding time per token: greedy `sample_autoregressive`,
    timed as the difference between two decodes of the same prompt that stop
    after `short` and `long` steps (so the full-length "first_part" pass and
    the session overhead cancel);
  * peak memory of a training step: the largest sum of live tensor bytes
    allocated by the step, reconstructed from the step's `RunMetadata`
    (allocation and deallocation times of every tensor the step allocates;
    variables, which exist before the step, are not counted);
  * parameters: the sizes of the graph's trainable variables;
  * FLOPs: 2 * M * N * K of every Einsum / MatMul / BatchMatMul op that the
    training step executes in the lowered TF graph (forward, backward and the
    update), counted from their static shapes; element-wise ops (softmax,
    relu, the optimizer's arithmetic) are not counted.

Before a model is built, `estimate_memory` computes from the shapes alone
its largest tensor and an estimate of its memory (variables that grow with
the length, and the training step's peak); `memory_skip_reason` says why a
model would not fit a memory budget (`memory_budget_bytes`), so that the
runner skips it with that figure instead of running out of memory.
"""

import dataclasses
import os
import re
import time
from typing import Dict, List, Optional, Sequence, Tuple, Type

import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers
import numpy as np
import tensorflow.compat.v1 as tf

from mtf_synthesizer import attentions
from mtf_synthesizer import layer as layer_lib
from mtf_synthesizer import optimize
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
    vanilla_decoder: an encoder-decoder's decoder keeps mesh's
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
  vanilla_decoder: bool = False
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
_LIVE_LOGITS_MESH = 4.0
_LIVE_LOGITS_OURS = 3.0
_TABLE_COMPONENTS = ("random", "fixed_random")


# The release's synthesize modes, each benchmarked beside our layer in the
# same mode. `factorized` is degenerate (one attention row for every query).
RELEASE_MODES = ("random", "dense_minus", "random_plus", "random_plus_alpha",
                 "dense_plus", "dense_plus_alpha", "factorized")
# Mesh's own SelfAttention (attentions.MESH_SELF_ATTENTION): the reference.
VANILLA = attentions.MESH_SELF_ATTENTION.label  # the reference, "V (mesh)"
# The training step's optimizer, by the name the tool's --optimizer takes:
# mesh's Adafactor (the stock CLI's default) or the same update with fewer
# full-size temporaries (mtf_synthesizer/optimize.py).
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
                   live_logits=_LIVE_LOGITS_MESH)
  return Candidate(
      table_name(variant), "ours", tiny_model.attention_layer(
          variant, fr_rank),
      live_logits=_LIVE_LOGITS_OURS,
      position_tables=int(any(c in _TABLE_COMPONENTS
                              for c in variant.components)))


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
    layer = tiny_model.baseline_layer(baseline.name)
    kwargs = {}
    if baseline.name in ("lightweight_conv", "dynamic_conv"):
      kwargs = dict(live_logits=0.0)
    elif baseline.name == "linformer":
      kwargs = dict(vanilla_decoder=True,
                    memory_length=tiny_model.LINFORMER_K)
    out.append(Candidate(baseline.label, "baseline", layer,
                       causal=baseline.causal, **kwargs))
  return out


def all_variants(fr_rank: int = 8) -> List[Candidate]:
  """Returns every variant: vanilla, the table's, the release's, baselines.

  Args:
    fr_rank: k of Factorized Random (the paper's default is 8).

  Returns:
    Variants; the first is mesh's vanilla SelfAttention (the reference).
  """
  out = [_table_variant(v, fr_rank)
         for v in (attentions.MESH_SELF_ATTENTION,) + attentions.VARIANTS]
  for mode in RELEASE_MODES:
    out.append(Candidate("ours:" + mode, "ours", _ours_mode(mode), mode,
                       live_logits=_LIVE_LOGITS_OURS,
                       position_tables=int("random" in mode)))
    # The release's plus modes size R for 512 positions whatever the length.
    out.append(Candidate("release:" + mode, "release", _release(mode), mode,
                       live_logits=_LIVE_LOGITS_MESH,
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
          if variant.vanilla_decoder else None))


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


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
  """A model's memory, computed from its shapes before it is built.

  Attributes:
    largest: the largest tensor, e.g. "attention logits [batch 1, heads 8,
      8192, 8192] float32".
    largest_bytes: its size.
    state_bytes: the variables that grow with the length (R's tables), which
      stay allocated while the model is built.
    step_bytes: the training step's peak: the live logits-sized tensors of
      every attention layer (Candidate.live_logits) plus the per-token
      activations.
  """
  largest: str
  largest_bytes: int
  state_bytes: int
  step_bytes: int

  @property
  def total_bytes(self) -> int:
    """state_bytes + step_bytes: what the model needs while it steps."""
    return self.state_bytes + self.step_bytes


_FLOAT32 = 4


def _attention_stacks(variant: Candidate, shape: ModelShape, run: RunShape
                     ) -> List[Tuple[str, int, int, int, float, int]]:
  """(what, layers, queries, memory, live logits, tables) of each stack."""
  length = run.length
  target = run.target_length or run.length
  ours = ("attention logits", variant.memory_length, variant.live_logits,
          variant.position_tables)
  vanilla = ("attention logits", None, _LIVE_LOGITS_MESH, 0)

  def stack(kind, layers, queries, memory=None):
    what, own_memory, live, tables = kind
    return (what, layers, queries, memory or own_memory or queries, live,
            tables)

  if not shape.encoder_layers:
    return [stack(ours, shape.num_layers, length)]
  return [
      stack(ours, shape.encoder_layers, length),
      stack(vanilla if variant.vanilla_decoder else ours, shape.num_layers,
            target),
      stack(("encoder-decoder attention logits", None, _LIVE_LOGITS_MESH, 0),
            shape.num_layers, target, length)]


def estimate_memory(variant: Candidate, shape: ModelShape,
                    run: RunShape) -> MemoryEstimate:
  """A model's largest tensor and memory, from its shapes (nothing is built).

  Every attention layer with logits holds Candidate.live_logits float32
  tensors of [batch, heads, queries, memory] at the step's peak; R's tables
  ([heads, N, N] per layer, N the longest sequence) are state. The
  per-token activations (feed-forward, projections, the softmax over the
  vocabulary) are added as 8 float32 tensors of [batch, length, d_model],
  2 of [batch, length, d_ff] and 3 of [batch, length, vocab] per layer.

  Args:
    variant: the attention variant.
    shape: the model.
    run: the data shape.

  Returns:
    A MemoryEstimate.
  """
  batch, heads = run.batch, shape.num_heads
  n = max(run.length, run.target_length or 0)
  candidates = []
  state = step = 0
  for what, layers, queries, memory, live, tables in _attention_stacks(
      variant, shape, run):
    logits = _FLOAT32 * batch * heads * queries * memory
    if live:
      candidates.append((logits, "%s [batch %d, heads %d, %d, %d] float32" % (
          what, batch, heads, queries, memory)))
      step += int(live * layers * logits)
    if tables:
      table = _FLOAT32 * heads * n * n
      candidates.append((table, "R [heads %d, %d, %d] float32" % (
          heads, n, n)))
      state += tables * layers * table
    per_token = _FLOAT32 * batch * queries * (
        8 * shape.d_model + 2 * shape.d_ff + 3 * shape.vocab)
    step += layers * per_token
    widest = max(shape.d_ff, shape.vocab)
    candidates.append((_FLOAT32 * batch * queries * widest,
                       "activations [batch %d, %d, %d] float32" % (
                           batch, queries, widest)))
  size, largest = max(candidates)
  return MemoryEstimate(largest=largest, largest_bytes=size,
                        state_bytes=state, step_bytes=step)


def available_memory_bytes() -> int:
  """Memory available for new allocations now (MemAvailable, else free)."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def memory_budget_bytes(fraction: float = 0.75) -> int:
  """A fraction of this machine's RAM, at most the memory available now.

  Other processes on a shared machine hold memory too: the budget is the
  smaller of `fraction` of the physical memory (os.sysconf) and what is
  available when it is called (the start of the run).

  Args:
    fraction: of the total RAM, in (0, 1].

  Returns:
    Bytes.
  """
  total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  return int(min(fraction * total, available_memory_bytes()))


def gib(size: float) -> str:
  """Bytes as "1.5 GiB" (or MiB below one GiB)."""
  if size >= 2 ** 30:
    return "%.1f GiB" % (size / 2.0 ** 30)
  return "%.0f MiB" % (size / 2.0 ** 20)


def memory_skip_reason(estimate: MemoryEstimate, budget: int,
                       resident: int = 0) -> Optional[str]:
  """Why a model would not fit the memory budget, or None if it fits.

  Args:
    estimate: the model's, from estimate_memory.
    budget: bytes the benchmark may use (memory_budget_bytes).
    resident: bytes that stay allocated beside it (the reference model's
      state).

  Returns:
    A sentence with the analytic sizes, or None.
  """
  need = estimate.total_bytes + resident
  if need <= budget:
    return None
  return ("would not fit in memory: largest tensor %s = %s; estimated %s "
          "(step peak %s + length-dependent variables %s%s) > budget %s" % (
              estimate.largest, gib(estimate.largest_bytes), gib(need),
              gib(estimate.step_bytes), gib(estimate.state_bytes),
              " + the reference's %s" % gib(resident) if resident else "",
              gib(budget)))


def _einsum_flops(op: tf.Operation) -> int:
  """2*M*N*K of an Einsum/MatMul op from static shapes (1x if no sum)."""
  if op.type == "Einsum":
    equation = op.get_attr("equation").decode()
    inputs, _ = equation.split("->")
    sizes = {}
    for spec, tensor in zip(inputs.split(","), op.inputs):
      dims = tensor.shape.as_list()
      if "." in spec or len(spec) != len(dims):
        return 0
      for letter, size in zip(spec, dims):
        sizes[letter] = size
    output = equation.split("->")[1]
    summed = set(sizes) - set(output)
    total = int(np.prod([sizes[k] for k in sizes], dtype=np.float64))
    return total * (2 if summed else 1)
  if op.type in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
    a, b = op.inputs[0].shape.as_list(), op.outputs[0].shape.as_list()
    ta = op.get_attr("transpose_a") if op.type == "MatMul" else (
        op.get_attr("adj_x"))
    k = a[-2] if ta else a[-1]
    return 2 * int(np.prod(b, dtype=np.float64)) * k
  return 0


def _ancestors(fetches: Sequence[tf.Operation]) -> List[tf.Operation]:
  seen, stack = set(), list(fetches)
  while stack:
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return list(seen)


def step_flops(train_op: tf.Operation) -> int:
  """Matmul FLOPs of one training step (see the module docstring)."""
  return sum(_einsum_flops(op) for op in _ancestors([train_op]))


def peak_step_bytes(run_metadata: tf.RunMetadata) -> int:
  """Peak of the bytes allocated and still live during one traced step.

  Each node's memory records list the allocations and deallocations (time,
  signed bytes) of the tensors it allocated. Sorting all of them by time and
  taking the running sum gives the live bytes of the step's own tensors over
  time; its maximum is the step's peak. Memory that exists before the step
  (variables, optimizer slots) is not included: see `variable_bytes`.

  Args:
    run_metadata: from a `session.run` with FULL_TRACE.

  Returns:
    Bytes (0 when the trace has no allocation records).
  """
  events = []
  for dev in run_metadata.step_stats.dev_stats:
    for node in dev.node_stats:
      for mem in node.memory:
        for record in mem.allocation_records:
          events.append((record.alloc_micros, record.alloc_bytes))
  # Frees before allocations at equal times, so a peak is not overstated.
  events.sort(key=lambda e: (e[0], e[1]))
  live = peak = 0
  for _, delta in events:
    live += delta
    peak = max(peak, live)
  return peak


def top_allocations(run_metadata: tf.RunMetadata, n: int = 8) -> List[Dict]:
  """The nodes that allocated the most bytes in a traced step."""
  totals = {}
  for dev in run_metadata.step_stats.dev_stats:
    for node in dev.node_stats:
      size = sum(m.total_bytes for m in node.memory)
      if size:
        key = _op_key(node)
        mb, count = totals.get(key, (0.0, 0))
        totals[key] = (mb + size / 2.0 ** 20, count + 1)
  rows = [{"op": k, "MiB": round(v[0], 1), "count": v[1]}
          for k, v in totals.items()]
  rows.sort(key=lambda r: -r["MiB"])
  return rows[:n]


def _op_key(node) -> str:
  """A node's TF op type and its mtf op path, without layer/slice numbers."""
  match = re.search(r"= (\w+)\(", node.timeline_label or "")
  kind = match.group(1) if match else "?"
  name = re.sub(r"/parallel_\d+", "", node.node_name)
  name = re.sub(r"_\d+(?=/|$)", "", name)
  name = re.sub(r"^model/(en|de)coder/+", "", name)
  return "%s %s" % (kind, name)


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


def session_config(threads: int) -> tf.ConfigProto:
  return tf.ConfigProto(intra_op_parallelism_threads=threads,
                        inter_op_parallelism_threads=threads)


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
    flops = step_flops(train_op)
    # Variables and optimizer slots, alive between steps.
    state_bytes = sum(v.shape.num_elements() * v.dtype.base_dtype.size
                      for v in tf.global_variables())
    init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
    session = tf.Session(graph=tf_graph, config=session_config(threads))
    session.run(init)
    session.run(lowering.copy_masters_to_slices())
    tf_graph.finalize()
  return BuiltModel(variant=variant, session=session, train_op=train_op,
                    decode_op=decode_op, max_steps=max_steps,
                    num_params=num_params, flops=flops,
                    state_bytes=state_bytes)


def matmul_peak_flops(size: int = 2048, steps: int = 5,
                      threads: int = 2) -> float:
  """FLOP/s of a float32 [size, size] x [size, size] matmul in TF."""
  graph = tf.Graph()
  with graph.as_default():
    a = tf.Variable(tf.random.normal([size, size]))
    b = tf.Variable(tf.random.normal([size, size]))
    # A chain of dependent matmuls in one run amortises the call overhead.
    c = a
    for _ in range(steps):
      c = tf.matmul(c, b) * (1.0 / size)
    out = tf.reduce_sum(c)
    with tf.Session(graph=graph, config=session_config(threads)) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(out)
      best = float("inf")
      for _ in range(3):
        start = time.perf_counter()
        sess.run(out)
        best = min(best, time.perf_counter() - start)
  return 2.0 * size ** 3 * steps / best


def top_ops(run_metadata: tf.RunMetadata, n: int = 12) -> List[Dict]:
  """The ops that took the most time in a traced step.

  Nodes are grouped by TF op type and lowered name (mtf op path with layer
  and slice numbers removed), so both layers' copies of an op add up.

  Args:
    run_metadata: from a FULL_TRACE run.
    n: how many to return.

  Returns:
    [{"op": ..., "ms": ..., "count": ...}] sorted by time, descending.
  """
  totals = {}
  for dev in run_metadata.step_stats.dev_stats:
    for node in dev.node_stats:
      key = _op_key(node)
      ms_, count = totals.get(key, (0.0, 0))
      totals[key] = (ms_ + node.op_end_rel_micros / 1000.0, count + 1)
  rows = [{"op": k, "ms": round(v[0], 2), "count": v[1]}
          for k, v in totals.items()]
  rows.sort(key=lambda r: -r["ms"])
  return rows[:n]


def traced_op_ms(run_metadata: tf.RunMetadata) -> float:
  """The time of all ops of a traced step, summed over nodes (ms)."""
  return sum(node.op_end_rel_micros / 1000.0
             for dev in run_metadata.step_stats.dev_stats
             for node in dev.node_stats)
