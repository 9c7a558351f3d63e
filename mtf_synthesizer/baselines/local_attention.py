# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Local (windowed) self-attention: mesh's SelfAttention within a window.

Query position p attends to the memory positions in (p - radius, p + radius]
(in a causal stack, (p - radius, p]): the window of mesh's
`LocalSelfAttention`. Everything else is mesh's `SelfAttention`: the
projections, T5's relative position bias, the causal and packing masks,
and incremental decoding, which keeps the full-length keys and values and
masks them like the full pass.

mesh's own `LocalSelfAttention` (mesh-tensorflow 0.1.21) cannot be built:
its call of `attention.attention` passes no context, which that function
needs (it reads `context.train`). This layer is not a replacement for its
blocked algorithm either: the window is a mask on the full [length, length]
logits, so memory and compute are still quadratic in the length. It is a
quality baseline (what attending only nearby does to a model), not a speed
one.
"""

import gin
from mesh_tensorflow.transformer import transformer_layers


@gin.configurable(module="mtf_synthesizer")
class WindowedSelfAttention(transformer_layers.SelfAttention):
  """SelfAttention that sees only the memory positions near the query.

  Its other arguments are mesh's SelfAttention's, passed on, so T5's
  `SelfAttention.*` bindings (heads, sizes, dropout, relative attention)
  apply to it as well.
  """

  def __init__(self, radius: int = 128, **kwargs):
    """Creates the layer.

    Args:
      radius: query position p sees memory positions p - radius + 1 to
        p + radius (to p in a causal stack), as in mesh's
        LocalSelfAttention.
      **kwargs: passed to mesh's SelfAttention.

    Raises:
      ValueError: radius is not positive.
    """
    super().__init__(**kwargs)
    if radius < 1:
      raise ValueError("radius must be positive, got %r" % (radius,))
    self.radius = radius

  def min_relative_position(self, context) -> int:
    """The lowest visible memory position, relative to the query's.

    Args:
      context: a transformer.Context.

    Returns:
      1 - radius.
    """
    return 1 - self.radius

  def max_relative_position(self, context) -> int:
    """The highest visible memory position, relative to the query's.

    Args:
      context: a transformer.Context.

    Returns:
      radius, or 0 in a fully autoregressive (causal) stack.
    """
    return 0 if context.model.fully_autoregressive else self.radius
