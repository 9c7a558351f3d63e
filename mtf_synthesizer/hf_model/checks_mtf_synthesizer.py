# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The checks of the arguments a call of the model gets.

Each raises an error that names the argument, what it got and what it
needs, before torch would fail deep inside the model (or, for an id past
the vocabulary, where the embedding reports it). Shapes and dtypes only:
no check waits for the device. docs/pytorch.md, "What is checked, and
when"; tests/test_bad_input.py.
"""

from typing import Any, Dict, Optional

import torch
from torch import nn

# pylint: disable-next=relative-beyond-top-level
from .configuration_mtf_synthesizer import MtfSynthesizerConfig

# What a forward takes beyond its named arguments: the output flags (the
# stack's, whose `capture_outputs` records the outputs) and generate()'s
# bookkeeping, which the model does not need.
PASSED_KWARGS = frozenset(("output_attentions", "output_hidden_states",
                           "cache_position", "logits_to_keep"))


def check_stack_inputs(prefix: str, b: int, t: int, s: int,
                       attention_mask: Optional[torch.Tensor],
                       position_ids: Optional[torch.Tensor],
                       encoder_hidden_states: Optional[torch.Tensor],
                       encoder_attention_mask: Optional[torch.Tensor]
                      ) -> None:
  """Raises ValueError where a mask or the positions do not fit the call.

  Args:
    prefix: how the caller names the stack's arguments ("decoder_" or "").
    b: the batch.
    t: the new positions.
    s: the positions the self-attention reads (the cache's and the new).
    attention_mask: [b, s], or None.
    position_ids: [b, t], or None.
    encoder_hidden_states: the encoder's output (a decoder's), or None.
    encoder_attention_mask: its mask, or None.
  """
  if attention_mask is not None:
    check_mask(prefix + "attention_mask", attention_mask, b, s,
               "the cache's positions and the new ones")
  if position_ids is not None and tuple(position_ids.shape) != (b, t):
    raise ValueError("%sposition_ids must be [batch, length] = [%d, %d], got "
                     "shape %s" % (prefix, b, t, tuple(position_ids.shape)))
  if encoder_hidden_states is not None and (
      encoder_attention_mask is not None):
    check_mask("attention_mask", encoder_attention_mask, b,
               encoder_hidden_states.shape[1], "the encoder's inputs")


def check_length(has_tables: bool, length: int,
                 config: MtfSynthesizerConfig) -> None:
  """Raises ValueError where a stack with tables reads past them.

  Args:
    has_tables: the stack has a function with a table of positions.
    length: the positions the call reads.
    config: the model's configuration.
  """
  if has_tables and length > config.synthesizer_max_length:
    raise ValueError(
        "a sequence of length %d is longer than max_length %d, the size "
        "of the synthesizing functions' position tables "
        "(synthesizer_max_length)" % (
            length, config.synthesizer_max_length))


def check_ids(name: str, ids: Any) -> None:
  """Raises ValueError unless ids are a non-empty [batch, length] of integers.

  Ids past the vocabulary are found by the embedding (`embed`), which on
  CUDA reports them as a device-side assertion: a check would wait for the
  device at every step.

  Args:
    name: the argument's name.
    ids: the argument.
  """
  if not torch.is_tensor(ids) or ids.dim() != 2:
    raise ValueError("%s must be a [batch, length] tensor of token ids, got "
                     "%s" % (name, tuple(ids.shape) if torch.is_tensor(ids)
                             else type(ids).__name__))
  if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
    raise ValueError("%s must hold token ids of an integer dtype (torch.long),"
                     " got %s" % (name, ids.dtype))
  if ids.numel() == 0:
    raise ValueError("%s is empty (shape %s): a batch needs an example and "
                     "a position" % (name, tuple(ids.shape)))


def check_embeds(name: str, embeds: torch.Tensor, width: int) -> None:
  """Raises ValueError unless embeds are a non-empty [batch, length, width].

  Args:
    name: the argument's name.
    embeds: the argument.
    width: d_model.
  """
  if (embeds.dim() != 3 or embeds.shape[-1] != width or
      embeds.numel() == 0 or not embeds.is_floating_point()):
    raise ValueError("%s must be a non-empty [batch, length, d_model=%d] "
                     "tensor of floats, got shape %s, %s" % (
                         name, width, tuple(embeds.shape), embeds.dtype))


def embed(embedding: nn.Embedding, ids: torch.Tensor,
          name: str) -> torch.Tensor:
  """The embedding of ids; an id outside the vocabulary raises ValueError.

  Args:
    embedding: the token embedding.
    ids: [batch, length] token ids.
    name: the argument's name, for the message.

  Returns:
    [batch, length, d_model].
  """
  if torch.compiler.is_compiling() or torch.jit.is_tracing():
    return embedding(ids)
  try:
    return embedding(ids)
  except IndexError:
    raise ValueError(
        "%s holds an id outside the vocabulary [0, %d) (min %d, max %d)" % (
            name, embedding.num_embeddings, int(ids.min()),
            int(ids.max()))) from None


def check_mask(name: str, mask: Any, batch: int, length: int,
               covers: str) -> None:
  """Raises ValueError unless mask is [batch, length] (1 token, 0 padding).

  Args:
    name: the argument's name.
    mask: the argument.
    batch: the batch.
    length: the positions it must cover.
    covers: what those positions are, for the message.
  """
  if not torch.is_tensor(mask) or mask.dim() != 2 or (
      mask.shape[0] != batch or mask.shape[1] != length):
    raise ValueError(
        "%s must be [batch, positions] = [%d, %d] (1 at tokens, 0 at "
        "padding; the positions: %s), got %s" % (
            name, batch, length, covers,
            tuple(mask.shape) if torch.is_tensor(mask) else
            type(mask).__name__))


def check_labels(name: str, labels: torch.Tensor,
                 logits: Optional[torch.Tensor] = None) -> None:
  """Raises ValueError unless labels are integer ids, one per position.

  Args:
    name: the argument's name.
    labels: the argument.
    logits: the logits they are the targets of, or None (dtype only).
  """
  if labels.is_floating_point() or labels.dtype == torch.bool:
    raise ValueError("%s must hold token ids of an integer dtype (-100: "
                     "ignored), got %s" % (name, labels.dtype))
  if logits is not None and (
      tuple(labels.shape) != tuple(logits.shape[:-1])):
    raise ValueError("%s must be [batch, length] = %s, one per position of "
                     "the logits, got shape %s" % (
                         name, list(logits.shape[:-1]),
                         tuple(labels.shape)))


def check_kwargs(kwargs: Dict[str, Any], model: str) -> None:
  """Raises TypeError on a keyword argument the model would not honour.

  The forwards take `Unpack[TransformersKwargs]`, as transformers' models
  do; those pass on and silently drop what they do not use, where a
  keyword this model does not honour (packed sequences' `cu_seq_lens_q`,
  `is_causal`, a seq2seq's `position_ids`, a misspelling) raises here.

  Args:
    kwargs: the call's keyword arguments beyond the named ones.
    model: the class, for the message.
  """
  if kwargs.get("shift_labels") is not None:
    raise TypeError(
        "%s does not take shift_labels: its labels are the targets of the "
        "decoder inputs (MtfSynthesizerForCausalLM takes them)" % model)
  unknown = sorted(k for k, v in kwargs.items()
                   if v is not None and k not in PASSED_KWARGS)
  if unknown:
    raise TypeError("%s does not support %s" % (model, ", ".join(unknown)))


def check_encoder_decoder(config: MtfSynthesizerConfig, model: str) -> None:
  """Raises ValueError where an encoder-decoder class gets a causal config.

  Args:
    config: the configuration given.
    model: the class, for the message.
  """
  if not config.is_encoder_decoder:
    raise ValueError(
        "%s is an encoder-decoder, and the config has is_encoder_decoder="
        "False (a decoder-only language model): build "
        "MtfSynthesizerForCausalLM from it, or set is_encoder_decoder=True" %
        model)
