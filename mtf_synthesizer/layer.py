# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""SynthesizerAttention: a mesh SelfAttention whose logits are synthesized.

    Y = softmax(S(X) + bias) G(X)

S is one synthesizing function or a mixture of several (`synthesizers.py`);
bias is mesh's (causal and segment masks, relative position bias); G(X) is the
value projection. Everything else is inherited from mesh's SelfAttention, so
its gin bindings (num_heads, key_value_size, dropout_rate,
relative_attention_type, ...) apply to this layer too: the constructor
declares only the arguments that are new.
"""

from typing import Optional, Sequence

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer_layers
import tensorflow.compat.v1 as tf

from mtf_synthesizer import release
from mtf_synthesizer import synthesizers as synth_lib

_ATTENTION_KWARGS = frozenset(
    ["dropout_rate", "dropout_broadcast_dims", "extra_logit",
     "float32_logits"])


@gin.configurable(module="mtf_synthesizer")
class SynthesizerAttention(transformer_layers.SelfAttention):
  """Multi-head self-attention with synthesized attention weights."""

  def __init__(self,
               synthesizers: Optional[
                   Sequence[synth_lib.SynthesizingFunction]] = None,
               max_length: int = 512,
               learned_mixture_weights: bool = True,
               synthesize_mode: Optional[str] = None,
               **kwargs):
    """Creates the layer.

    Args:
      synthesizers: the synthesizing functions; several make a Mixture (eq.
        8). Default: [Random()].
      max_length: N, the size of the position-indexed parameters; sequences
        may be shorter (the parameters are truncated), not longer.
      learned_mixture_weights: for several synthesizers: learn weights that
        sum to one (paper), or add them with weight one.
      synthesize_mode: instead of `synthesizers`, one of the original
        release's mode strings (see release.MODES).
      **kwargs: passed to mesh's SelfAttention.
    """
    super().__init__(**kwargs)
    if synthesize_mode is not None:
      if synthesizers is not None:
        raise ValueError("Give SynthesizerAttention either synthesizers or "
                         "synthesize_mode, not both.")
      synthesizers, learned_mixture_weights = release.composition(
          synthesize_mode)
    elif synthesizers is None:
      synthesizers = [synth_lib.Random()]
    if max_length < 1:
      raise ValueError("max_length must be positive, got %r" % (max_length,))
    self.synthesizer = synth_lib.compose(synthesizers, learned_mixture_weights)
    self.max_length = max_length
    unknown = set(self.attention_kwargs) - _ATTENTION_KWARGS
    if unknown:
      raise ValueError("SynthesizerAttention does not support attention_kwargs"
                       " %s (supported: %s)." % (sorted(unknown),
                                                 sorted(_ATTENTION_KWARGS)))
    if (self.relative_attention_type == "contextual" and
        not self.synthesizer.needs_queries):
      raise ValueError(
          "relative_attention_type='contextual' needs queries, which this "
          "synthesizer does not compute; use 'bias' or 'bias_shared'.")

  def make_params(self, context):
    # Queries and keys exist only when a synthesizing function uses them; the
    # value projection alone is the shared "kv" variable (as in the release).
    return transformer_layers.attention_params(
        context=context,
        kv_dim=self.kv_dim,
        num_heads=self.num_heads,
        num_memory_heads=self.num_memory_heads,
        shared_kv=not self.synthesizer.needs_keys,
        no_query=not self.synthesizer.needs_queries,
        combine_dims=self.combine_dims,
        keep_query_heads_dims=self.keep_query_heads_dims,
        fold_scaling_into_initializer=self.fold_scaling_into_initializer)

  def _check_lengths(self, context, memory_length):
    longest = max(context.length_dim.size, memory_length.size)
    if longest > self.max_length:
      raise ValueError(
          "SynthesizerAttention got a sequence of length %d but its "
          "max_length is %d (the size of its position-indexed parameters). "
          "Raise it with --gin_param=\"SynthesizerAttention.max_length = "
          "%d\" or shorten the sequences." % (longest, self.max_length,
                                              longest))

  def call(self, context, x, losses=None):
    """Calls the layer.

    Args:
      context: a transformer.Context.
      x: the layer input: batch dims [+ length] + model dim.
      losses: unused; the layer adds its auxiliary losses to context.losses.

    Returns:
      A Tensor shaped like x.
    """
    del losses
    incremental = context.mode == "incremental"
    params = self.make_params(context)
    synth = self.synthesizer
    memory_length = self.memory_length(context)
    self._check_lengths(context, memory_length)
    m = x if incremental else mtf.replace_dimensions(
        x, context.length_dim, memory_length)
    q = params.compute_q(x) if synth.needs_queries else None
    if synth.needs_keys:
      states = [params.compute_k(m), params.compute_v(m)]
    else:
      states = [params.compute_kv(m)]
    if incremental:
      one_hot = mtf.one_hot(context.position, memory_length,
                            dtype=context.activation_dtype)
      old_states = context.get_states(len(states))
      states = [old * (1.0 - one_hot) + new * one_hot
                for old, new in zip(old_states, states)]
      memory_position = mtf.range(context.mesh, memory_length, tf.int32)
    else:
      memory_position = self.rename_length_to_memory_length(
          context.position, context)
    if incremental or context.mode == "first_part":
      context.record_new_states(states)
    k, v = (states[0], states[1]) if synth.needs_keys else (None, states[0])

    if incremental:
      query_positions, memory_positions = context.position, None
    elif context.position_is_default:
      query_positions, memory_positions = None, None
    else:  # packed: positions inside each segment
      query_positions, memory_positions = context.position, memory_position
    inputs = synth_lib.SynthesisInputs(
        x=x,
        model_dim=context.model.model_dim,
        heads_dims=list(params.query_heads_dims or []),
        length_dim=None if incremental else context.length_dim,
        memory_length_dim=memory_length,
        query_positions=query_positions,
        memory_positions=memory_positions,
        max_length=self.max_length,
        key_dim=self.kv_dim,
        variable_dtype=context.variable_dtype,
        queries=q,
        keys=k,
        write_summaries=context.train)
    logits = synth(inputs)
    bias = self.compute_bias(context, memory_position, x,
                             params.query_heads_dims, q)
    o = self._attend(context, logits, bias, v, x, inputs.heads_dims)
    attention_output = params.compute_output(
        o, output_shape=self.expected_attention_output_shape(x, params))
    return self.layer_output_from_attention_output(context, attention_output,
                                                   None)

  def _attend(self, context, logits, bias, v, x, heads_dims):
    """softmax(logits + bias) with dropout, times the values."""
    kwargs = self.attention_kwargs_from_context(context)
    memory_length = self.memory_length(context)
    if bias is not None:
      logits += mtf.cast(bias, tf.float32)
    if self.z_loss_coeff is not None and context.train:
      log_z = mtf.reduce_logsumexp(logits, memory_length)
      z_loss = mtf.reduce_mean(
          mtf.square(log_z) * mtf.cast(context.nonpadding, log_z.dtype))
      if context.num_microbatches and context.num_microbatches > 1:
        z_loss /= context.num_microbatches
      context.losses.append(mtf.cast(z_loss * self.z_loss_coeff, v.dtype))
    weights = mtf.softmax(logits, memory_length,
                          extra_logit=kwargs.get("extra_logit"))
    output_dims = x.shape.dims[:-1] + heads_dims + [self.kv_dim]
    dropout_rate = kwargs.get("dropout_rate", 0.0)
    if context.train and dropout_rate > 0.0:
      # Weights that do not depend on the example (R, FR) still get an
      # independent dropout mask per example.
      batch_dims = [d for d in context.batch_dims if d not in weights.shape]
      if batch_dims:
        weights = mtf.broadcast(weights, mtf.Shape(batch_dims) + weights.shape)
      broadcast_dims = kwargs.get("dropout_broadcast_dims") or []
      weights = mtf.dropout(weights, context.train, rate=dropout_rate,
                            noise_shape=weights.shape - broadcast_dims)
    weights = mtf.cast(weights, v.dtype)
    return mtf.einsum([weights, v], output_shape=mtf.Shape(output_dims))
