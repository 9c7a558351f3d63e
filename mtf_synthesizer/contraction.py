# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Sums of products without a product-sized temporary."""

import math
from typing import List

import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf


def _leading_sums(a: tf.Tensor, b: tf.Tensor, rank: int) -> tf.Tensor:
  """Sums of a * b over all but the first `rank` axes, in pieces of rows.

  TF's einsum runs such a sum (a mixture weight's gradient: per head, over
  an [N, N] table) about four times slower on CPU than a product and a
  sum; this forms the product a piece of rows at a time (8 pieces of the
  [rows, last axis] view; TF's split along the first axis shares its
  input's buffer), so the temporary is an eighth of the inputs' size.

  Args:
    a: a tf.Tensor.
    b: a tf.Tensor of a's shape.
    rank: how many leading axes to keep (at least 1, fewer than a's).

  Returns:
    The sums, shaped like a's first `rank` axes.
  """
  shape = a.shape.as_list()
  rows = math.prod(shape[:-1])
  pieces = 8 if rows % 8 == 0 else 1
  a, b = [tf.reshape(x, [rows, shape[-1]]) for x in (a, b)]
  row_sums = tf.concat([
      tf.reduce_sum(a_piece * b_piece, axis=1)
      for a_piece, b_piece in zip(tf.split(a, pieces), tf.split(b, pieces))
  ], axis=0)
  return tf.reduce_sum(tf.reshape(row_sums, shape[:rank] + [-1]), axis=-1)


class Contraction(mtf.Operation):
  """tf.einsum of its inputs' slices, summed over the mesh axes they split.

  mtf.einsum multiplies inputs that have every dimension element-wise into
  a full-size temporary and then reduces it; this runs TF's einsum on each
  slice (a matrix-vector product, no temporary; two inputs of one shape
  summed to their leading dims take `_leading_sums`) and all-reduces the
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
        return _leading_sums(xs[0], xs[1], len(output_shape.dims))
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
