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

from absl import logging
import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer_layers
import tensorflow.compat.v1 as tf

from mtf_synthesizer.checkpoints import release
from mtf_synthesizer.core import interface
from mtf_synthesizer.core import mixture
from mtf_synthesizer.core import synthesizers as synth_lib
from mtf_synthesizer.ops import order
from mtf_synthesizer.ops import positions as positions_lib
from mtf_synthesizer.ops import softmax as softmax_lib

# (sequence length, max_length) pairs already reported, to say it once.
_SAID = set()

_ATTENTION_KWARGS = frozenset(
    ["dropout_rate", "dropout_broadcast_dims", "extra_logit",
     "float32_logits"])


def _unsupported_settings(layer: transformer_layers.SelfAttention,
                          needs_keys: bool) -> list:
  """Inherited SelfAttention settings that SynthesizerAttention ignores.

  Args:
    layer: the layer, after SelfAttention.__init__ has stored its settings.
    needs_keys: whether a synthesizing function uses the key projection.

  Returns:
    A list of "binding: reason" strings, empty when all are honoured.
  """
  problems = []
  if layer.attention_func is not None:
    problems.append("attention_func=%r: the logits are synthesized, not "
                    "computed by an attention function" % layer.attention_func)
  if (layer.use_hyperprompt or layer.hyperprompt_length_encoder or
      layer.hyperprompt_length_decoder):
    problems.append("use_hyperprompt / hyperprompt_length_*: prompts "
                    "prepended to keys and values are not supported")
  if layer.shared_kv and needs_keys:
    problems.append("shared_kv=True: dot-product attention here has its own "
                    "key and value projections")
  if not layer.attention_kwargs.get("float32_logits", True):
    problems.append("attention_kwargs float32_logits=False: the logits are "
                    "always float32")
  unknown = set(layer.attention_kwargs) - _ATTENTION_KWARGS
  if unknown:
    problems.append("attention_kwargs %s (supported: %s)" % (
        sorted(unknown), sorted(_ATTENTION_KWARGS)))
  return problems


def packed_sequence_id(context) -> Optional[mtf.Tensor]:
  """The segment ids of a packed batch, or None for plain sequences.

  mesh passes the packed features' segment ids as `context.sequence_id`.
  For unpacked encoder-decoder input it makes up its own padding mask,
  mtf.minimum(tokens, 1) (`Bitransformer.call_simple`), whose segments
  start at 0 anyway; that one (and the scalar or None of other cases) is
  not a packed batch.

  Args:
    context: a transformer.Context.

  Returns:
    An int Tensor [batch dims + length], or None.
  """
  sequence_id = context.sequence_id
  if not isinstance(sequence_id, mtf.Tensor):
    return None
  operation = sequence_id.operation
  if (isinstance(operation, mtf.MinMaxOperation) and
      getattr(operation, "_tf_fn", None) is tf.minimum):
    return None
  return sequence_id


@gin.configurable(module="mtf_synthesizer")
class SynthesizerAttention(transformer_layers.SelfAttention):
  """Multi-head self-attention with synthesized attention weights."""

  def __init__(self,
               synthesizers: Optional[
                   Sequence[interface.SynthesizingFunction]] = None,
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
    synth_lib.check_setting("SynthesizerAttention", "max_length", max_length,
                            "positive_int")
    synth_lib.check_setting("SynthesizerAttention", "learned_mixture_weights",
                            learned_mixture_weights, "bool")
    self.synthesizer = mixture.compose(synthesizers, learned_mixture_weights)
    self.max_length = max_length
    problems = _unsupported_settings(self, self.synthesizer.needs_keys)
    if problems:
      raise ValueError(
          "SynthesizerAttention cannot honour these SelfAttention settings "
          "(bound in gin for SelfAttention, which it inherits): %s. Unbind "
          "them for SynthesizerAttention, or keep mesh's SelfAttention in "
          "that stack (synthesizer/keep_*_self_attention.gin)."
          % "; ".join(problems))
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
    if longest < self.max_length and (longest, self.max_length) not in _SAID:
      _SAID.add((longest, self.max_length))
      logging.warning(
          "SynthesizerAttention.max_length is %d but this layer's sequences "
          "are %d long: its position-indexed parameters (R, R1/R2, W2, ...) "
          "hold %d positions and only the first %d are used. If no stack of "
          "the model (encoder inputs, decoder targets) and no checkpoint or "
          "later run needs %d, set SynthesizerAttention.max_length to the "
          "longest sequence length of the model to save memory.",
          self.max_length, longest, self.max_length, longest,
          self.max_length)

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
      memory_position = mtf.range(context.mesh, memory_length, tf.int32)
      at_position = mtf.equal(memory_position, context.position)
      states = [positions_lib.write_state(old, new, at_position)
                for old, new in zip(context.get_states(len(states)), states)]
    else:
      memory_position = self.rename_length_to_memory_length(
          context.position, context)
    if incremental or context.mode == "first_part":
      context.record_new_states(states)
    k, v = (states[0], states[1]) if synth.needs_keys else (None, states[0])

    query_positions, memory_positions = self._table_positions(
        context, memory_position)
    inputs = interface.SynthesisInputs(
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

  def _table_positions(self, context, memory_position):
    """Positions at which the position-indexed tables are read.

    Args:
      context: a transformer.Context.
      memory_position: the memory positions mesh's bias uses.

    Returns:
      (query_positions, memory_positions): None for 0..length-1 (a slice of
      the tables), else int Tensors of positions inside each segment.
    """
    if context.mode == "incremental":
      # mesh's decoding loop runs until every example is done, so an
      # example that reached the end (a language model's longer prompt)
      # takes more steps past it; their outputs are discarded, but their
      # rows must exist: read the last one.
      return mtf.minimum(context.position, self.max_length - 1), None
    if not context.position_is_default:  # explicit positions from the data
      return context.position, memory_position
    sequence_id = packed_sequence_id(context)
    if sequence_id is None:  # plain sequences
      return None, None
    # Packed, but mesh dropped the positions (positional_embedding = False,
    # as in T5's model files): derive them from the segment ids.
    positions = positions_lib.positions_in_segments(sequence_id,
                                                    context.length_dim)
    return positions, self.rename_length_to_memory_length(positions, context)

  def _attend(self, context, logits, bias, v, x, heads_dims):
    """softmax(logits + bias) with dropout, times the values.

    The tail of mesh's `attention.attention` (bias, z-loss, softmax,
    dropout, values), which cannot be called here: it computes its logits
    from q and k itself, where these are S(X). Unlike it, the softmax is
    `ops.softmax`, the gradients are ordered (`ops.order`), and weights that
    do not depend on the example get a dropout mask per example.
    """
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
    logits, v = order.order_gradients(logits, v)
    weights = softmax_lib.softmax(logits, memory_length, context,
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
