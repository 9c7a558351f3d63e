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
"""

import mesh_tensorflow as mtf
from mesh_tensorflow import utils as mtf_utils
from mesh_tensorflow import simd_mesh_impl
import tensorflow.compat.v1 as tf


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
    value = lowered.tensor_list[0]
    if isinstance(lowering.mesh_impl(self), simd_mesh_impl.SimdMeshImpl):
      tf.add_to_collection(mtf_utils.SCALAR_SUMMARIES_COLLECTION_KEY,
                           (self.name, value))
    else:
      # The tag is exactly the operation's name (tf.summary.scalar would
      # prefix mesh's lowering scope, which is that name already).
      summary = tf.raw_ops.ScalarSummary(
          tags=self.name, values=tf.cast(value, tf.float32))
      tf.add_to_collection(tf.GraphKeys.SUMMARIES, summary)
    lowering.set_tensor_lowering(self.outputs[0], lowered)

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
