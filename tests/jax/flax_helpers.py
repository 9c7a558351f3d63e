# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Helpers of the Flax tests: tiny models, parameters as the reference's."""

from typing import Any, Dict

import flax.linen as nn
from flax import traverse_util
import jax
import numpy as np

from mtf_synthesizer.flax_model import t5


def tiny_config(**overrides: Any) -> t5.T5Config:
  """A T5Config of a few units, float32, no dropout unless overridden."""
  settings = dict(vocab_size=23, d_model=8, num_heads=2, head_dim=4, d_ff=16,
                  num_encoder_layers=2, num_decoder_layers=2, max_length=8,
                  dropout_rate=0.0)
  settings.update(overrides)
  return t5.T5Config(**settings)


def perturbed(params: Any, seed: int = 1, scale: float = 0.3) -> Any:
  """params (unboxed) plus N(0, scale^2) noise: mixture weights not uniform."""
  params = nn.unbox(params)
  leaves, tree = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree_util.tree_unflatten(tree, [
      x + scale * jax.random.normal(k, x.shape, x.dtype)
      for x, k in zip(leaves, keys)])


def to_reference(params: Any) -> Dict[str, np.ndarray]:
  """A SynthesizerAttention's parameters by the reference's local names.

  The inverse of the Flax tree's naming: query/key/value/out kernels
  [embed, heads, kv] / [heads, kv, embed] are mesh's combined q, k, v
  [d_model, heads * d_kv] (heads-major) and o [heads * d_kv, d_model]; the
  functions' variables and the mixture logits keep their names.

  Args:
    params: the attention's parameters (unboxed).

  Returns:
    Local name -> float64 array.
  """
  out = {}
  names = {"query/kernel": "q", "key/kernel": "k", "value/kernel": "v"}
  for name, x in traverse_util.flatten_dict(params, sep="/").items():
    x = np.asarray(x, np.float64)
    if name in names:
      out[names[name]] = x.reshape(x.shape[0], -1)
    elif name == "out/kernel":
      out["o"] = x.reshape(-1, x.shape[-1])
    else:
      out[name] = x
  return out
