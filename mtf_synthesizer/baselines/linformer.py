# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Linformer self-attention (Wang et al. 2020) as a mesh attention layer.

For each head, the keys and values are projected along the length axis to a
fixed size k before the dot product:

    K' = E^T K,   V' = F^T V,   Y = softmax(Q K'^T) V'      (E, F: [N, k])

so that the attention weights are [length, k] instead of [length, length].
N (`max_length`) is the length the projections are learned for; shorter
sequences use the first rows of E and F, which is the same as padding them
to N with zeros. Padded keys and values are zeroed before the projection, so
padding does not contribute.

The Linformer paper's parameter sharing options are arguments:
`headwise_sharing` (one E and F for all heads of a layer) and
`key_value_sharing` (F = E). Its third option, sharing across layers, is not
implemented: each layer has its own projections.

What the layer refuses, at graph-build time, with a message that says why:
causal use (a decoder's or language model's self-attention: the projection
mixes every position into every projected key), incremental decoding, and
packed batches (several examples in one row share one length projection).
It has no relative position bias (Linformer has none): T5's
`SelfAttention.relative_attention_type` binding does not apply to it. The
query, key, value and output projections are mesh's, as in SelfAttention,
including the 1/sqrt(d_kv) scaling folded into the query initializer; their
inherited gin bindings (num_heads, key_value_size, dropout_rate) apply.
"""

import math
from typing import List, Optional

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer_layers
import tensorflow.compat.v1 as tf

from mtf_synthesizer.core import layer as layer_lib
from mtf_synthesizer.ops import softmax as softmax_lib

_ATTENTION_KWARGS = frozenset(
    ["dropout_rate", "dropout_broadcast_dims", "float32_logits"])
PROJECTED_LENGTH = "linformer_k"    # the k axis of E and F
PROJECTION_LENGTH = "linformer_length"  # the N axis of E and F


def _unsupported_settings(layer: transformer_layers.SelfAttention
                         ) -> List[str]:
  """Inherited SelfAttention settings that LinformerAttention cannot honour.

  Args:
    layer: the layer, after SelfAttention.__init__ has stored its settings.

  Returns:
    A list of "binding: reason" strings, empty when all are honoured.
  """
  problems = []
  if layer.attention_func is not None:
    problems.append("attention_func=%r" % layer.attention_func)
  if (layer.use_hyperprompt or layer.hyperprompt_length_encoder or
      layer.hyperprompt_length_decoder):
    problems.append("use_hyperprompt / hyperprompt_length_*")
  if layer.shared_kv:
    problems.append("shared_kv=True (one projection for keys and values; "
                    "Linformer's F = E is key_value_sharing=True)")
  if layer.num_memory_heads:
    problems.append("num_memory_heads=%d" % layer.num_memory_heads)
  if layer.keep_query_heads_dims:
    problems.append("keep_query_heads_dims=True")
  if layer.z_loss_coeff is not None:
    problems.append("z_loss_coeff=%r" % layer.z_loss_coeff)
  if not layer.attention_kwargs.get("float32_logits", True):
    problems.append("attention_kwargs float32_logits=False")
  unknown = set(layer.attention_kwargs) - _ATTENTION_KWARGS
  if unknown:
    problems.append("attention_kwargs %s (supported: %s)" % (
        sorted(unknown), sorted(_ATTENTION_KWARGS)))
  return problems


@gin.configurable(module="mtf_synthesizer")
class LinformerAttention(transformer_layers.SelfAttention):
  """Multi-head self-attention with keys and values projected along length.

  For encoders and encoder-only models: see the module docstring.
  """

  def __init__(self,
               k: int = 128,
               max_length: Optional[int] = None,
               headwise_sharing: bool = False,
               key_value_sharing: bool = False,
               **kwargs):
    """Creates the layer.

    Args:
      k: the projected length (the size of K' and V' along length).
      max_length: N, the number of rows of E and F; sequences may be shorter,
        not longer. None: the length of the sequences the layer is built
        with (the Linformer paper's fixed n).
      headwise_sharing: one E (and F) for all heads of the layer, instead of
        one per head.
      key_value_sharing: F = E (a single projection, variable "E").
      **kwargs: passed to mesh's SelfAttention (num_heads, key_value_size,
        dropout_rate, ...).

    Raises:
      ValueError: for a relative position bias, a non-positive k or
        max_length, or SelfAttention settings the layer cannot honour.
    """
    relative = kwargs.pop("relative_attention_type", None)
    if relative is not None:
      raise ValueError(
          "LinformerAttention has no relative position bias (Linformer has "
          "none); got relative_attention_type=%r." % (relative,))
    # Explicitly None: T5's SelfAttention.relative_attention_type binding
    # reaches this subclass otherwise.
    super().__init__(relative_attention_type=None, **kwargs)
    if k < 1:
      raise ValueError("LinformerAttention.k must be positive, got %r" % (k,))
    if max_length is not None and max_length < 1:
      raise ValueError("LinformerAttention.max_length must be positive or "
                       "None, got %r" % (max_length,))
    self.k = k
    self.max_length = max_length
    self.headwise_sharing = headwise_sharing
    self.key_value_sharing = key_value_sharing
    problems = _unsupported_settings(self)
    if problems:
      raise ValueError(
          "LinformerAttention cannot honour these SelfAttention settings "
          "(bound in gin for SelfAttention, which it inherits): %s."
          % "; ".join(problems))

  @property
  def projected_dim(self) -> mtf.Dimension:
    """The k axis of E, F, K' and V'."""
    return mtf.Dimension(PROJECTED_LENGTH, self.k)

  def _refuse(self, context) -> None:
    """Raises ValueError where Linformer is not defined.

    Args:
      context: a transformer.Context.
    """
    if context.mode in ("incremental", "first_part"):
      raise ValueError(
          "LinformerAttention cannot decode incrementally (context.mode %r): "
          "every projected key mixes all positions, so it cannot be built one "
          "token at a time. Use it in an encoder (or an encoder-only model), "
          "not in a decoder or language model." % (context.mode,))
    if (getattr(context.model, "fully_autoregressive", False) or
        context.read_priority is not None or
        context.write_priority is not None):
      raise ValueError(
          "LinformerAttention is not causal: the length projection mixes "
          "future positions into every projected key. Use it in an encoder "
          "(encoder/transformer.make_layer_stack.layers) or an encoder-only "
          "model (utils.run.model_type = 'aligned'), not in a decoder or "
          "language model.")
    if layer_lib.packed_sequence_id(context) is not None:
      raise ValueError(
          "LinformerAttention cannot take packed batches (several examples "
          "in one row): one length projection would mix them. Bind "
          "--gin_param=\"mesh_train_dataset_fn.pack = False\" (and for "
          "evaluation mesh_eval_dataset_fn.pack = False where it is used).")

  def _length_size(self, memory_length: mtf.Dimension) -> int:
    """N for these sequences; raises ValueError if they are longer."""
    size = self.max_length or memory_length.size
    if memory_length.size > size:
      raise ValueError(
          "LinformerAttention got a sequence of length %d but its max_length "
          "(the rows of E and F) is %d. Raise it with --gin_param=\""
          "LinformerAttention.max_length = %d\" or shorten the sequences."
          % (memory_length.size, size, memory_length.size))
    return size

  def _projection(self, context, name: str, heads_dims: List[mtf.Dimension],
                  memory_length: mtf.Dimension) -> mtf.Tensor:
    """E or F, its first rows renamed to the memory length.

    Args:
      context: a transformer.Context.
      name: "E" or "F".
      heads_dims: the heads dimensions of the keys ([] with one head).
      memory_length: the keys' length dimension.

    Returns:
      [heads (unless shared)] + [memory_length, k].
    """
    size = self._length_size(memory_length)
    rows = mtf.Dimension(PROJECTION_LENGTH, size)
    shape = ([] if self.headwise_sharing else list(heads_dims)) + [
        rows, self.projected_dim]
    weights = mtf.get_variable(
        context.mesh, name, mtf.Shape(shape),
        initializer=tf.random_normal_initializer(
            stddev=1.0 / math.sqrt(size)),
        dtype=context.variable_dtype)
    if memory_length.size < size:
      weights = mtf.slice(weights, 0, memory_length.size, PROJECTION_LENGTH)
    return mtf.replace_dimensions(
        weights, mtf.Dimension(PROJECTION_LENGTH, memory_length.size),
        memory_length)

  @staticmethod
  def _nonpadding(context, memory_length: mtf.Dimension
                  ) -> Optional[mtf.Tensor]:
    """1.0 at real tokens, 0.0 at padding, on the memory length; or None.

    The unpacked encoder's `sequence_id` (mesh's mtf.minimum(inputs, 1)) when
    there is one, else the input tokens (0 is padding), as an encoder-only
    model without packing has no sequence_id.

    Args:
      context: a transformer.Context.
      memory_length: the keys' length dimension.

    Returns:
      A float Tensor [batch dims, memory_length], or None when nothing marks
      padding.
    """
    marks = None
    if isinstance(context.sequence_id, mtf.Tensor):
      marks = context.sequence_id
    elif (isinstance(context.inputs, mtf.Tensor) and
          context.length_dim in context.inputs.shape.dims):
      marks = context.inputs
    if marks is None:
      return None
    mask = mtf.cast(mtf.not_equal(marks, 0), context.activation_dtype)
    return mtf.replace_dimensions(mask, context.length_dim, memory_length)

  def call(self, context, x, losses=None):
    """Calls the layer.

    Args:
      context: a transformer.Context.
      x: the layer input: batch dims + length + model dim.
      losses: unused.

    Returns:
      A Tensor shaped like x.

    Raises:
      ValueError: in a causal stack, in incremental decoding, for packed
        batches, or for sequences longer than max_length.
    """
    del losses
    self._refuse(context)
    params = self.make_params(context)
    memory_length = self.memory_length(context)
    m = mtf.replace_dimensions(x, context.length_dim, memory_length)
    q = params.compute_q(x)
    keys = params.compute_k(m)
    values = params.compute_v(m)
    nonpadding = self._nonpadding(context, memory_length)
    if nonpadding is not None:  # padded keys and values contribute nothing
      keys *= nonpadding
      values *= nonpadding
    heads_dims = list(params.memory_heads_dims or [])
    e = self._projection(context, "E", heads_dims, memory_length)
    f = e if self.key_value_sharing else self._projection(
        context, "F", heads_dims, memory_length)
    projected_shape = mtf.Shape(
        [d for d in keys.shape.dims if d != memory_length] +
        [self.projected_dim])
    projected_shape = projected_shape - [self.kv_dim] + [self.kv_dim]
    projected_keys = mtf.einsum([keys, e], output_shape=projected_shape)
    projected_values = mtf.einsum([values, f], output_shape=projected_shape)
    logits = mtf.einsum(
        [q, projected_keys],
        output_shape=q.shape - [self.kv_dim] + [self.projected_dim])
    weights = softmax_lib.softmax(mtf.cast(logits, tf.float32),
                                self.projected_dim, context)
    kwargs = self.attention_kwargs_from_context(context)
    dropout_rate = kwargs.get("dropout_rate", 0.0)
    if context.train and dropout_rate > 0.0:
      broadcast_dims = kwargs.get("dropout_broadcast_dims") or []
      weights = mtf.dropout(weights, context.train, rate=dropout_rate,
                            noise_shape=weights.shape - broadcast_dims)
    weights = mtf.cast(weights, projected_values.dtype)
    o = mtf.einsum([weights, projected_values], output_shape=q.shape)
    return params.compute_output(o, output_shape=x.shape)
