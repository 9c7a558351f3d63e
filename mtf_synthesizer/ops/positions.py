# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Positions: where each token is, and tables looked up at positions.

  * `positions_in_segments`: a token's position inside its packed segment;
  * `gather_positions`, `select_positions`: a max_length-sized table read
    at the positions in use (a real gather, with a scatter-add gradient);
  * `write_state`: one decoding step's write into a key/value cache.
"""

from typing import Optional, Sequence

import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf

from mtf_synthesizer.ops import slices


def positions_in_segments(sequence_id: mtf.Tensor,
                          length_dim: mtf.Dimension) -> mtf.Tensor:
  """Each token's position inside its own segment, from the segment ids.

  Segments are runs of equal ids along `length_dim` (as T5 packs them:
  1 1 1 2 2 0 0 gives positions 0 1 2 0 1 0 1). The work is linear in the
  length: a segment-min of the row indices per run, per example.

  Args:
    sequence_id: int Tensor with `length_dim` (batch dims + length).
    length_dim: the length dimension; it must not be split across devices.

  Returns:
    An int32 Tensor shaped like sequence_id.
  """
  axis = sequence_id.shape.dims.index(length_dim)

  def tf_positions(ids):
    ids = tf.cast(ids, tf.int32)
    perm = list(range(ids.shape.ndims))
    perm = perm[:axis] + perm[axis + 1:] + [axis]
    inverse = [perm.index(i) for i in range(len(perm))]
    rows = tf.transpose(ids, perm)
    lead = tf.shape(rows)[:-1]
    rows = tf.reshape(rows, [-1, length_dim.size])
    num_rows = tf.shape(rows)[0]
    starts = tf.concat([
        tf.ones([num_rows, 1], tf.int32),
        tf.cast(tf.not_equal(rows[:, 1:], rows[:, :-1]), tf.int32)], 1)
    # Run number of each token, unique over the whole slice.
    run = (tf.cumsum(starts, axis=1) - 1 +
           length_dim.size * tf.range(num_rows)[:, None])
    index = tf.broadcast_to(tf.range(length_dim.size), tf.shape(rows))
    first = tf.math.unsorted_segment_min(
        tf.reshape(index, [-1]), tf.reshape(run, [-1]),
        num_rows * length_dim.size)
    positions = index - tf.gather(first, run)
    positions = tf.reshape(positions,
                           tf.concat([lead, [length_dim.size]], 0))
    return tf.transpose(positions, inverse)

  return mtf.slicewise(
      tf_positions, [sequence_id], output_shape=sequence_id.shape,
      output_dtype=tf.int32,
      splittable_dims=[d for d in sequence_id.shape.dims if d != length_dim],
      name="positions_in_segments")


def gather_positions(table: mtf.Tensor, position_dim: mtf.Dimension,
                     positions: mtf.Tensor,
                     positions_last: bool = False,
                     batch_dims: Sequence[mtf.Dimension] = ()) -> mtf.Tensor:
  """Looks up `table` along `position_dim` at integer `positions`.

  A real gather (tf.gather on each slice), not mtf.gather's one-hot einsum:
  the work is the size of the output. Dimensions that `table` and `positions`
  share (e.g. batch) are matched, not crossed.

  The gradient is a scatter-add per slice. Where `positions` carries batch
  dims that `table` does not (e.g. R indexed by each example's positions),
  the scatter keeps them and an mtf reduce_sum removes them, so that mesh
  sums the gradient across devices when the batch is split. The other index
  dims (lengths) are summed inside each slice and must not be split.

  Args:
    table: a Tensor with `position_dim`.
    position_dim: the dimension to index.
    positions: an int32 Tensor without `position_dim`.
    positions_last: put the other dims of `positions` after those of `table`
      (the gather is then along the table's innermost axis).
    batch_dims: the batch dims of the model (see above).

  Returns:
    A Tensor with the dims shared by both, then the other dims of
    `positions`, then the other dims of `table` (or the other way round with
    `positions_last`).
  """
  shared = [d for d in positions.shape.dims if d in table.shape.dims]
  index_only = [d for d in positions.shape.dims if d not in shared]
  table_only = [d for d in table.shape.dims
                if d not in shared and d != position_dim]
  if positions_last:
    output_shape = mtf.Shape(shared + table_only + index_only)
    table_dims = shared + table_only + [position_dim]
  else:
    output_shape = mtf.Shape(shared + index_only + table_only)
    table_dims = shared + [position_dim] + table_only
  table_order = [table.shape.dims.index(d) for d in table_dims]
  index_order = [positions.shape.dims.index(d) for d in shared + index_only]
  axis = table_dims.index(position_dim)

  # Without shared dims, a gather smaller than the table (a decoding step's
  # row of R) reads the table in place, along its own position axis, and
  # transposes the gathered rows instead of the whole table.
  in_place = not shared and output_shape.size <= table.shape.size
  native_axis = table.shape.dims.index(position_dim)
  native_dims = (table.shape.dims[:native_axis] + index_only +
                 table.shape.dims[native_axis + 1:])
  native_order = [native_dims.index(d) for d in output_shape.dims]

  def tf_gather(table_slice, positions_slice):
    positions_slice = tf.transpose(positions_slice, index_order)
    if in_place:
      return tf.transpose(
          tf.gather(table_slice, positions_slice, axis=native_axis),
          native_order)
    return tf.gather(tf.transpose(table_slice, table_order), positions_slice,
                     axis=axis, batch_dims=len(shared))

  def forward(t):
    return mtf.slicewise(
        tf_gather, [t, positions], output_shape=output_shape,
        output_dtype=table.dtype, splittable_dims=output_shape.dims,
        name="gather_positions")

  # The gradient: dy is laid out [shared, kept, summed, table_only] and
  # scattered into [shared, kept, position, table_only], then the kept
  # (batch) dims are reduced in mtf.
  kept = [d for d in index_only if d in batch_dims]
  summed = [d for d in index_only if d not in batch_dims]
  scatter_shape = mtf.Shape(shared + kept + [position_dim] + table_only)
  dy_order = [output_shape.dims.index(d)
              for d in shared + kept + summed + table_only]
  positions_order = [positions.shape.dims.index(d)
                     for d in shared + kept + summed]
  num_positions = position_dim.size

  def tf_scatter(dy_slice, positions_slice):
    dy_slice = tf.transpose(dy_slice, dy_order)
    positions_slice = tf.transpose(positions_slice, positions_order)
    lead = tf.shape(positions_slice)[:len(shared) + len(kept)]
    rows = tf.reduce_prod(lead)
    tail = tf.shape(dy_slice)[len(shared) + len(kept) + len(summed):]
    ids = tf.reshape(positions_slice, [rows, -1]) + num_positions * tf.range(
        rows)[:, None]
    data = tf.reshape(dy_slice, tf.concat([[-1], tail], 0))
    out = tf.math.unsorted_segment_sum(data, tf.reshape(ids, [-1]),
                                       rows * num_positions)
    return tf.reshape(out, tf.concat([lead, [num_positions], tail], 0))

  def grad_fn(explicit_inputs, all_inputs, forward_operations, outputs,
              output_grads):
    del explicit_inputs, all_inputs, forward_operations, outputs
    scattered = mtf.slicewise(
        tf_scatter, [output_grads[0], positions], output_shape=scatter_shape,
        output_dtype=output_grads[0].dtype,
        splittable_dims=shared + kept + table_only,
        name="gather_positions_grad")
    return [mtf.reduce_sum(scattered, output_shape=table.shape)]

  return mtf.custom_gradient(forward, grad_fn, [table])


def select_positions(table: mtf.Tensor, position_dim: mtf.Dimension,
                     positions: Optional[mtf.Tensor],
                     new_dim: Optional[mtf.Dimension],
                     batch_dims: Sequence[mtf.Dimension] = ()) -> mtf.Tensor:
  """Truncates or gathers a max_length-sized table to the positions in use.

  Args:
    table: a Tensor with `position_dim` (size max_length).
    position_dim: the table's position dimension.
    positions: None for positions 0..new_dim.size-1, else an int32 Tensor.
    new_dim: the dimension that replaces `position_dim` when `positions` is
      None (the query length or memory length dim).
    batch_dims: the model's batch dims (see `gather_positions`).

  Returns:
    A Tensor.
  """
  if positions is not None:
    return gather_positions(table, position_dim, positions,
                            batch_dims=batch_dims)
  sliced = mtf.slice(table, 0, new_dim.size, position_dim.name)
  return mtf.replace_dimensions(
      sliced, mtf.Dimension(position_dim.name, new_dim.size), new_dim)


def write_state(old: mtf.Tensor, new: mtf.Tensor,
                at_position: mtf.Tensor) -> mtf.Tensor:
  """One decoding step's write into a key/value cache.

  The same values as mesh's `old * (1 - one_hot) + new * one_hot`, in one
  element-wise select laid out as the cache, instead of two products (one of
  them in another layout, then transposed) and a sum over the whole cache.

  Args:
    old: the cache: batch dims, memory length and the other dims of `new`.
    new: this step's keys or values (no memory length dim).
    at_position: bool, true at the memory position being decoded (a subset
      of the dims of `old`).

  Returns:
    A Tensor shaped like `old`.
  """
  dims = old.shape.dims

  def tf_write(old_slice, new_slice, at_slice):
    return tf.where_v2(slices.aligned(at_slice, at_position.shape.dims, dims),
                       slices.aligned(new_slice, new.shape.dims, dims),
                       old_slice)

  return mtf.slicewise(tf_write, [old, mtf.cast(new, old.dtype), at_position],
                       output_shape=old.shape, output_dtype=old.dtype,
                       splittable_dims=dims, name="write_state")
