# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""TF functions on one device's slice, for the ops' lowerings."""

import math
from typing import Sequence

import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf

# Pieces in which `row_sums_of_products` forms its products.
PIECES = 8


def aligned(x: tf.Tensor, dims: Sequence[mtf.Dimension],
             target: Sequence[mtf.Dimension]) -> tf.Tensor:
  """A slice of x (laid out as `dims`) ready to broadcast against `target`.

  Transposes x to the order its dims have in `target`, then inserts axes of
  size 1 for the dims of `target` that x lacks.

  Args:
    x: a tf.Tensor, the slice of an mtf Tensor with dims `dims`.
    dims: the mtf dims of x, in order.
    target: the mtf dims to broadcast to (a superset of `dims`).

  Returns:
    A tf.Tensor with len(target) axes.
  """
  order = [d for d in target if d in dims]
  x = tf.transpose(x, [list(dims).index(d) for d in order])
  sizes = dict(zip(order, x.shape.as_list()))
  return tf.reshape(x, [sizes.get(d, 1) for d in target])


def row_sums_of_products(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
  """sum(a * b) over the last axis, for every row: [rows].

  The product is formed a piece of rows at a time (`PIECES` pieces of the
  [rows, last axis] view; TF's split along the first axis shares its
  input's buffer), so the largest temporary is a fraction of the inputs.
  TF's einsum runs such a sum several times slower on CPU than a product
  and a sum, and forming a * b whole costs a tensor of the inputs' size
  (2 GiB for one layer's logits at 8192 tokens).

  Args:
    a: a tf.Tensor of known shape.
    b: a tf.Tensor of a's shape.

  Returns:
    A [rows] tensor, rows the product of a's leading dims.
  """
  shape = a.shape.as_list()
  rows = math.prod(shape[:-1])
  a, b = [tf.reshape(x, [rows, shape[-1]]) for x in (a, b)]
  if rows < PIECES:
    return tf.reduce_sum(a * b, axis=1)
  pieces = [rows // PIECES + (i < rows % PIECES) for i in range(PIECES)]
  return tf.concat([
      tf.reduce_sum(a_piece * b_piece, axis=1)
      for a_piece, b_piece in zip(tf.split(a, pieces), tf.split(b, pieces))
  ], axis=0)


def leading_sums(a: tf.Tensor, b: tf.Tensor, rank: int) -> tf.Tensor:
  """Sums of a * b over all but the first `rank` axes.

  Args:
    a: a tf.Tensor of known shape.
    b: a tf.Tensor of a's shape.
    rank: how many leading axes to keep (at least 1, fewer than a's).

  Returns:
    The sums, shaped like a's first `rank` axes.
  """
  shape = a.shape.as_list()
  return tf.reduce_sum(tf.reshape(row_sums_of_products(a, b),
                                  shape[:rank] + [-1]), axis=-1)
