# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Sums of products without a product-sized temporary."""

from typing import List

import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf


class Contraction(mtf.Operation):
  """tf.einsum of its inputs' slices, summed over the mesh axes they split.

  mtf.einsum multiplies inputs that have every dimension element-wise into
  a full-size temporary and then reduces it; this runs TF's einsum on each
  slice (a matrix-vector product, no temporary) and all-reduces the partial
  sums over the mesh axes that split a contracted dimension. It has no
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

    def contract(*xs: tf.Tensor) -> tf.Tensor:
      if not output_shape.dims and len(xs) == 2 and (
          self.inputs[0].shape == self.inputs[1].shape):
        # A dot product: TF's einsum takes several times longer on CPU
        # than a [1, n] x [n, 1] matmul of the flattened slices.
        a, b = [tf.reshape(x, [1, -1]) for x in xs]
        return tf.reshape(tf.matmul(a, b, transpose_b=True), [])
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
      y = mesh_impl.allreduce(y, sorted(split_axes), "SUM")
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
