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

from typing import Dict, Optional, Tuple, Type

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

  The kernel's window is either given as mesh's relative positions, or by
  its width alone (`kernel_width`): then it is causal in an autoregressive
  model (a decoder, a language model) and centred in any other (an
  encoder, an encoder-only classifier), read from the model the layer is
  called in. One binding thus serves every stack a gin file configures.
  """

  def __init__(self,  # pylint: disable=super-init-not-called
               min_relative_pos: Optional[int] = None,
               max_relative_pos: Optional[int] = None,
               output_size: Optional[int] = None,
               depthwise_filter_initializer_scale: float = 1.0,
               pointwise_filter_initializer_scale: float = 1.0,
               activation: str = "linear",
               attention_type: str = "lightweight_conv",
               kernel_width: Optional[int] = None):
    """Creates the block.

    The kernel covers relative positions min_relative_pos..max_relative_pos,
    or, with `kernel_width`, the window `window` chooses for the model. As
    in mesh's block, the channels' kernel sharing is
    `LightweightConv1DLocalAttn.num_unique_depth_filters` (or
    `DynamicConv1DLocalAttn...`), not an argument of the block.

    Args:
      min_relative_pos: the first relative position of the kernel.
      max_relative_pos: the last relative position of the kernel (at most 0
        in an autoregressive model).
      output_size: the channels of the convolution's output (d_model);
        required.
      depthwise_filter_initializer_scale: scale of the depthwise kernel's
        initializer.
      pointwise_filter_initializer_scale: scale of the pointwise kernel's
        initializer.
      activation: the name of an mtf function applied to the convolution's
        output, or "linear".
      attention_type: "lightweight_conv" or "dynamic_conv".
      kernel_width: instead of the relative positions: the kernel's width,
        causal or centred as the model requires.

    Raises:
      ValueError: an unknown attention_type, no output_size, an empty
        kernel, or neither or both of (min_relative_pos, max_relative_pos)
        and kernel_width.
    """
    if output_size is None:
      raise ValueError("output_size (the model's d_model) is required.")
    if attention_type not in _CONVOLUTIONS:
      raise ValueError("attention_type must be one of %s, got %r" % (
          sorted(_CONVOLUTIONS), attention_type))
    positions = (min_relative_pos, max_relative_pos)
    if kernel_width is None:
      if None in positions:
        raise ValueError("Give either kernel_width or both min_relative_pos "
                         "and max_relative_pos.")
      if max_relative_pos < min_relative_pos:
        raise ValueError(
            "max_relative_pos (%d) must be at least min_relative_pos (%d)"
            % (max_relative_pos, min_relative_pos))
    else:
      if positions != (None, None):
        raise ValueError("Give kernel_width (%d) or min_relative_pos and "
                         "max_relative_pos %s, not both." % (
                             kernel_width, positions))
      if kernel_width < 1:
        raise ValueError("kernel_width must be positive, got %d"
                         % kernel_width)
      positions = (1 - kernel_width, 0)  # replaced in call()
    self.kernel_width = kernel_width
    self.conv_local_attn_layer = _CONVOLUTIONS[attention_type](
        positions[0], positions[1], output_size,
        depthwise_filter_initializer_scale,
        pointwise_filter_initializer_scale, activation)
    self._relative_positions = positions if kernel_width is None else None

  def window(self, model) -> Tuple[int, int]:
    """The kernel's relative positions in `model` (first, last).

    Args:
      model: the transformer.Unitransformer the layer is called in.

    Returns:
      (min_relative_pos, max_relative_pos). With `kernel_width` w: -(w - 1)
      to 0 in an autoregressive model, else -(w // 2) to (w - 1) // 2.

    Raises:
      ValueError: given relative positions that reach later positions in an
        autoregressive model (training would read the targets it predicts,
        and decoding could not compute the full pass).
    """
    autoregressive = model.autoregressive
    if self.kernel_width is None:
      first, last = self._relative_positions
      if autoregressive and last > 0:
        raise ValueError(
            "max_relative_pos is %d in an autoregressive model (%s): its "
            "convolution would read later positions. Use at most 0, or "
            "kernel_width." % (last, model.name))
      return first, last
    width = self.kernel_width
    if autoregressive:
      return 1 - width, 0
    return -(width // 2), (width - 1) // 2

  def call(self, context, x, losses=None):
    """Calls mesh's block with the kernel's window set for context.model."""
    # pylint: disable=protected-access
    convolution = self.conv_local_attn_layer
    (convolution._min_relative_pos,
     convolution._max_relative_pos) = self.window(context.model)
    # pylint: enable=protected-access
    return super().call(context, x, losses)
