# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mesh's teacher-forced loss and the stock CLI's eval metrics.

mesh's `Unitransformer._compute_loss`: per position, the cross entropy
log Z - logit_target plus, in training, z_loss * (log Z)^2; positions whose
target is 0 (padding) or negative weigh 0; the sum is divided by the
`loss_denominator` if one is set, else by every position of the targets
(batch x length), padding included. Without label smoothing (mesh's
default). The eval (`utils.tpu_estimator_model_fn`, EVAL) reports that
loss without z_loss, and `neg_log_perplexity`, `token_accuracy` and
`sequence_accuracy` over the positions whose target is > 0.
"""

from typing import Dict, Optional

import jax
import jax.numpy as jnp

Array = jax.Array


def cross_entropy(logits: Array, targets: Array) -> Array:
  """Per position: log Z - logit of the target, and log Z.

  Args:
    logits: [..., vocab].
    targets: [...] ids (a negative id reads id 0, as mesh's one-hot of
      max(targets, 0)).

  Returns:
    (cross entropy, log Z), float32 [...].
  """
  logits = logits.astype(jnp.float32)
  log_z = jax.nn.logsumexp(logits, axis=-1)
  target_logit = jnp.take_along_axis(
      logits, jnp.maximum(targets, 0)[..., None], axis=-1)[..., 0]
  return log_z - target_logit, log_z


def loss(logits: Array, targets: Array, z_loss: float = 1e-4,
         train: bool = True,
         loss_denominator: Optional[float] = None) -> Array:
  """mesh's loss: sum of (xent + z_loss (log Z)^2) at targets > 0 / positions.

  Args:
    logits: [batch, length, vocab].
    targets: [batch, length], 0 at padding.
    z_loss: mesh's `Unitransformer.z_loss` (1e-4 by default).
    train: z_loss applies in training only (mesh's `context.train`).
    loss_denominator: mesh's `loss_denominator`; None: batch x length.

  Returns:
    A float32 scalar.
  """
  xent, log_z = cross_entropy(logits, targets)
  if train and z_loss:
    xent = xent + z_loss * jnp.square(log_z)
  weights = (targets > 0).astype(jnp.float32)
  denominator = (float(targets.size) if loss_denominator is None
                 else float(loss_denominator))
  return jnp.sum(xent * weights) / denominator


def eval_metrics(logits: Array, targets: Array,
                 loss_denominator: Optional[float] = None
                 ) -> Dict[str, Array]:
  """What mesh's teacher-forced eval reports for one batch.

  Args:
    logits: [batch, length, vocab].
    targets: [batch, length], 0 at padding.
    loss_denominator: as `loss`'s.

  Returns:
    "loss" (without z_loss), "neg_log_perplexity" (the mean of -xent at
    targets > 0), "token_accuracy", "sequence_accuracy" (sequences with a
    target, all of whose targets are the argmax).
  """
  xent, _ = cross_entropy(logits, targets)
  weights = (targets > 0).astype(jnp.float32)
  total = jnp.maximum(jnp.sum(weights), 1.0)
  correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32) * weights
  has_targets = (jnp.sum(weights, -1) > 0).astype(jnp.float32)
  sequence_correct = (jnp.sum(correct, -1) == jnp.sum(weights, -1)).astype(
      jnp.float32) * has_targets
  return {
      "loss": loss(logits, targets, 0.0, False, loss_denominator),
      "neg_log_perplexity": -jnp.sum(xent * weights) / total,
      "token_accuracy": jnp.sum(correct) / total,
      "sequence_accuracy": jnp.sum(sequence_correct) / jnp.maximum(
          jnp.sum(has_targets), 1.0),
  }
