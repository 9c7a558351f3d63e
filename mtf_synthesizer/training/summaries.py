# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Scalar summaries that reach TensorBoard on every platform.

`mtf.scalar_summary` only records its tensor in a collection; the TPU path
writes that collection through a host call when
`tpu_estimator_model_fn.tpu_summaries = True`, and nothing writes it on CPU
or GPU. `scalar_summary` here lowers to the same collection entry on a TPU
mesh (`SimdMeshImpl`), so the host call picks it up exactly as before, and to
a `tf.summary.scalar` on a placement mesh (CPU, GPU). The estimator's
summary hook writes those to `<model_dir>/events.out.tfevents.*` every
`save_summary_steps` (100 by default in mesh's RunConfig, and at the first
step of every run), beside its own `loss` and mesh's `learning_rate`.

Inside a loop. When a replica's batch is larger than
`utils.serialize_num_microbatches.tokens_per_microbatch_per_replica`, mesh
builds the training step inside an `mtf.while_loop` (one iteration per
microbatch, gradients accumulated). A summary made there could be neither
merged with the others nor sent through the TPU host call. A summary whose
value depends on the variables only (a mixture's alpha) is therefore
computed once more outside the loop, from the same variable reads that the
loop takes in, so it is written exactly as without microbatches; a summary
of a value that changes from one microbatch to the next is left out, with a
warning.
"""

import contextlib
from typing import Iterator, List, Optional

from absl import logging
import mesh_tensorflow as mtf
from mesh_tensorflow import utils as mtf_utils
from mesh_tensorflow import simd_mesh_impl
import tensorflow.compat.v1 as tf
from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import control_flow_util_v2  # pylint: disable=g-direct-tensorflow-import


def _tf_tensors(lowered) -> List[tf.Tensor]:
  """The TF tensors of a lowered mtf tensor, without reducing a lazy sum."""
  if isinstance(lowered, mtf.LazyAllreduceSum):
    lowered = lowered.laid_out_input
  return list(lowered.tensor_list)


class _Loop:
  """The TF while loop whose body a tensor is built in.

  TF builds a loop body in one of two ways: in the graph itself, inside a
  while context (control flow v1: the stock CLI, which disables TF 2
  behaviour), or as a function graph of its own (control flow v2: TF 2's
  default, e.g. through T5's Python API).
  """

  def __init__(self, context=None, body_graph: Optional[tf.Graph] = None):
    self._context = context
    self._body_graph = body_graph

  @classmethod
  def around(cls, t: tf.Tensor) -> Optional["_Loop"]:
    """The loop that `t` is built in, or None outside any loop."""
    if control_flow_util_v2.in_while_loop_defun(t.graph):
      return cls(body_graph=t.graph)
    context = control_flow_util.GetContainingWhileContext(
        t.op._get_control_flow_context())  # pylint: disable=protected-access
    return cls(context=context) if context is not None else None

  def contains(self, lowered) -> bool:
    """Whether any TF tensor of a lowered mtf tensor is built in the loop."""
    for t in _tf_tensors(lowered):
      if self._body_graph is not None:
        if t.graph is self._body_graph:
          return True
      elif control_flow_util.IsInWhileLoop(t.op):
        return True
    return False

  @contextlib.contextmanager
  def outside(self) -> Iterator[None]:
    """New TF ops go where the loop is built (and its inputs come from).

    That is the graph's top level on CPU and GPU, and inside the TPU
    computation (not on the host) on TPU.
    """
    if self._body_graph is not None:
      with self._body_graph.outer_graph.as_default():
        yield
      return
    graph = tf.get_default_graph()
    inner = graph._get_control_flow_context()  # pylint: disable=protected-access
    graph._set_control_flow_context(self._context.outer_context)  # pylint: disable=protected-access
    try:
      yield
    finally:
      graph._set_control_flow_context(inner)  # pylint: disable=protected-access


def _ops_computed_in_loop(lowering: mtf.Lowering, loop: _Loop,
                          x: mtf.Tensor) -> Optional[List[mtf.Operation]]:
  """The mtf ops between x and the loop's inputs from outside, in order.

  Args:
    lowering: the lowering in progress.
    loop: the loop x is lowered in.
    x: an mtf tensor.

  Returns:
    The ops whose lowered outputs are inside the loop and that x depends
    on, each after its inputs; None when x depends on a value that the
    loop carries from one iteration to the next (a microbatch).
  """
  order, seen = [], set()

  def visit(op: mtf.Operation) -> bool:
    if op in seen:
      return True
    seen.add(op)
    if isinstance(op, mtf.WhileLoopOperation):  # the loop's own variables
      return False
    for t in op.inputs:
      if loop.contains(lowering.tensors[t]) and not visit(t.operation):
        return False
    order.append(op)
    return True

  return order if visit(x.operation) else None


def _lowered_again(lowering: mtf.Lowering, ops: List[mtf.Operation],
                   x: mtf.Tensor) -> tf.Tensor:
  """x from `ops` lowered once more, where new TF ops go now."""
  inside = {t: lowering.tensors[t] for op in ops for t in op.outputs
            if t in lowering.tensors}
  try:
    for op in ops:
      with tf.name_scope(op.name):
        op.lower(lowering)
    return lowering.tensors[x].to_laid_out_tensor().tensor_list[0]
  finally:  # the loop's own ops keep their in-loop inputs
    lowering.tensors.update(inside)


class ScalarSummaryOperation(mtf.Operation):
  """Identity on a scalar that also writes it as a summary (see module)."""

  def __init__(self, name: str, x: mtf.Tensor):
    super().__init__([x], x.mesh, name=name)
    if x.shape.dims:
      raise ValueError("A scalar summary takes a scalar; %s has shape %s."
                       % (name, x.shape))
    self._outputs = [mtf.Tensor(self, x.shape, x.dtype)]

  def lower(self, lowering):
    lowered = lowering.tensors[self.inputs[0]].to_laid_out_tensor()
    lowering.set_tensor_lowering(self.outputs[0], lowered)
    value = lowered.tensor_list[0]
    loop = _Loop.around(value)
    if loop is None:
      self._write(lowering, value)
      return
    ops = _ops_computed_in_loop(lowering, loop, self.inputs[0])
    if ops is None:
      logging.warning(
          "The scalar summary %s is left out: it is made inside a loop "
          "(mesh's microbatches) and changes from one iteration to the "
          "next.", self.name)
      return
    with loop.outside():
      self._write(lowering, _lowered_again(lowering, ops, self.inputs[0]))

  def _write(self, lowering: mtf.Lowering, value: tf.Tensor) -> None:
    """Adds the summary of `value` to the collection its platform writes."""
    if isinstance(lowering.mesh_impl(self), simd_mesh_impl.SimdMeshImpl):
      tf.add_to_collection(mtf_utils.SCALAR_SUMMARIES_COLLECTION_KEY,
                           (self.name, value))
    else:
      # The tag is exactly the operation's name (tf.summary.scalar would
      # prefix mesh's lowering scope, which is that name already).
      summary = tf.raw_ops.ScalarSummary(
          tags=self.name, values=tf.cast(value, tf.float32))
      tf.add_to_collection(tf.GraphKeys.SUMMARIES, summary)

  def gradient(self, grad_ys):
    return grad_ys


def scalar_summary(name: str, x: mtf.Tensor) -> mtf.Tensor:
  """Writes a scalar to TensorBoard on TPU, CPU and GPU meshes.

  Args:
    name: the summary's name; mesh prefixes it with the current name scope
      (e.g. "encoder/block_000/layer_000/SynthesizerAttention/mixture/...").
    x: a scalar mtf.Tensor.

  Returns:
    x, unchanged (use it, or not: the summary is written either way while
    the training graph runs).
  """
  return ScalarSummaryOperation(name, x).outputs[0]
