# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Products whose gradients need no product-sized temporary.

  * `contract`: a sum of products over the dims not kept, each device's
    slice by TF's einsum (or a matmul, or row sums), all-reduced over the
    mesh axes that split a summed dim (no gradient: the optimizer's
    statistics, the mixture weights' gradient);
  * `scaled`: x times a per-head factor, whose gradient is a contraction;
  * `outer_product`: FD's A x B, whose gradients are matrix-vector products.
"""

from typing import List

import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf

from mtf_synthesizer.ops import slices


class Contraction(mtf.Operation):
  """tf.einsum of its inputs' slices, summed over the mesh axes they split.

  mtf.einsum multiplies inputs that have every dimension element-wise into
  a full-size temporary and then reduces it; this runs TF's einsum on each
  slice (a matrix-vector product, no temporary; two inputs of one shape
  summed to their leading dims take `slices.leading_sums`) and all-reduces the
  partial sums over the mesh axes that split a contracted dimension. It has no
  gradient: it computes the optimizer's statistics and gradients.
  """

  def __init__(self, inputs: List[mtf.Tensor], output_shape: mtf.Shape,
               name: str = "contraction"):
    super().__init__(inputs, name=name)
    self._outputs = [mtf.Tensor(self, output_shape, inputs[0].dtype)]

  def lower(self, lowering: mtf.Lowering):
    mesh_impl = lowering.mesh_impl(self)
    output_shape = self.outputs[0].shape
    letters = {}

    def term(shape: mtf.Shape) -> str:
      return "".join(letters.setdefault(d.name, chr(ord("a") + len(letters)))
                     for d in shape.dims)

    equation = "%s->%s" % (",".join(term(x.shape) for x in self.inputs),
                           term(output_shape))

    same_shapes = len(self.inputs) == 2 and (
        self.inputs[0].shape == self.inputs[1].shape)
    input_dims = self.inputs[0].shape.dims
    leading = (same_shapes and 0 < len(output_shape.dims) < len(input_dims)
               and input_dims[:len(output_shape.dims)] == output_shape.dims)

    def contract(*xs: tf.Tensor) -> tf.Tensor:
      if same_shapes and not output_shape.dims:
        # A dot product: TF's einsum takes several times longer on CPU
        # than a [1, n] x [n, 1] matmul of the flattened slices.
        a, b = [tf.reshape(x, [1, -1]) for x in xs]
        return tf.reshape(tf.matmul(a, b, transpose_b=True), [])
      if leading:
        return slices.leading_sums(xs[0], xs[1], len(output_shape.dims))
      return tf.einsum(equation, *xs)

    y = mesh_impl.slicewise(contract,
                            *[lowering.tensors[x] for x in self.inputs])
    split_axes = set()
    for x in self.inputs:
      layout = mesh_impl.tensor_layout(x.shape)
      for dim, axis in zip(x.shape.dims, layout.tensor_axis_to_mesh_axis):
        if axis is not None and dim not in output_shape.dims:
          split_axes.add(axis)
    if split_axes:
      mesh_axes = sorted(split_axes)
      y = mesh_impl.allreduce(y, mesh_axes, "SUM")
      # Counted as mesh's own ops count their collectives.
      lowering.add_counter("allreduce/%s/contraction" % mesh_axes,
                           mesh_impl.laid_out_size(output_shape))
    lowering.set_tensor_lowering(self.outputs[0], y)


def contract(inputs: List[mtf.Tensor],
             output_dims: List[mtf.Dimension]) -> mtf.Tensor:
  """The sum over the dims not in output_dims of the inputs' product.

  Args:
    inputs: tensors on one mesh, of one dtype.
    output_dims: the dims to keep.

  Returns:
    The sum, shaped output_dims.
  """
  return Contraction(inputs, mtf.Shape(output_dims)).outputs[0]


def scaled(x: mtf.Tensor, scale: mtf.Tensor) -> mtf.Tensor:
  """x * scale, where scale's dims (the heads) are some of x's.

  The scale's gradient is a contraction of the product's gradient with x;
  mtf's own product gradient forms their element-wise product first, a
  temporary the size of x (2 GiB for R's table at 8192 tokens).

  Args:
    x: a float32 Tensor.
    scale: a float32 Tensor whose dims are all in x.

  Returns:
    The product, shaped like x.
  """
  if not all(d in x.shape.dims for d in scale.shape.dims):
    return x * scale

  def grad_fn(explicit_inputs, all_inputs, forward_operations, outputs,
              output_grads):
    del all_inputs, forward_operations, outputs
    x, scale = explicit_inputs
    dy = output_grads[0]
    return [mtf.multiply(dy, scale, output_shape=x.shape),
            contract([dy, x], scale.shape.dims)]

  return mtf.custom_gradient(
      lambda x, scale: mtf.multiply(x, scale, output_shape=x.shape),
      grad_fn, [x, scale])


def outer_product(left: mtf.Tensor, right: mtf.Tensor) -> mtf.Tensor:
  """The outer product of the last dims of two tensors, per leading index.

  The gradients are matrix-vector products of the output's gradient with
  the other factor; mtf's own einsum gradient would broadcast that factor
  to the output's full size first.

  Args:
    left: float32, dims [...] + [m].
    right: float32, dims [...] + [n] (the same leading dims, same order).

  Returns:
    out[..., i, j] = left[..., i] * right[..., j]: dims [...] + [m, n].
  """
  lead = left.shape.dims[:-1]
  m_dim, n_dim = left.shape.dims[-1], right.shape.dims[-1]
  output_shape = mtf.Shape(lead + [m_dim, n_dim])

  def forward(x, y):
    return mtf.einsum([x, y], output_shape=output_shape)

  def grad_fn(explicit_inputs, all_inputs, forward_operations, outputs,
              output_grads):
    del all_inputs, forward_operations, outputs
    x, y = explicit_inputs
    dy = output_grads[0]

    def matvec(transpose):
      return lambda d, v: tf.linalg.matvec(d, v, transpose_a=transpose)

    return [
        mtf.slicewise(matvec(False), [dy, y], output_shape=x.shape,
                      output_dtype=x.dtype, splittable_dims=lead,
                      name="outer_product_grad_left"),
        mtf.slicewise(matvec(True), [dy, x], output_shape=y.shape,
                      output_dtype=y.dtype, splittable_dims=lead,
                      name="outer_product_grad_right")]

  return mtf.custom_gradient(forward, grad_fn, [left, right])
