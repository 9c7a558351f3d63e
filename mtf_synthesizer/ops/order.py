# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Order in a lowered mtf graph, for what is live at once.

  * `after`: a tensor that waits for another on each device;
  * `order_gradients`: an attention layer's values' gradient waits for its
    logits' gradient, so the layers below start once its weights are freed.
"""

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


def order_gradients(logits: mtf.Tensor, values: mtf.Tensor):
  """Identities of logits and values whose values' gradient waits for logits'.

  Backward, the values' gradient leads to the layers below, while the
  logits' gradient (the softmax's) is needed only by the synthesizing
  function's variables. Left free, TF may run the softmax's gradient late,
  beside the next layers' backward passes, keeping this layer's weights and
  their gradient (two logits-sized tensors) alive there; when the logits do
  not depend on the input (R, FR) nothing else makes it run first. This
  makes the values' gradient of each device's slice wait for the logits'.

  Args:
    logits: the attention logits.
    values: the values they weight.

  Returns:
    (logits, values), unchanged.
  """
  def forward(x, y):
    return tf.identity(x), tf.identity(y)

  def grad_function(op, dlogits, dvalues):
    del op
    if dlogits is None or dvalues is None:
      return [dlogits, dvalues]
    return [dlogits, after(dvalues, dlogits)]

  return mtf.slicewise(
      forward, [logits, values],
      output_shape=[logits.shape, values.shape],
      output_dtype=[logits.dtype, values.dtype],
      splittable_dims=logits.shape.dims + values.shape.dims,
      grad_function=grad_function, name="order_gradients")
