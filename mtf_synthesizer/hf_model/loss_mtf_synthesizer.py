# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mesh's loss: cross entropy and z_loss, divided as mesh or transformers.

The heads' `loss` (`MtfSynthesizerPreTrainedModel._output_loss`) is this
function of the logits and the targets.
"""

from typing import Optional, Union

import torch
from torch import nn


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
