# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The collectives of each variant on a model-parallel mesh.

No variant may force an all-gather of a length x length tensor per example.
The audit lists every collective that Mesh TensorFlow's lowering asks the
mesh for, with the Mesh TensorFlow tensor it communicates
(`tools/mesh_comm_audit.py` prints it; tests/test_mesh_comm.py asserts it).

The model is the tiny T5-style Bitransformer of `tiny_model` (the one of
tests/test_mesh_layouts.py), with dropout on, built in one graph with
everything a training step and greedy decoding lower:

  * the loss (forward pass, TRAIN mode; plain or packed examples);
  * its gradients (`mtf.gradients`) and mesh's Adafactor update (the stock
    CLI's optimizer);
  * greedy decoding (`Bitransformer.decode`: the encoder, then incremental
    decoding in a while loop, with its state split like the activations).

The graph is lowered on a `RecordingMeshImpl`, a `PlacementMeshImpl` that
logs its collective methods: `allreduce`, `allconcat`, `alltoall` and
`receive` (`shift_by_n_processors` calls `receive`; `allsplit` and
`broadcast_impl` are local slicing, no communication). It also logs, as
"random_sync", the all-reduce with which the TPU's SimdMeshImpl would make
the slices of a replicated random tensor (a dropout mask) equal; the
placement mesh uses equal seeds instead (dropout is on, at mesh's default
rate 0.1, so that the masks are in the graph). Lowering calls the collectives
from the operations' `lower` methods: einsums and reductions over a split
dimension (a lazy all-reduce, run when a consumer needs the sum), reshapes
and dimension renames that change a tensor's layout (all-split, all-to-all,
all-concat), top-k over a split dimension (all-concat), shifts along a split
dimension (receive). Each call is attributed to the Mesh TensorFlow tensor
whose slices it communicates (looked up in the lowering's tensor table, or
derived from the operation being lowered) and to that tensor's producing
operation. Which collectives run is decided by ops.py from the layout, not by
the mesh implementation, so the TPU's SimdMeshImpl issues the same ones
(it builds allconcat and MAX all-reduces out of SUM all-reduces).

A collective "per example" communicates a tensor with a batch dimension; one
without (a parameter's gradient, a table shared by all examples) runs once
per step, whatever the batch size. A tensor is length x length when it has
two length-like dimensions (LENGTH_DIMS: the query and memory lengths and the
synthesizer's position tables). The audit fails if any collective
communicates a per-example length x length tensor, or if it cannot follow
every collective (see `problems`).
"""

import collections
import dataclasses
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow import optimize
import numpy as np
import tensorflow.compat.v1 as tf

from mtf_synthesizer import attentions
from mtf_synthesizer.core import interface
from mtf_synthesizer.jobs import mesh_defaults
from workbench import tiny_model

# Every variant of the table (mesh's own attention can be audited too, as
# `attentions.MESH_SELF_ATTENTION.name`).
VARIANTS = attentions.VARIANT_NAMES
MESHES = ("model:2,batch:2", "model:4")
NUM_DEVICES = 4
BATCH_DIM = "batch"
# The all-reduce with which the TPU's SimdMeshImpl syncs a replicated random
# tensor (dropout masks); see RecordingMeshImpl.random.
RANDOM_SYNC = "random_sync"
# Where RecordingMeshImpl.instrument keeps an operation's own `lower`.
_ORIGINAL_LOWER = "_comm_audit_original_lower"
# Query length, memory (key/value) length, and the max_length-sized position
# dimensions of the synthesizer's tables (R, R1/R2, W2/b2).
LENGTH_DIMS = frozenset(["length", "memory_length",
                         interface.QUERY_POSITIONS,
                         interface.MEMORY_POSITIONS])


@dataclasses.dataclass(frozen=True)
class Collective:
  """One collective call of the lowering.

  Attributes:
    kind: "allreduce", "allconcat", "alltoall" or "receive".
    op_type: the class of the operation that produced the tensor (e.g.
      "EinsumOperation"), or of the operation being lowered when the tensor
      is an intermediate result of it.
    dims: (name, size) of each dimension of the Mesh TensorFlow tensor whose
      slices are communicated.
    itemsize: bytes per element.
    mesh_axes: names of the mesh axes the collective runs over.
    exact: False when the tensor is a guess (not found in the lowering's
      tensor table, nor an einsum's or reduction's partial results, nor a
      reshape's input): the
      tensor of the operation being lowered with the same slice shape (as
      top-k's per-shard candidates), else its first input.
    op_name: the operation's name.
    lowered_in: "<class> <name>" of the operation being lowered when the
      collective ran (e.g. the reshape that all-concats a tensor, or the
      consumer of a lazy all-reduce).
  op_name and lowered_in are not compared: collectives that differ only in
  them are grouped together.
  """
  kind: str
  op_type: str
  dims: Tuple[Tuple[str, int], ...]
  itemsize: int
  mesh_axes: Tuple[str, ...]
  exact: bool = True
  op_name: str = dataclasses.field(default="", compare=False)
  lowered_in: str = dataclasses.field(default="", compare=False)

  @property
  def dim_names(self) -> Tuple[str, ...]:
    return tuple(name for name, _ in self.dims)

  @property
  def length_dims(self) -> Tuple[str, ...]:
    return tuple(name for name in self.dim_names if name in LENGTH_DIMS)

  @property
  def per_example(self) -> bool:
    """Whether the tensor has a batch dimension (one value per example)."""
    return BATCH_DIM in self.dim_names

  @property
  def is_length_by_length(self) -> bool:
    return len(self.length_dims) >= 2

  @property
  def violates(self) -> bool:
    """A per-example length x length tensor: what the audit forbids."""
    return self.per_example and self.is_length_by_length

  @property
  def num_bytes(self) -> int:
    """Bytes of the whole (logical, unsplit) tensor."""
    size = 1
    for _, n in self.dims:
      size *= n
    return size * self.itemsize

  @property
  def bytes_per_example(self) -> Optional[float]:
    """num_bytes over the batch size; None for a per-step tensor."""
    if not self.per_example:
      return None
    return self.num_bytes / dict(self.dims)[BATCH_DIM]

  def describe_dims(self) -> str:
    return "[%s]" % ", ".join("%s:%d" % d for d in self.dims)


class RecordingMeshImpl(mtf.placement_mesh_impl.PlacementMeshImpl):
  """A PlacementMeshImpl that records its collectives (see module doc).

  Call `instrument(graph)` before building the mtf.Lowering, so that the
  collectives can be attributed to Mesh TensorFlow tensors.
  """

  def __init__(self, shape, layout, devices):
    super().__init__(shape, layout, devices)
    self.collectives: List[Collective] = []
    self._lowering = None
    self._ops: List[mtf.Operation] = []  # the operations being lowered
    self._depth = 0  # nested collective calls are not counted twice

  def instrument(self, graph: mtf.Graph) -> None:
    """Wraps the `lower` method of every operation of `graph`.

    Includes the condition and body operations of while loops, which are
    not in `graph.operations`. A graph may be instrumented again for another
    mesh: the wrapper then replaces the previous one.

    Args:
      graph: the mtf.Graph that is about to be lowered on this mesh.
    """
    # pylint: disable=protected-access
    pending = list(graph.operations)
    while pending:
      op = pending.pop()
      if isinstance(op, mtf.WhileLoopOperation):
        pending.extend(op._cond_ops + op._body_ops)
      original = vars(op).setdefault(_ORIGINAL_LOWER, op.lower)
      op.lower = self._wrap_lower(op, original)
    # pylint: enable=protected-access

  def _wrap_lower(self, op: mtf.Operation,
                  lower: Callable[[mtf.Lowering], None]):
    def recording_lower(lowering):
      self._lowering = lowering
      self._ops.append(op)
      try:
        lower(lowering)
      finally:
        self._ops.pop()
    return recording_lower

  def _tensor_of(self, x) -> Tuple[Optional[mtf.Tensor], Optional[mtf.Shape],
                                   Optional[mtf.Operation], bool]:
    """The Mesh TensorFlow tensor whose slices `x` holds.

    Args:
      x: a LaidOutTensor (or a lazy all-reduce of one) about to be
        communicated.

    Returns:
      (tensor or None, its shape, the operation to report, exact).
    """
    if self._lowering is not None:
      for tensor, laid_out in self._lowering.tensors.items():
        if laid_out is x or getattr(laid_out, "laid_out_input", None) is x:
          return tensor, tensor.shape, tensor.operation, True
    op = self._ops[-1] if self._ops else None
    if op is None:
      return None, None, None, False
    if isinstance(op, mtf.EinsumOperation):
      # The partial sums of the output dimensions that are in the inputs (the
      # broadcast to the other output dimensions happens after the sum).
      input_dims = set(sum([t.shape.dims for t in op.inputs], []))
      shape = mtf.Shape([d for d in op.outputs[0].shape.dims
                         if d in input_dims])
      return None, shape, op, True
    if isinstance(op, mtf.ReduceOperation):
      # A MAX or MIN reduction's partial results (SUMs are lazy and found
      # above).
      return op.outputs[0], op.outputs[0].shape, op, True
    if isinstance(op, mtf.ReshapeOperation):
      # Layout changes act on the input, one mesh axis after the other.
      return None, op.inputs[0].shape, op, True
    # Otherwise a guess: a tensor of the operation with the same slice shape
    # (e.g. top-k's per-shard candidates match its output), else its input.
    for tensor in op.outputs + op.inputs:
      if self.slice_shape(tensor.shape) == list(x.slice_shape):
        return tensor, tensor.shape, op, False
    return None, op.inputs[0].shape, op, False

  def _record(self, kind: str, x, mesh_axes: Iterable[int]) -> None:
    tensor, shape, op, exact = self._tensor_of(x)
    slices = getattr(x, "laid_out_input", x).tensor_list
    if shape is None:
      dims = tuple(("?%d" % i, n) for i, n in enumerate(x.slice_shape))
    else:
      dims = tuple((d.name, d.size) for d in shape.dims)
    dtype = tensor.dtype if tensor is not None else slices[0].dtype
    self.collectives.append(Collective(
        kind=kind,
        op_type=type(op).__name__ if op is not None else "(outside any op)",
        op_name=op.name if op is not None else "",
        dims=dims,
        itemsize=tf.as_dtype(dtype).size,
        mesh_axes=tuple(self.shape[a].name for a in mesh_axes),
        exact=exact,
        lowered_in=("%s %s" % (type(self._ops[-1]).__name__,
                               self._ops[-1].name) if self._ops else "")))

  def _recorded(self, kind, x, mesh_axes, call):
    if self._depth == 0:
      self._record(kind, x, mesh_axes)
    self._depth += 1
    try:
      return call()
    finally:
      self._depth -= 1

  def allreduce(self, x, mesh_axes, reduction_fn_string):
    return self._recorded(
        "allreduce", x, mesh_axes,
        lambda: super(RecordingMeshImpl, self).allreduce(
            x, mesh_axes, reduction_fn_string))

  def allconcat(self, x, mesh_axis, concat_axis):
    return self._recorded(
        "allconcat", x, [mesh_axis],
        lambda: super(RecordingMeshImpl, self).allconcat(
            x, mesh_axis, concat_axis))

  def alltoall(self, x, mesh_axis, split_axis, concat_axis):
    return self._recorded(
        "alltoall", x, [mesh_axis],
        lambda: super(RecordingMeshImpl, self).alltoall(
            x, mesh_axis, split_axis, concat_axis))

  def random(self, shape, tf_fn, kwargs):
    # PlacementMeshImpl draws equal values on the slices of a replicated
    # random tensor from equal seeds; the TPU's SimdMeshImpl (which has no
    # seeds) instead zeroes all but one slice and all-reduces them over the
    # mesh axes the tensor is not split over. Recorded as "random_sync".
    layout = self.tensor_layout(shape)
    replicated = [a for a in range(self.ndims)
                  if a not in layout.tensor_axis_to_mesh_axis]
    if replicated:
      self.collectives.append(Collective(
          kind=RANDOM_SYNC,
          op_type=type(self._ops[-1]).__name__ if self._ops else "",
          dims=tuple((d.name, d.size) for d in shape.dims),
          itemsize=tf.as_dtype(kwargs.get("dtype", tf.float32)).size,
          mesh_axes=tuple(self.shape[a].name for a in replicated),
          op_name=self._ops[-1].name if self._ops else ""))
    return super().random(shape, tf_fn, kwargs)

  def receive(self, x, mesh_axis, source_pcoord):
    return self._recorded(
        "receive", x, [mesh_axis],
        lambda: super(RecordingMeshImpl, self).receive(
            x, mesh_axis, source_pcoord))


@dataclasses.dataclass
class Audit:
  """The collectives of one lowering.

  Attributes:
    mesh_shape: the mesh, e.g. "model:2,batch:2".
    collectives: every collective, in lowering order.
    mesh_counts: how many collectives of each kind mesh's own lowering
      counters report (it counts the all-reduces of einsums and reductions
      and the all-concats and all-to-alls of reshapes, not those of top-k
      or the receives of shifts): a check that none was missed.
  """
  mesh_shape: str
  collectives: List[Collective]
  mesh_counts: Dict[str, int]

  def recorded_counts(self) -> Dict[str, int]:
    """Recorded collectives of each kind, of the ops mesh counts."""
    return dict(collections.Counter(
        c.kind for c in self.collectives
        if c.kind not in ("receive", RANDOM_SYNC) and
        c.op_type != "TopKOperation"))


def lower_and_record(graph: mtf.Graph, mesh: mtf.Mesh, mesh_shape: str,
                     layout: str, outputs: Sequence[mtf.Tensor] = (),
                     num_devices: int = NUM_DEVICES) -> Audit:
  """Lowers `graph` on a recording mesh and returns its collectives.

  The graph may be lowered several times (on different meshes), in the same
  tf.Graph: each lowering's slice variables get their own variable scope.
  Variables are not stacked (`autostack=False`, as in
  tests/test_mesh_layouts.py; stacking only adds local slicing).

  Args:
    graph: the mtf.Graph (its tf.Graph must be the default graph).
    mesh: its mtf.Mesh.
    mesh_shape: e.g. "model:2,batch:2".
    layout: layout rules.
    outputs: tensors to export, as a training step or decoder would (an
      export runs the pending lazy all-reduces of its tensor).
    num_devices: the number of mesh slices' devices (all "": no session is
      run).

  Returns:
    An Audit.
  """
  mesh_impl = tiny_model.placement_mesh_impl(
      mesh_shape, layout, [""] * num_devices, RecordingMeshImpl)
  mesh_impl.instrument(graph)
  with tf.variable_scope(None, default_name="comm_audit"):
    lowering = tiny_model.lower(graph, mesh, mesh_impl)
    for t in outputs:
      lowering.export_to_tf_tensor(t)
  counted = collections.Counter(
      key.split("/")[0] for key, _ in lowering.counters)
  return Audit(mesh_shape, mesh_impl.collectives,
               {k: counted[k] for k in ("allreduce", "allconcat", "alltoall")
                if counted[k]})




def audit_variant(variant: str, mesh_shapes: Sequence[str] = MESHES,
                  layout: str = mesh_defaults.LAYOUT_RULES,
                  batch: int = tiny_model.BATCH,
                  length: int = tiny_model.LENGTH,
                  optimizer: bool = True, packed: bool = False,
                  extra_bindings: Sequence[str] = ()) -> Dict[str, Audit]:
  """Builds `variant`'s training step and decoding once; audits each mesh.

  Args:
    variant: a variant name (see VARIANTS) or
      `attentions.MESH_SELF_ATTENTION.name`.
    mesh_shapes: the meshes to lower on, e.g. ["model:2,batch:2"].
    layout: layout rules.
    batch: batch size.
    length: input and target length (and max_length of the tables).
    optimizer: add mesh's Adafactor update (else the gradients are exported
      as outputs). It only reduces variables and gradients, which have no
      batch dimension.
    packed: train on packed examples (two segments per row, with explicit
      sequence ids and positions, and positional embeddings, without which
      mesh drops the positions), so that the synthesizers gather their
      tables per example.
    extra_bindings: more gin bindings (see tiny_model.configure).

  Returns:
    mesh shape -> its Audit.
  """
  # Dropout on (mesh's default rate), so that the dropout masks are in the
  # graph.
  tiny_model.configure(variant, length, dropout_rate=0.1, packed=packed,
                       extra_bindings=extra_bindings)
  try:
    with tf.Graph().as_default():
      graph = mtf.Graph()
      mesh = mtf.Mesh(graph, "mesh")
      tokens = np.full((batch, length), 2, np.int32)
      step = tiny_model.training_step(
          mesh, tokens, tokens, layout=layout,
          packed=tiny_model.packed_rows(batch, length) if packed else None)
      outputs = [step.loss, step.decoded]
      if optimizer:
        optimize.AdafactorOptimizer().apply_grads(step.grads, step.variables)
      else:
        outputs += [g for g in step.grads if g is not None]
      return {m: lower_and_record(graph, mesh, m, layout, outputs)
              for m in mesh_shapes}
  finally:
    gin.clear_config()


def summarize(collectives: Iterable[Collective]
              ) -> List[Tuple[Collective, int]]:
  """Groups equal collectives: (collective, count), in first-seen order."""
  return list(collections.Counter(collectives).items())


def violations(collectives: Iterable[Collective]) -> List[Collective]:
  """The collectives that communicate a per-example length x length tensor."""
  return [c for c in collectives if c.violates]


def problems(audit: Audit) -> List[str]:
  """What fails the audit: violations, and collectives it could not follow.

  Args:
    audit: an Audit.

  Returns:
    One message per problem; empty if the audit passes.
  """
  found = ["%s over %s of a per-example length x length tensor %s (%s %s, "
           "lowering %s)" % (c.kind, ",".join(c.mesh_axes), c.describe_dims(),
                             c.op_type, c.op_name, c.lowered_in or "-")
           for c in violations(audit.collectives)]
  found += ["%s over %s from %s: tensor not identified, slice shape %s"
            % (c.kind, ",".join(c.mesh_axes), c.op_type, c.describe_dims())
            for c in audit.collectives if c.dims and
            c.dims[0][0].startswith("?")]
  if audit.recorded_counts() != audit.mesh_counts:
    found.append("recorded %s, but mesh's lowering counted %s" % (
        audit.recorded_counts(), audit.mesh_counts))
  return found


def format_table(collectives: Sequence[Collective],
                 only_length: bool = True) -> str:
  """A text table of the grouped collectives.

  Args:
    collectives: as in Audit.
    only_length: list only those with a length-like dimension (the others
      are counted in a last line).

  Returns:
    The table: collective kind, mesh axes, the tensor's producer (`~`: the
    tensor is a guess, see Collective.exact), its dims, how many such
    collectives, the tensor's bytes (whole, not per slice), bytes per
    example, and a flag for length x length tensors.
  """
  rows = []
  others = collections.Counter()
  for c, count in summarize(collectives):
    if only_length and not c.length_dims:
      others[c.kind] += count
      continue
    flag = "VIOLATION" if c.violates else (
        "LxL per step" if c.is_length_by_length else "")
    rows.append((
        c.kind, ",".join(c.mesh_axes),
        c.op_type.replace("Operation", "") + ("" if c.exact else " ~"),
        c.describe_dims(), "%d" % count, "%d" % c.num_bytes,
        "%g" % c.bytes_per_example if c.per_example else "(per step)",
        flag))
  header = ("collective", "axes", "producer", "tensor dims", "n", "bytes",
            "bytes/example", "")
  widths = [max(len(r[i]) for r in rows + [header])
            for i in range(len(header))]
  lines = ["  ".join(v.ljust(w) for v, w in zip(header, widths)).rstrip()]
  lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()
            for r in rows]
  if others:
    lines.append("(+ %s without a length dimension)" % ", ".join(
        "%d %s" % (n, kind) for kind, n in sorted(others.items())))
  return "\n".join(lines)

