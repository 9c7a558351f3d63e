# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mesh's Adafactor (T5's optimizer) as an optax transformation.

`AdafactorOptimizer` takes mesh's `AdafactorOptimizer` arguments, with
mesh's defaults (those of t5's operative configs), and chains optax's own
pieces in mesh's order: the factored (or full) second moment with
decay 1 - (step + 1)^-0.8, epsilon1 added to the squared gradient; the
update clipped to RMS <= clipping_threshold; times the learning rate and
the parameter's scale max(RMS(param), epsilon2); momentum beta1 without
bias correction if beta1 > 0; subtracted.

Which dimensions Adafactor factors depends on the variable's shape: mesh
factors the two largest of mesh's variable, and mesh keeps an attention
projection as one matrix [d_model, heads * d_kv] where the Flax model has
[d_model, heads, d_kv]. `mesh_shape` gives each parameter mesh's shape and
the optimizer computes in it, so that a T5-small query kernel is factored
([512, 512]: rows and columns) as mesh factors it, not left whole because
its d_kv (64) is under `min_dim_size_to_factor`.
"""

from typing import Any, Callable, Optional, Sequence, Tuple

import gin
import jax
import jax.numpy as jnp
import optax

# Attention projections: Flax [d, heads, kv] (in) / [heads, kv, d] (out).
_IN_KERNELS = ("query/kernel", "key/kernel", "value/kernel")
_OUT_KERNELS = ("out/kernel",)


def path_name(path: Sequence[Any]) -> str:
  """A pytree path as the "/"-joined names of its dict keys."""
  return "/".join(str(getattr(k, "key", getattr(k, "name", k)))
                  for k in path)


def mesh_shape(path: str, shape: Tuple[int, ...]) -> Tuple[int, ...]:
  """The shape of a Flax parameter's variable in mesh's model.

  Args:
    path: the parameter's "/"-joined path.
    shape: its Flax shape.

  Returns:
    mesh's shape: attention projections as one matrix, others unchanged.
  """
  if len(shape) == 3 and path.endswith(_IN_KERNELS):
    return (shape[0], shape[1] * shape[2])
  if len(shape) == 3 and path.endswith(_OUT_KERNELS):
    return (shape[0] * shape[1], shape[2])
  return tuple(shape)


def _as_mesh_shapes(tree: Any) -> Any:
  return jax.tree_util.tree_map_with_path(
      lambda p, x: jnp.reshape(x, mesh_shape(path_name(p), jnp.shape(x))),
      tree)


def in_mesh_shapes(inner: optax.GradientTransformation
                   ) -> optax.GradientTransformation:
  """`inner` applied to the parameters reshaped to mesh's variables' shapes.

  Args:
    inner: a transformation whose result depends on the shapes (Adafactor).

  Returns:
    The transformation on the Flax tree; its state is in mesh's shapes.
  """

  def init_fn(params):
    return inner.init(_as_mesh_shapes(params))

  def update_fn(updates, state, params=None):
    shapes = jax.tree.map(jnp.shape, updates)
    new, state = inner.update(
        _as_mesh_shapes(updates), state,
        None if params is None else _as_mesh_shapes(params))
    return jax.tree.map(jnp.reshape, new, shapes), state

  return optax.GradientTransformation(init_fn, update_fn)


def _decay_pow(exponent: float, offset: int) -> Callable[..., Any]:
  """mesh's `adafactor_decay_rate_pow`: 1 - (step - offset + 1)^-exponent."""

  def rate(step, unused_rate):
    return 1.0 - jnp.power(jnp.asarray(step, jnp.float32) - offset + 1.0,
                           -exponent)

  return rate


@gin.configurable(module="mtf_synthesizer.flax_train")
def AdafactorOptimizer(  # pylint: disable=invalid-name
    learning_rate: Callable[[Any], Any],
    multiply_by_parameter_scale: bool = True,
    decay_rate: Optional[float] = None,
    decay_exponent: float = 0.8,
    decay_offset: int = 0,
    beta1: float = 0.0,
    clipping_threshold: Optional[float] = 1.0,
    factored: bool = True,
    epsilon1: float = 1e-30,
    epsilon2: float = 1e-3,
    min_dim_size_to_factor: int = 128) -> optax.GradientTransformation:
  """mesh's Adafactor with T5's defaults, on the Flax tree.

  Args:
    learning_rate: the schedule: step -> rate (`schedules`).
    multiply_by_parameter_scale: scale updates by max(RMS(param), epsilon2).
    decay_rate: a constant decay of the second moment; None: mesh's
      `adafactor_decay_rate_pow(decay_exponent, decay_offset)`.
    decay_exponent: that schedule's exponent.
    decay_offset: that schedule's offset (mesh: the step finetuning
      starts at).
    beta1: momentum (0: none).
    clipping_threshold: the update's largest RMS; None: no clipping.
    factored: factor the second moment of matrices.
    epsilon1: added to the squared gradient.
    epsilon2: the smallest parameter scale.
    min_dim_size_to_factor: factor only if the two largest dimensions are
      at least this.

  Returns:
    The optax transformation.
  """
  if decay_rate is None:
    decay_fn = _decay_pow(decay_exponent, decay_offset)
  else:
    decay_fn = lambda step, rate: jnp.float32(rate)
  chain = [optax.scale_by_factored_rms(
      factored=factored, decay_rate=0.0 if decay_rate is None else decay_rate,
      min_dim_size_to_factor=min_dim_size_to_factor, epsilon=epsilon1,
      decay_rate_fn=decay_fn)]
  if clipping_threshold is not None:
    chain.append(optax.clip_by_block_rms(clipping_threshold))
  chain.append(optax.scale_by_learning_rate(learning_rate, flip_sign=False))
  if multiply_by_parameter_scale:
    chain.append(optax.scale_by_param_block_rms(min_scale=epsilon2))
  if beta1:
    chain.append(optax.ema(beta1, debias=False))
  chain.append(optax.scale(-1.0))
  return in_mesh_shapes(optax.chain(*chain))
