# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mesh's lightweight / dynamic convolution block, decoding as it trains.

mesh's `LocalConvAttnBlock` (mesh-tensorflow 0.1.21) runs a depthwise
convolution (`SeparableConv1DLayer`) whose input is zeroed where
`context.inputs` is 0. A decoder's input at its first position is the start
token 0, so the full pass (training, perplexity, scoring) zeroes the
convolution's input there. Step-by-step decoding does not:

  * "incremental" mode (one position per step) puts the step's input into
    the convolution's window without the mask;
  * "first_part" mode (the prefix a decode starts from) stores the prefix
    unmasked, and masks the layer's output with `context.inputs` as given
    in that mode: the prefix itself, not the prefix shifted right, which is
    what the layer reads (and the full pass masks with). It also stores a
    wrong window when the prefix ends fewer than filter_size positions
    before the end of the sequence.

So a greedy decode differs from what the full pass predicts.
`DecodableLocalConvAttnBlock` is mesh's block with the same mask in all
three modes and the prefix's window taken from a padded input. Its
variables are mesh's, under the scope `DecodableLocalConvAttnBlock` (the
class name) instead of `LocalConvAttnBlock`; its full pass computes what
mesh's computes.
"""

from typing import Dict, Type

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer_layers
import tensorflow.compat.v1 as tf


def _mask_like_the_full_pass(context, x: mtf.Tensor) -> mtf.Tensor:
  """Zeroes x where the layer's input token is 0, as the full pass does.

  Args:
    context: a transformer.Context in "first_part" or "incremental" mode,
      whose `inputs` are the layer's input tokens (see `_DecodeMask.call`).
    x: the convolution's input: batch dims [+ length] + channels.

  Returns:
    x, zero where `context.inputs` is 0.
  """
  return x * mtf.cast(mtf.not_equal(context.inputs, 0), x.dtype)


class _DecodeMask(object):
  """Mixin for mesh's `SeparableConv1DLayer` subclasses: masked decoding."""

  def call(self, context, x, losses=None):
    """Calls the convolution; in "first_part" mode, with aligned inputs.

    In "first_part" mode mesh passes the prefix as `context.inputs`
    (`Unitransformer.sample_autoregressive`, `beam_search`) but the layers
    read it shifted right by one, as in the full pass. The convolution reads
    `context.inputs` only for its mask, so it sees the shifted tokens for
    the duration of the call.

    Args:
      context: a transformer.Context.
      x: the convolution's input.
      losses: passed on.

    Returns:
      The convolution's output.
    """
    if context.mode != "first_part":
      return super().call(context, x, losses)
    prefix = context.inputs
    context.inputs = mtf.shift(prefix, 1, prefix.shape.dims[-1], wrap=False)
    try:
      return super().call(context, x, losses)
    finally:
      context.inputs = prefix

  def record_states_first_part_mode(self, context, x, filter_size,
                                    length_dim_name="length"):
    """Records the window before `context.initial_position`, masked.

    The window holds the convolution's (masked) input at the filter_size
    positions before the first decoded one, zeros before the sequence's
    start. mesh gathers it from its input shifted right by filter_size
    within the sequence's length, which loses the positions that shift
    past the end: its window is wrong when the prefix ends fewer than
    filter_size positions before the end. Here the input is padded instead.

    Args:
      context: a transformer.Context in "first_part" mode.
      x: the convolution's input, [batch dims, length, channels].
      filter_size: the kernel's width.
      length_dim_name: the name of the window's dimension.
    """
    x = _mask_like_the_full_pass(context, x)
    window_dim = mtf.Dimension(length_dim_name, filter_size)
    padded = mtf.pad(x, [filter_size, 0], x.shape.dims[-2].name)
    # Position p of x is position p + filter_size of padded.
    indices = context.initial_position + mtf.range(
        x.mesh, window_dim, dtype=tf.int32)
    context.record_new_states([mtf.gather(
        padded, indices, padded.shape.dims[-2],
        output_shape=mtf.Shape(
            x.shape.dims[:-2] + [window_dim] + x.shape.dims[-1:]))])

  def record_states_incremental_mode(self, context, x, filter_size,
                                     length_dim_name="length"):
    return super().record_states_incremental_mode(
        context, _mask_like_the_full_pass(context, x), filter_size,
        length_dim_name)


# Not gin-configurable themselves: they inherit mesh's gin-wrapped
# constructors, so `LightweightConv1DLocalAttn.num_unique_depth_filters`
# (and the dynamic one) still apply.
class _LightweightConv(_DecodeMask,
                       transformer_layers.LightweightConv1DLocalAttn):
  pass


class _DynamicConv(_DecodeMask, transformer_layers.DynamicConv1DLocalAttn):
  pass


_CONVOLUTIONS: Dict[str, Type[transformer_layers.Conv1DLocalAttn]] = {
    "lightweight_conv": _LightweightConv,
    "dynamic_conv": _DynamicConv,
}


@gin.configurable(module="mtf_synthesizer")
class DecodableLocalConvAttnBlock(transformer_layers.LocalConvAttnBlock):
  """mesh's LocalConvAttnBlock whose step-by-step decoding is its full pass.

  A GLU input projection, a depthwise convolution whose kernel is
  softmax-normalised over its width (fixed weights for "lightweight_conv",
  predicted from each position's input for "dynamic_conv"), a pointwise
  projection, and an output projection: mesh's block and variables. The
  convolution's input is zeroed where the layer's input token is 0 when
  decoding as well as in the full pass.
  """

  def __init__(self,  # pylint: disable=super-init-not-called
               min_relative_pos: int,
               max_relative_pos: int,
               output_size: int,
               depthwise_filter_initializer_scale: float = 1.0,
               pointwise_filter_initializer_scale: float = 1.0,
               activation: str = "linear",
               attention_type: str = "lightweight_conv"):
    """Creates the block.

    The kernel covers relative positions min_relative_pos..max_relative_pos
    (a decoder's must end at 0). As in mesh's block, the channels' kernel
    sharing is `LightweightConv1DLocalAttn.num_unique_depth_filters` (or
    `DynamicConv1DLocalAttn...`), not an argument of the block.

    Args:
      min_relative_pos: the first relative position of the kernel.
      max_relative_pos: the last relative position of the kernel.
      output_size: the channels of the convolution's output (d_model).
      depthwise_filter_initializer_scale: scale of the depthwise kernel's
        initializer.
      pointwise_filter_initializer_scale: scale of the pointwise kernel's
        initializer.
      activation: the name of an mtf function applied to the convolution's
        output, or "linear".
      attention_type: "lightweight_conv" or "dynamic_conv".

    Raises:
      ValueError: an unknown attention_type, or an empty kernel.
    """
    if attention_type not in _CONVOLUTIONS:
      raise ValueError("attention_type must be one of %s, got %r" % (
          sorted(_CONVOLUTIONS), attention_type))
    if max_relative_pos < min_relative_pos:
      raise ValueError(
          "max_relative_pos (%d) must be at least min_relative_pos (%d)" % (
              max_relative_pos, min_relative_pos))
    self.conv_local_attn_layer = _CONVOLUTIONS[attention_type](
        min_relative_pos, max_relative_pos, output_size,
        depthwise_filter_initializer_scale,
        pointwise_filter_initializer_scale, activation)
