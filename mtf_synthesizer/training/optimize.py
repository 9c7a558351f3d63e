# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mesh's Adafactor update with fewer passes over large variables.

A Random Synthesizer's table R is [heads, N, N] per layer: at N = 8192 and 8
heads, 2 GiB, as large as vanilla attention's logits at batch 1. mesh's
`AdafactorOptimizer.apply_grad` (mesh-tensorflow 0.1.21) makes about a dozen
full-size passes over such a variable per step, most of them through
full-size temporaries: the squared gradient and its epsilon, the square and
mean for the parameter scale, the update x = g * r * c built in two
products, its square and mean for the clipping, and two more products
(clipping and learning rate) before `assign_sub`.

`LeanAdafactorOptimizer` computes the same update (same slots, names,
hyperparameters and defaults; a drop-in for checkpoints) with fewer passes
where the second moment is factored:

  * mean(g^2 + eps1) is computed as mean(g^2) + eps1 (no full-size sum),
    its row and column sums as contractions with ones;
  * the parameter scale's mean of squares is one dot product of the
    variable with itself (no full-size square);
  * the clipping's mean of x^2 = sum_ij g_ij^2 r_i^2 c_j^2 / n is a
    contraction of g^2 with c^2 and then with r^2 (x is never squared);
  * the clipping and learning-rate scalars multiply the small row factor r,
    and the update g * (r * scale) / sqrt(v_c) runs in the gradient's
    buffer (`_scale_rows_and_columns`);
  * the variable is decremented in place (`tf.assign_sub`);
  * the factored variables' statistics are computed one variable at a
    time, after the backward pass (`one_variable_at_a_time`), so at most
    one full-size g^2 temporary is live, and not beside the backward
    pass's largest tensors.

Variables with fewer than two dimensions of at least
`min_dim_size_to_factor` keep a full-size second moment v, updated as
mesh's, except that:

  * v (and the momentum m of any variable) is read only once the
    gradient exists: mesh's v * decay_rate needs nothing else, so TF may
    run it when the step starts and hold a variable-sized result through
    the backward pass (tests/test_optimize.py checks that no
    variable-sized op of an update comes before its gradient);
  * rms(x) for the clipping is a dot product of x with itself, and the
    clipping and learning-rate scalars are multiplied together before x.

The values differ from mesh's by float rounding only
(tests/test_optimize.py checks both over several steps and shapes). Select
it with `gin/synthesizer/lean_adafactor.gin` or
`utils.run.optimizer = @mtf_synthesizer.LeanAdafactorOptimizer`; the
`AdafactorOptimizer.*` gin bindings of a T5 operative config apply to it.
"""

from typing import List, Optional, Union

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow import optimize
import tensorflow.compat.v1 as tf

from mtf_synthesizer.ops import order
from mtf_synthesizer.ops import products
from mtf_synthesizer.ops import slices


def _scale_rows_and_columns(grad: mtf.Tensor, row_scale: mtf.Tensor,
                            col_norm: mtf.Tensor) -> mtf.Tensor:
  """grad * row_scale / col_norm, each factor broadcast over grad's dims.

  A product and then a quotient: TF's graph optimizer turns two products
  of a tensor by small broadcast factors into one product by the factors'
  full-size outer product (its "minimize broadcasts" rewrite), a
  temporary as large as the variable; this way both ops run in grad's
  buffer.
  """
  def fn(g, r, c):
    return (g * slices.aligned(r, row_scale.shape.dims, grad.shape.dims)
            / slices.aligned(c, col_norm.shape.dims, grad.shape.dims))
  return mtf.slicewise(fn, [grad, row_scale, col_norm],
                       output_shape=grad.shape, output_dtype=grad.dtype,
                       splittable_dims=grad.shape.dims, name="scale")


def _assign_sub_in_place(variable: mtf.Variable, slice_var: tf.Variable,
                         val: tf.Tensor) -> tf.Operation:
  """mesh's assign_sub_slice, as one in-place op (no var - val temporary)."""
  return tf.assign_sub(slice_var, tf.cast(val, variable.slice_dtype))


@gin.configurable(module="mtf_synthesizer")
class LeanAdafactorOptimizer(optimize.AdafactorOptimizer):
  """mesh's Adafactor, computed with fewer full-size temporaries.

  Takes mesh's `AdafactorOptimizer` arguments (module docstring).
  """

  def __init__(self, one_variable_at_a_time: bool = True, **kwargs):
    """Creates the optimizer.

    Args:
      one_variable_at_a_time: compute the factored variables' statistics one
        variable after another, in the variables' order. The first
        variables' gradients are the backward pass's last, so the updates
        then run after the backward pass: no g^2 temporary is live beside
        its largest tensors (R's at long sequences) or beside another's,
        while every factored variable's gradient stays live until its
        update. False lets TF run each update as soon as its gradient
        exists.
      **kwargs: mesh's `AdafactorOptimizer` arguments.
    """
    super().__init__(**kwargs)
    self._one_variable_at_a_time = one_variable_at_a_time
    # Within apply_grads: the last factored variable's statistics (a scalar
    # computed after every use of its g^2), which the next one waits for.
    self._previous_statistics = None

  def apply_grads(self, grads: List[Optional[mtf.Tensor]],
                  variables: List[mtf.Variable]) -> List[mtf.Operation]:
    """The update operations of all variables (see `apply_grad`).

    Args:
      grads: the variables' gradients (None for those without one).
      variables: the variables.

    Returns:
      The assign operations.
    """
    self._previous_statistics = None
    try:
      return super().apply_grads(grads, variables)
    finally:
      self._previous_statistics = None

  def _lean_parameter_scale(self, var: mtf.Tensor) -> mtf.Tensor:
    """mesh's `_parameter_scale` (RMS, at least epsilon2) without var^2.

    Args:
      var: the variable's current value (float32).

    Returns:
      The scale, shaped like the variable's stacked dimensions.
    """
    output_shape = [
        d for d in var.shape.dims if d.name in self._stacked_dim_names]
    count = var.shape.size // mtf.Shape(output_shape).size
    mean_square = products.contract([var, var], output_shape) * (1.0 / count)
    return mtf.maximum(mtf.sqrt(mean_square), self._epsilon2)

  def _update_scale(self, var: mtf.Variable
                    ) -> Union[float, mtf.Tensor, tf.Tensor]:
    """The learning rate, times the parameter scale where mesh applies it.

    Args:
      var: the variable.

    Returns:
      A scalar, or a tensor of the variable's stacked dimensions.
    """
    if self._multiply_by_parameter_scale and not any(
        s in var.name for s in self._exclude_from_parameter_scale):
      return (self._lean_parameter_scale(mtf.to_float(var.value))
              * self._learning_rate)
    return self._learning_rate

  def _momentum_slot(self, var: mtf.Variable) -> Optional[mtf.Tensor]:
    """The first-moment slot m if beta1 is set, else None."""
    if not self._beta1:
      return None
    return mtf.get_variable(
        var.mesh, var.name + "_slot_m", var.shape,
        initializer=tf.zeros_initializer(), trainable=False)

  def _subtract(self, var: mtf.Variable, m: Optional[mtf.Tensor],
                subtrahend: mtf.Tensor, grad: mtf.Tensor
                ) -> List[mtf.Operation]:
    """The momentum's and the variable's assignments for an update.

    Args:
      var: the variable.
      m: its first-moment slot, or None.
      subtrahend: the update before momentum.
      grad: the variable's gradient; m is read once it exists.

    Returns:
      The assign operations.
    """
    updates = []
    if m is not None:
      new_m = (order.after(m, grad) * tf.constant(self._beta1)
               + subtrahend * tf.constant(1.0 - self._beta1))
      subtrahend = new_m
      updates.append(mtf.assign(m, new_m))
    # Subtracted, as mesh's, so bfloat16 variables are rounded once.
    updates.append(mtf.assign(var, subtrahend,
                              assign_fn=_assign_sub_in_place))
    return updates

  def apply_grad(self, grad: mtf.Tensor,
                 var: mtf.Variable) -> List[mtf.Operation]:
    """The update operations of one variable (mesh's, see the module).

    Args:
      grad: the variable's gradient, or None.
      var: the variable.

    Returns:
      The assign operations (slots and variable).
    """
    if grad is None:
      return super().apply_grad(grad, var)
    if not self._factored_dims(var.shape):
      return self._apply_unfactored(mtf.to_float(grad), var)
    return self._apply_factored(mtf.to_float(grad), var)

  def _apply_unfactored(self, grad: mtf.Tensor,
                        var: mtf.Variable) -> List[mtf.Operation]:
    """`apply_grad` with a full-size second moment v (grad in float32)."""
    v = mtf.get_variable(
        var.mesh, var.name + "_slot_v", var.shape,
        initializer=tf.zeros_initializer(), trainable=False)
    m = self._momentum_slot(var)
    with tf.variable_scope(var.name + "/adafactor"):
      decay_rate = self._decay_rate
      update_scale = self._update_scale(var)
      # The slot is read once the gradient exists: v * decay_rate needs
      # nothing else, and TF would run it when the step starts and hold
      # its variable-sized result through the backward pass.
      new_v = (order.after(v, grad) * decay_rate
               + (mtf.square(grad) + self._epsilon1) * (1.0 - decay_rate))
      updates = [mtf.assign(v, new_v)]
      x = grad * mtf.rsqrt(new_v)
      if self._clipping_threshold is not None:
        # rms(x) from a dot product of x with itself (x is not squared).
        mean_square = products.contract([x, x], []) * (1.0 / var.shape.size)
        clipping_denom = mtf.maximum(
            1.0, mtf.sqrt(mean_square) / self._clipping_threshold)
        update_scale = mtf.reciprocal(clipping_denom) * update_scale
      return updates + self._subtract(var, m, x * update_scale, grad)

  def _apply_factored(self, grad: mtf.Tensor,
                      var: mtf.Variable) -> List[mtf.Operation]:
    """`apply_grad` with a factored second moment (grad in float32)."""
    previous = self._previous_statistics
    if (self._one_variable_at_a_time and previous is not None
        and previous.mesh is grad.mesh):
      grad = order.after(grad, previous)  # see __init__
    d0, d1 = self._factored_dims(var.shape)
    vr_shape = var.shape - d0
    vc_shape = var.shape - d1
    vr = mtf.get_variable(
        var.mesh, var.name + "_slot_vr", vr_shape,
        initializer=tf.zeros_initializer(), trainable=False)
    vc = mtf.get_variable(
        var.mesh, var.name + "_slot_vc", vc_shape,
        initializer=tf.zeros_initializer(), trainable=False)
    m = self._momentum_slot(var)

    with tf.variable_scope(var.name + "/adafactor"):
      decay_rate = self._decay_rate
      mixing_rate = 1.0 - decay_rate
      update_scale = self._update_scale(var)
      grad_squared = mtf.square(grad)
      # mean(g^2 + eps1) = mean(g^2) + eps1; the sums are contractions with
      # ones (TF's reduction over a leading axis is the slower one).
      row_mean = products.contract(
          [grad_squared, mtf.ones(var.mesh, vc_shape)],
          vr_shape.dims) * (1.0 / d0.size)
      col_mean = products.contract(
          [grad_squared, mtf.ones(var.mesh, vr_shape)],
          vc_shape.dims) * (1.0 / d1.size)
      new_vr = vr * decay_rate + (row_mean + self._epsilon1) * mixing_rate
      new_vc = vc * decay_rate + (col_mean + self._epsilon1) * mixing_rate
      updates = [mtf.assign(vr, new_vr), mtf.assign(vc, new_vc)]
      long_term_mean = mtf.reduce_mean(new_vr, reduced_dim=d1)
      r_factor = mtf.rsqrt(new_vr / long_term_mean)
      c_factor = mtf.rsqrt(new_vc)
      if self._clipping_threshold is not None:
        # mean(x^2) for x = g * r * c, without forming x.
        rows = products.contract([grad_squared, mtf.square(c_factor)],
                                    vr_shape.dims)
        mean_square = (mtf.reduce_sum(rows * mtf.square(r_factor))
                       * (1.0 / var.shape.size))
        clipping_denom = mtf.maximum(
            1.0, mtf.sqrt(mean_square) / self._clipping_threshold)
        r_factor /= clipping_denom
      # Every use of grad_squared comes before r_factor and c_factor.
      self._previous_statistics = (mtf.reduce_sum(r_factor)
                                   + mtf.reduce_sum(c_factor))
      # x = g * r * c, as g * (r * scale) / sqrt(v_c).
      subtrahend = _scale_rows_and_columns(grad, r_factor * update_scale,
                                           mtf.sqrt(new_vc))
      return updates + self._subtract(var, m, subtrahend, grad)
