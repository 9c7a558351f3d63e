# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Mixture Synthesizer (Tay et al., eq. 8) of the synthesizing functions.

  Mixture (+)   S(X) = sum_i alpha_i S_i(X), alpha = softmax(w), sum alpha = 1

`compose` makes the self-attention's one function of the functions a gin
file lists (`synthesizers.py`): the function itself, or their Mixture.
"""

from typing import Optional, Sequence

import gin
import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf

from mtf_synthesizer.core import interface
from mtf_synthesizer.training import summaries

BY_NAME = interface.BY_NAME


@gin.configurable(module="synthesizers")
class Mixture(interface.SynthesizingFunction, register=False):
  """Mixture Synthesizer (+), eq. 8: softmax(sum_i alpha_i S_i(X)) G(X).

  alpha = softmax(w) over the components, one w per head (and per layer), w
  initialised to 0 (equal weights). With `learned_weights=False` the
  components are simply added (the original release's `*_plus` modes).
  """
  name = "mixture"

  def __init__(self, components: Sequence[interface.SynthesizingFunction],
               learned_weights: bool = True):
    """Creates the mixture.

    Args:
      components: one or more synthesizing functions (alpha is 1 for one),
        each kind at most once.
      learned_weights: learn alpha (summing to one) or add with weight 1.
    """
    components = list(components)
    if not components:
      raise ValueError("A Mixture needs at least one synthesizing function.")
    names = [c.name for c in components]
    if len(set(names)) != len(names):
      raise ValueError("A Mixture takes each synthesizing function once; got "
                       "%s." % names)
    self.components = components
    self.learned_weights = learned_weights

  @property
  def needs_queries(self):
    return any(c.needs_queries for c in self.components)

  @property
  def needs_keys(self):
    return any(c.needs_keys for c in self.components)

  @property
  def indexes_positions(self):
    return any(c.indexes_positions for c in self.components)

  @property
  def input_independent(self):
    return all(c.input_independent for c in self.components)

  def weights(self, inputs: interface.SynthesisInputs) -> Optional[mtf.Tensor]:
    """Returns alpha: [synth_components] + heads dims, summing to one."""
    if not self.learned_weights:
      return None
    components_dim = mtf.Dimension("synth_components", len(self.components))
    with tf.variable_scope(self.name):
      w = mtf.get_variable(
          inputs.mesh, "alpha_logits",
          mtf.Shape([components_dim] + inputs.heads_dims),
          initializer=tf.zeros_initializer(), dtype=inputs.variable_dtype)
      alpha = mtf.softmax(mtf.cast(w, tf.float32), components_dim)
      if inputs.write_summaries:
        # alpha_i averaged over heads, per layer: where the layer puts its
        # weight (TensorBoard, scalars "<layer>/mixture/alpha_<function>"),
        # on CPU and GPU always, on TPU with
        # `tpu_estimator_model_fn.tpu_summaries = True` (training/summaries.py).
        for i, component in enumerate(self.components):
          alpha_i = mtf.slice(alpha, i, 1, components_dim.name)
          summaries.scalar_summary("alpha_" + component.name,
                                   mtf.reduce_mean(alpha_i))
    return alpha

  def __call__(self, inputs: interface.SynthesisInputs,
               scale: Optional[mtf.Tensor] = None) -> mtf.Tensor:
    # Components keep their own scopes (random/R, not mixture/random/R), so
    # their variables are named the same alone and in a mixture.
    return self.logits(inputs, scale)

  def logits(self, inputs, scale=None):
    alpha = self.weights(inputs)
    total = None
    for i, component in enumerate(self.components):
      alpha_i = scale
      if alpha is not None:
        components_dim = alpha.shape.dims[0]
        alpha_i = mtf.reshape(mtf.slice(alpha, i, 1, components_dim.name),
                              alpha.shape - components_dim)
        if scale is not None:
          alpha_i *= scale
      # alpha_i S_i, with alpha_i applied inside S_i to its cheapest factor.
      term = component(inputs, alpha_i)
      if total is None:
        total = term
      else:
        total = mtf.add(total, term,
                        output_shape=inputs.logits_shape([total, term]))
    return total


def compose(synthesizers: Sequence[interface.SynthesizingFunction],
            learned_mixture_weights: bool = True
            ) -> interface.SynthesizingFunction:
  """Returns the single function, or the Mixture of several.

  Args:
    synthesizers: one or more synthesizing functions.
    learned_mixture_weights: see Mixture.

  Returns:
    An interface.SynthesizingFunction.
  """
  synthesizers = list(synthesizers)
  if not synthesizers:
    raise ValueError(
        "SynthesizerAttention needs at least one synthesizing function; "
        "valid ones: %s." % ", ".join(sorted(BY_NAME)))
  if len(synthesizers) == 1:
    return synthesizers[0]
  return Mixture(synthesizers, learned_weights=learned_mixture_weights)


