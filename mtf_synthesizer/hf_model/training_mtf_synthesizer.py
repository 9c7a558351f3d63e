# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Training as mesh trains: its loss, Adafactor and learning-rate schedule."""

from typing import Dict, Optional, Tuple, Union

import torch
from torch import nn
from transformers.optimization import Adafactor


def mesh_loss(logits: torch.Tensor, labels: torch.Tensor, z_loss: float,
              per_position: bool = False,
              num_items_in_batch: Optional[Union[int, torch.Tensor]] = None
              ) -> torch.Tensor:
  """Cross entropy + z_loss * log(Z)^2 of the tokens (labels != -100).

  mesh's loss (`softmax_cross_entropy_with_logits` with z_loss).

  Args:
    logits: [batch, length, vocab].
    labels: [batch, length], -100 where ignored.
    z_loss: the auxiliary loss's weight (0: plain cross entropy).
    per_position: divide the sum by batch x length, as mesh does; else by
      the tokens.
    num_items_in_batch: divide the sum by this instead: the tokens of the
      whole batch when this call sees a part of it (transformers' Trainer
      with gradient accumulation); only with per_position False.

  Returns:
    A scalar.

  Raises:
    ValueError: num_items_in_batch with per_position.
  """
  if num_items_in_batch is not None and per_position:
    raise ValueError(
        "num_items_in_batch counts tokens; loss_denominator='positions' "
        "divides by batch x length (mesh's): give one or the other")
  if isinstance(num_items_in_batch, (int, float)) and num_items_in_batch <= 0:
    raise ValueError("num_items_in_batch must be a count of tokens > 0, got "
                     "%r" % (num_items_in_batch,))
  positions = labels.numel()
  logits = logits.float().reshape(-1, logits.shape[-1])
  labels = labels.reshape(-1)
  keep = labels != -100
  # One pass over the vocabulary: cross entropy, then log(Z) from it and
  # the label's logit (log Z = logit_y - log p_y = logit_y + xent).
  try:
    per_token = nn.functional.cross_entropy(
        logits, labels, ignore_index=-100, reduction="none")
  except IndexError:  # a CPU's report (CUDA's is a device-side assertion)
    raise ValueError(
        "labels hold an id outside the vocabulary [0, %d) (or -100: "
        "ignored)" % logits.shape[-1]) from None
  if z_loss:
    log_z = logits.gather(1, labels.clamp(min=0)[:, None])[:, 0] + per_token
    per_token = per_token + z_loss * (log_z.square() * keep)
  total = per_token.sum()
  if num_items_in_batch is not None:
    if torch.is_tensor(num_items_in_batch):
      num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch
  if per_position:
    return total / positions
  return total / keep.sum().clamp(min=1)


# ---------------------------------------------------------------------------
# Training as mesh trains: its Adafactor and learning-rate schedule.

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

  def __init__(self, model: "MtfSynthesizerPreTrainedModel",
               learning_rate: float = 1.0):
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
