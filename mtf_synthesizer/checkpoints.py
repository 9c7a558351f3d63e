# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Starting a Synthesizer model from a vanilla T5 checkpoint.

mesh names every variable after the layer class, so a SynthesizerAttention
layer's q/k/v/o live under `.../SynthesizerAttention/` while a released T5
checkpoint has them under `.../SelfAttention/`. Without a mapping,
`utils.run.init_checkpoint` silently leaves them at their initializers. With
`synthesizer/init_from_t5.gin`, mesh asks `vanilla_to_synthesizer` for each
graph variable's name in the checkpoint:

  .../SynthesizerAttention/{q,k,v,o,relative_attention_bias}[_slot_*]
      -> .../SelfAttention/same
  .../SynthesizerAttention/kv   (the value projection G of R, D, FR, FD)
      -> .../SelfAttention/v

Synthesizer-only variables (random/R, dense/w1, mixture/alpha_logits, ...)
have no counterpart and start fresh. Every variable is logged once as
restored (with its source) or fresh, and a shape that differs from the
checkpoint's raises an error naming both.
"""

import re
from typing import Dict, Optional

from absl import logging
import gin
import tensorflow.compat.v1 as tf

from mtf_synthesizer import release

_SCOPE = "/%s/" % release.SCOPE
_VANILLA_SCOPE = "/SelfAttention/"
_SHARED = re.compile(r"^(q|k|v|o|relative_attention_bias)(_slot_\w+)?$")
_VALUE = re.compile(r"^kv(_slot_\w+)?$")


def checkpoint_name(graph_name: str) -> str:
  """Returns the vanilla checkpoint's name for a graph variable name.

  Args:
    graph_name: a variable name in the Synthesizer model's graph.

  Returns:
    The name to read it from (unchanged outside SynthesizerAttention).
  """
  if _SCOPE not in graph_name:
    return graph_name
  prefix, local = graph_name.split(_SCOPE, 1)
  if _SHARED.match(local):
    return prefix + _VANILLA_SCOPE + local
  match = _VALUE.match(local)
  if match:
    return prefix + _VANILLA_SCOPE + "v" + (match.group(1) or "")
  return graph_name  # synthesizer-only: not in a vanilla checkpoint


class _Mapper:
  """Maps names, checks shapes and logs each variable once per checkpoint."""

  def __init__(self):
    self._checkpoint: Optional[str] = None
    self._shapes: Dict[str, list] = {}
    self._logged = set()

  def _load(self, checkpoint):
    if checkpoint != self._checkpoint:
      reader = tf.train.load_checkpoint(checkpoint)
      self._shapes = reader.get_variable_to_shape_map()
      self._checkpoint = checkpoint
      self._logged = set()

  def __call__(self, graph_name: str, checkpoint: str) -> str:
    self._load(checkpoint)
    source = checkpoint_name(graph_name)
    if graph_name in self._logged:
      return source
    self._logged.add(graph_name)
    if source not in self._shapes:
      logging.info("init_from_t5: %s is fresh (not in %s)", graph_name,
                   checkpoint)
      return source
    graph_vars = [v for v in tf.global_variables()
                  if v.op.name == graph_name]
    if graph_vars:
      graph_shape = graph_vars[0].shape.as_list()
      if graph_shape != list(self._shapes[source]):
        raise ValueError(
            "Cannot initialise %s %s from %s:%s, whose shape is %s. Check "
            "that the model gin (d_model, num_heads, d_kv, ...) matches the "
            "checkpoint's." % (graph_name, graph_shape, checkpoint, source,
                               list(self._shapes[source])))
    logging.info("init_from_t5: %s <- %s", graph_name, source)
    return source


_MAPPER = _Mapper()


@gin.configurable(module="mtf_synthesizer")
def vanilla_to_synthesizer(name: str,
                           checkpoint: Optional[str] = None) -> str:
  """mapping_fn for utils.init_checkpoint_variable_mapping.

  Args:
    name: a graph variable name.
    checkpoint: the checkpoint being restored; default: the value bound to
      `utils.run.init_checkpoint`.

  Returns:
    The variable's name in the checkpoint.
  """
  if checkpoint is None:
    checkpoint = gin.query_parameter("utils.run.init_checkpoint")
  return _MAPPER(name, checkpoint)
