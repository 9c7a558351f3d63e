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

import math
from typing import Optional, Sequence

from absl import logging
import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer_layers
import tensorflow.compat.v1 as tf

from mtf_synthesizer import control
from mtf_synthesizer import release
from mtf_synthesizer import synthesizers as synth_lib

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


def positions_in_segments(sequence_id: mtf.Tensor,
                          length_dim: mtf.Dimension) -> mtf.Tensor:
  """Each token's position inside its own segment, from the segment ids.

  Segments are runs of equal ids along `length_dim` (as T5 packs them:
  1 1 1 2 2 0 0 gives positions 0 1 2 0 1 0 1). The work is linear in the
  length: a segment-min of the row indices per run, per example.

  Args:
    sequence_id: int Tensor with `length_dim` (batch dims + length).
    length_dim: the length dimension; it must not be split across devices.

  Returns:
    An int32 Tensor shaped like sequence_id.
  """
  axis = sequence_id.shape.dims.index(length_dim)

  def tf_positions(ids):
    ids = tf.cast(ids, tf.int32)
    perm = list(range(ids.shape.ndims))
    perm = perm[:axis] + perm[axis + 1:] + [axis]
    inverse = [perm.index(i) for i in range(len(perm))]
    rows = tf.transpose(ids, perm)
    lead = tf.shape(rows)[:-1]
    rows = tf.reshape(rows, [-1, length_dim.size])
    num_rows = tf.shape(rows)[0]
    starts = tf.concat([
        tf.ones([num_rows, 1], tf.int32),
        tf.cast(tf.not_equal(rows[:, 1:], rows[:, :-1]), tf.int32)], 1)
    # Run number of each token, unique over the whole slice.
    run = (tf.cumsum(starts, axis=1) - 1 +
           length_dim.size * tf.range(num_rows)[:, None])
    index = tf.broadcast_to(tf.range(length_dim.size), tf.shape(rows))
    first = tf.math.unsorted_segment_min(
        tf.reshape(index, [-1]), tf.reshape(run, [-1]),
        num_rows * length_dim.size)
    positions = index - tf.gather(first, run)
    positions = tf.reshape(positions,
                           tf.concat([lead, [length_dim.size]], 0))
    return tf.transpose(positions, inverse)

  return mtf.slicewise(
      tf_positions, [sequence_id], output_shape=sequence_id.shape,
      output_dtype=tf.int32,
      splittable_dims=[d for d in sequence_id.shape.dims if d != length_dim],
      name="positions_in_segments")


def _aligned(x: tf.Tensor, dims: Sequence[mtf.Dimension],
             target: Sequence[mtf.Dimension]) -> tf.Tensor:
  """A slice of x (laid out as `dims`) ready to broadcast against `target`.

  Transposes x to the order its dims have in `target`, then inserts axes of
  size 1 for the dims of `target` that x lacks.

  Args:
    x: a tf.Tensor, the slice of an mtf Tensor with dims `dims`.
    dims: the mtf dims of x, in order.
    target: the mtf dims to broadcast to (a superset of `dims`).

  Returns:
    A tf.Tensor with len(target) axes.
  """
  order = [d for d in target if d in dims]
  x = tf.transpose(x, [list(dims).index(d) for d in order])
  sizes = dict(zip(order, x.shape.as_list()))
  return tf.reshape(x, [sizes.get(d, 1) for d in target])


def write_state(old: mtf.Tensor, new: mtf.Tensor,
                at_position: mtf.Tensor) -> mtf.Tensor:
  """One decoding step's write into a key/value cache.

  The same values as mesh's `old * (1 - one_hot) + new * one_hot`, in one
  element-wise select laid out as the cache, instead of two products (one of
  them in another layout, then transposed) and a sum over the whole cache.

  Args:
    old: the cache: batch dims, memory length and the other dims of `new`.
    new: this step's keys or values (no memory length dim).
    at_position: bool, true at the memory position being decoded (a subset
      of the dims of `old`).

  Returns:
    A Tensor shaped like `old`.
  """
  dims = old.shape.dims

  def tf_write(old_slice, new_slice, at_slice):
    return tf.where_v2(_aligned(at_slice, at_position.shape.dims, dims),
                       _aligned(new_slice, new.shape.dims, dims), old_slice)

  return mtf.slicewise(tf_write, [old, mtf.cast(new, old.dtype), at_position],
                       output_shape=old.shape, output_dtype=old.dtype,
                       splittable_dims=dims, name="write_state")


# Pieces in which _softmax_gradient forms dy * y for its row sums.
_SOFTMAX_GRADIENT_PIECES = 8


def _softmax_gradient(y: tf.Tensor, dy: tf.Tensor, axis: int) -> tf.Tensor:
  """The gradient of the softmax y at dy: y * (dy - sum(dy * y)).

  When the reduced axis is the last, the row sums come from dy * y formed
  a piece of rows at a time (TF's split along the first axis of the
  [rows, axis] view shares its input's buffer), so the largest temporary is
  a fraction of the logits; dy - sum then runs in dy's buffer and the
  product by y in its result. At 8192 tokens one logits-sized tensor is
  2 GiB per layer.

  Args:
    y: the softmax's output.
    dy: the gradient at its output.
    axis: the reduced axis.

  Returns:
    The gradient at the softmax's input, shaped like y.
  """
  shape = y.shape.as_list()
  rows = 0 if None in shape else math.prod(shape[:-1])
  if axis != len(shape) - 1 or rows < _SOFTMAX_GRADIENT_PIECES:
    sums = tf.reduce_sum(dy * y, axis=axis, keepdims=True)
  else:
    pieces = [rows // _SOFTMAX_GRADIENT_PIECES
              + (i < rows % _SOFTMAX_GRADIENT_PIECES)
              for i in range(_SOFTMAX_GRADIENT_PIECES)]
    sums = tf.concat(
        [tf.reduce_sum(a * b, axis=1, keepdims=True)
         for a, b in zip(tf.split(tf.reshape(dy, [rows, -1]), pieces),
                         tf.split(tf.reshape(y, [rows, -1]), pieces))],
        axis=0)
    sums = tf.reshape(sums, shape[:-1] + [1])
  return (dy - sums) * y


def softmax(logits: mtf.Tensor, reduced_dim: mtf.Dimension,
            context=None, extra_logit: Optional[float] = None) -> mtf.Tensor:
  """The softmax of the logits over one dimension.

  When the layout leaves `reduced_dim` whole on every device, each device
  runs TF's fused softmax on its slice: one exponential forward, and the
  gradient y * (dy - sum(dy * y)) (`_softmax_gradient`), which needs only
  the output and no full-size temporary. mtf's own
  `softmax` is exp(x - logsumexp(x)): two exponentials over the logits
  forward and more full-size temporaries backward (docs/benchmark.md, "One
  exponential per softmax", measures the difference). The values are the
  same up to float rounding.

  Args:
    logits: float32 logits.
    reduced_dim: the dimension to normalise over (the memory length).
    context: a transformer.Context, to see whether the layout splits
      `reduced_dim`; None when it cannot.
    extra_logit: mesh's `extra_logit` (an implicit logit in every row);
      with one, mtf's softmax is used.

  Returns:
    The weights, shaped like `logits`.
  """
  layout = getattr(context, "layout", None)
  mesh_shape = getattr(context, "mesh_shape", None)
  split = (layout is not None and mesh_shape is not None and
           mtf.tensor_dim_to_mesh_dim_size(layout, mesh_shape,
                                           reduced_dim) > 1)
  if extra_logit is not None or split:
    return mtf.softmax(logits, reduced_dim, extra_logit=extra_logit)
  axis = logits.shape.dims.index(reduced_dim)

  splittable = logits.shape.dims[:axis] + logits.shape.dims[axis + 1:]

  def gradient(op, dy):
    # A slicewise op of its own rather than TF's gradient of the forward
    # slices: mtf's generic slicewise gradient cannot take a gradient that
    # is still a pending sum over a split batch (R's logits have no batch
    # dimension), which a slicewise op's lowering resolves.
    return [mtf.slicewise(
        lambda y, dy: _softmax_gradient(y, dy, axis), [op.outputs[0], dy],
        output_shape=logits.shape, output_dtype=logits.dtype,
        splittable_dims=splittable, grad_function=0,
        name="softmax_gradient")]

  return mtf.slicewise(
      lambda x: tf.nn.softmax(x, axis=axis), [logits],
      output_shape=logits.shape, output_dtype=logits.dtype,
      splittable_dims=splittable, grad_function=gradient, name="softmax")


def order_gradients(logits: mtf.Tensor, values: mtf.Tensor):
  """Identities of logits and values whose values' gradient waits for logits'.

  Backward, the values' gradient leads to the layers below, while the
  logits' gradient (the softmax's) is needed only by the synthesizing
  function's variables. Left free, TF may run the softmax's gradient late,
  beside the next layers' backward passes, keeping this layer's weights and
  their gradient (two logits-sized tensors) alive there; when the logits do
  not depend on the input (R, FR) nothing else makes it run first. This
  makes the values' gradient of each device's slice wait for the logits'.

  Args:
    logits: the attention logits.
    values: the values they weight.

  Returns:
    (logits, values), unchanged.
  """
  def forward(x, y):
    return tf.identity(x), tf.identity(y)

  def grad_function(op, dlogits, dvalues):
    del op
    if dlogits is None or dvalues is None:
      return [dlogits, dvalues]
    return [dlogits, control.after(dvalues, dlogits)]

  return mtf.slicewise(
      forward, [logits, values],
      output_shape=[logits.shape, values.shape],
      output_dtype=[logits.dtype, values.dtype],
      splittable_dims=logits.shape.dims + values.shape.dims,
      grad_function=grad_function, name="order_gradients")


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
    problems = _unsupported_settings(self, self.synthesizer.needs_keys)
    if problems:
      raise ValueError(
          "SynthesizerAttention cannot honour these SelfAttention settings "
          "(bound in gin for SelfAttention, which it inherits): %s. Unbind "
          "them for SynthesizerAttention, or keep mesh's SelfAttention in "
          "that stack (synthesizer/keep_*_vanilla.gin)." % "; ".join(problems))
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
      states = [write_state(old, new, at_position)
                for old, new in zip(context.get_states(len(states)), states)]
    else:
      memory_position = self.rename_length_to_memory_length(
          context.position, context)
    if incremental or context.mode == "first_part":
      context.record_new_states(states)
    k, v = (states[0], states[1]) if synth.needs_keys else (None, states[0])

    query_positions, memory_positions = self._table_positions(
        context, memory_position)
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
      return context.position, None
    if not context.position_is_default:  # explicit positions from the data
      return context.position, memory_position
    sequence_id = packed_sequence_id(context)
    if sequence_id is None:  # plain sequences
      return None, None
    # Packed, but mesh dropped the positions (positional_embedding = False,
    # as in T5's model files): derive them from the segment ids.
    positions = positions_in_segments(sequence_id, context.length_dim)
    return positions, self.rename_length_to_memory_length(positions, context)

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
    logits, v = order_gradients(logits, v)
    weights = softmax(logits, memory_length, context,
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
