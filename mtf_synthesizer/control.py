# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Order in a lowered mtf graph: a tensor that waits for another."""

import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf


def after(x: mtf.Tensor, marker: mtf.Tensor) -> mtf.Tensor:
  """x, on each device only once that device's slice of marker exists.

  An identity of x with a control dependency on marker's slice, for an
  order TF's executor would otherwise be free to change (which bounds what
  is live at once). Both must be on the same mesh; a marker that is still
  a pending sum over a split dimension is summed first.

  Args:
    x: the tensor to hold back.
    marker: what it waits for.

  Returns:
    x's value, shaped like x; no gradient.
  """
  def wait(x_slice, marker_slice):
    with tf.control_dependencies([marker_slice]):
      return tf.identity(x_slice)
  return mtf.slicewise(wait, [x, marker], output_shape=x.shape,
                       output_dtype=x.dtype,
                       splittable_dims=x.shape.dims + marker.shape.dims,
                       grad_function=0, name="after")
