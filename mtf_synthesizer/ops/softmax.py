# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention's softmax: TF's fused kernel on each device's slice."""

from typing import Optional

import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf

from mtf_synthesizer.ops import slices


def softmax_gradient(y: tf.Tensor, dy: tf.Tensor, axis: int) -> tf.Tensor:
  """The gradient of the softmax y at dy: y * (dy - sum(dy * y)).

  When the reduced axis is the last, the row sums come from
  `slices.row_sums_of_products` (no logits-sized temporary); dy - sum then
  runs in dy's buffer and the product by y in its result. At 8192 tokens
  one logits-sized tensor is 2 GiB per layer.

  Args:
    y: the softmax's output.
    dy: the gradient at its output.
    axis: the reduced axis.

  Returns:
    The gradient at the softmax's input, shaped like y.
  """
  shape = y.shape.as_list()
  if None in shape or axis != len(shape) - 1:
    sums = tf.reduce_sum(dy * y, axis=axis, keepdims=True)
  else:
    sums = tf.reshape(slices.row_sums_of_products(dy, y), shape[:-1] + [1])
  return (dy - sums) * y


def softmax(logits: mtf.Tensor, reduced_dim: mtf.Dimension,
            context=None, extra_logit: Optional[float] = None) -> mtf.Tensor:
  """The softmax of the logits over one dimension.

  When the layout leaves `reduced_dim` whole on every device, each device
  runs TF's fused softmax on its slice: one exponential forward, and the
  gradient y * (dy - sum(dy * y)) (`softmax_gradient`), which needs only
  the output and no full-size temporary. mtf's own
  `softmax` is exp(x - logsumexp(x)): two exponentials over the logits
  forward and more full-size temporaries backward (docs/benchmark.md, "One
  exponential per softmax", measures the difference). The values are the
  same up to float rounding.

  Args:
    logits: float32 logits.
    reduced_dim: the dimension to normalise over (the memory length).
    context: a transformer.Context, to see whether the layout splits
      `reduced_dim`; None when it cannot.
    extra_logit: mesh's `extra_logit` (an implicit logit in every row);
      with one, mtf's softmax is used.

  Returns:
    The weights, shaped like `logits`.
  """
  layout = getattr(context, "layout", None)
  mesh_shape = getattr(context, "mesh_shape", None)
  split = (layout is not None and mesh_shape is not None and
           mtf.tensor_dim_to_mesh_dim_size(layout, mesh_shape,
                                           reduced_dim) > 1)
  if extra_logit is not None or split:
    return mtf.softmax(logits, reduced_dim, extra_logit=extra_logit)
  axis = logits.shape.dims.index(reduced_dim)

  splittable = logits.shape.dims[:axis] + logits.shape.dims[axis + 1:]

  def gradient(op, dy):
    # A slicewise op of its own rather than TF's gradient of the forward
    # slices: mtf's generic slicewise gradient cannot take a gradient that
    # is still a pending sum over a split batch (R's logits have no batch
    # dimension), which a slicewise op's lowering resolves.
    return [mtf.slicewise(
        lambda y, dy: softmax_gradient(y, dy, axis), [op.outputs[0], dy],
        output_shape=logits.shape, output_dtype=logits.dtype,
        splittable_dims=splittable, grad_function=0,
        name="softmax_gradient")]

  return mtf.slicewise(
      lambda x: tf.nn.softmax(x, axis=axis), [logits],
      output_shape=logits.shape, output_dtype=logits.dtype,
      splittable_dims=splittable, grad_function=gradient, name="softmax")
