# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Training a PyTorch Synthesizer as mesh trains: Adafactor and schedule.

`mesh_optimizer(model)` gives mesh's Adafactor (`MeshAdafactor`) and its
learning-rate schedule (`mesh_learning_rate`); with mesh's loss
normalization (`config.loss_denominator = "positions"`, the model's own
loss) a model trains with mesh's losses from the same weights and batches
(tests/test_torch_follows_mesh.py).
"""

from typing import Dict, Optional, Tuple

import torch
from torch import nn
from transformers.optimization import Adafactor


# mesh's AdafactorOptimizer factors the second moment of a variable whose two
# largest dimensions are at least this long (T5's setting).
MIN_DIM_SIZE_TO_FACTOR = 128


def mesh_shapes(model: nn.Module) -> Dict[str, Tuple[int, ...]]:
  """mesh's shape of each parameter (up to order), by name.

  A parameter's own shape, but where a module declares mesh's
  (`mesh_shapes()`: D's and FD's first layer, [d_model, heads, hidden] in
  mesh, [heads * hidden, d_model] here).

  Args:
    model: the model.

  Returns:
    Parameter name -> shape.
  """
  shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
  for prefix, module in model.named_modules():
    declared = getattr(module, "mesh_shapes", None)
    if callable(declared):
      for name, shape in declared().items():
        shapes[prefix + "." + name if prefix else name] = tuple(shape)
  return shapes


def mesh_factored(mesh_shape: Tuple[int, ...],
                  shape: Tuple[int, ...]) -> bool:
  """Whether mesh's Adafactor factors the variable, as PyTorch can.

  mesh factors over the two largest dimensions when both reach
  MIN_DIM_SIZE_TO_FACTOR; transformers' Adafactor over the last two, which
  in this model's layouts are those two. One exception: D's and FD's first
  layer, whose PyTorch weight merges two of mesh's three dimensions, is
  left whole where mesh would factor it (a per-head hidden width or a head
  count of 128 or more).

  Args:
    mesh_shape: the variable's shape in mesh.
    shape: the parameter's shape in PyTorch.

  Returns:
    True to factor the parameter's second moment.
  """
  sizes = sorted(mesh_shape, reverse=True)
  if len(sizes) < 2 or sizes[1] < MIN_DIM_SIZE_TO_FACTOR:
    return False
  return len(shape) >= 2 and sorted(shape[-2:], reverse=True) == sizes[:2]


class MeshAdafactor(Adafactor):
  """transformers' Adafactor with mesh's (and T5's) settings.

  beta1 0 (no momentum), decay rate 1 - (step + 1)^-0.8, update clipping
  at 1, epsilons 1e-30 and 1e-3, the step scaled by the parameter's RMS,
  and the second moment factored where mesh factors it (`mesh_factored`).
  The learning rate comes from a schedule (`mesh_learning_rate`).
  """

  def __init__(self, model: nn.Module, learning_rate: float = 1.0):
    """Creates the optimizer over the model's trainable parameters.

    Args:
      model: the model.
      learning_rate: the base rate (the schedule multiplies it).
    """
    groups = {True: [], False: []}
    shapes = mesh_shapes(model)
    for name, parameter in model.named_parameters():
      if parameter.requires_grad:
        groups[mesh_factored(shapes[name], tuple(parameter.shape))].append(
            parameter)
    super().__init__(
        [{"params": p, "factored": f} for f, p in groups.items() if p],
        lr=learning_rate, eps=(1e-30, 1e-3), clip_threshold=1.0,
        decay_rate=-0.8, beta1=None, weight_decay=0.0,
        scale_parameter=True, relative_step=False, warmup_init=False)

  @staticmethod
  def _get_options(param_group, param_shape):
    return param_group["factored"], param_group["beta1"] is not None


def mesh_learning_rate(step: int, total_steps: Optional[int] = None,
                       warmup_steps: int = 10000,
                       linear_decay_fraction: float = 0.1,
                       constant: Optional[float] = None) -> float:
  """mesh's learning rate at a step (0 at the first update).

  The default is mesh's `learning_rate_schedule_noam`, as T5 pre-trained:
  rsqrt(max(step, warmup_steps)), decaying linearly to 0 over the last
  linear_decay_fraction of total_steps; `constant` gives T5's finetuning
  rate (0.001) instead.

  Args:
    step: the global step.
    total_steps: the training's steps (None: no decay).
    warmup_steps: the rate is constant until here.
    linear_decay_fraction: the decaying end of the training.
    constant: a constant rate instead of the schedule.

  Returns:
    The learning rate.
  """
  if constant is not None:
    return constant
  rate = max(step, warmup_steps)**-0.5
  if total_steps and linear_decay_fraction > 0:
    rate *= min(1.0, (total_steps - step) /
                (total_steps * linear_decay_fraction))
  return rate


def mesh_optimizer(model: nn.Module, total_steps: Optional[int] = None,
                   **schedule) -> Tuple[MeshAdafactor,
                                        torch.optim.lr_scheduler.LambdaLR]:
  """The optimizer and schedule that train a model as mesh trains it.

  With them, set `config.loss_denominator = "positions"` (mesh's loss
  normalization) and `config.dropout_rate` to the mesh run's: from the
  same weights and batches, the losses are mesh's
  (tests/test_torch_follows_mesh.py).

  Args:
    model: a PyTorch Synthesizer (any head).
    total_steps: the training's steps (the schedule's linear decay).
    **schedule: `mesh_learning_rate`'s other arguments (warmup_steps,
      linear_decay_fraction, constant).

  Returns:
    (MeshAdafactor, its LambdaLR): step both after each batch, as
    transformers' Trainer does with `optimizers=(optimizer, schedule)`.
  """
  optimizer = MeshAdafactor(model)
  rate = torch.optim.lr_scheduler.LambdaLR(
      optimizer, lambda step: mesh_learning_rate(step, total_steps,
                                                 **schedule))
  return optimizer, rate
