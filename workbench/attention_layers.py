# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The self-attention layers of a trained model's checkpoint.

Reads checkpoints written by the stock `t5_mesh_transformer` (a model_dir or
a checkpoint path) and the model_dir's operative_config.gin (with gin's own
parser, nothing is run) and lists the self-attention layers with their
synthesizing functions in mixture order. The functions, their marker
variables and their labels come from `mtf_synthesizer.core.synthesizers`
and the attention table: a function added there is found with no edit here.
Variable names are read with `mtf_synthesizer.checkpoints.names`.
`attention_maps` computes their attention, `pictures` draws it.
"""

import dataclasses
import os
from typing import Dict, List, Optional

from gin import config_parser
import numpy as np

from mtf_synthesizer import attentions
from mtf_synthesizer.checkpoints import names
from mtf_synthesizer.core import synthesizers

# Variable (scope-relative) that identifies each synthesizing function, and
# the class names the gin files use for them.
COMPONENT_MARKERS = {name: cls.marker()
                     for name, cls in synthesizers.BY_NAME.items()}
CLASS_TO_COMPONENT = {cls.__name__: name
                      for name, cls in synthesizers.BY_NAME.items()}
# The paper's label of each function (its one-function variant's).
SHORT_NAMES = {v.components[0]: v.label for v in attentions.VARIANTS
               if len(v.components) == 1}
INPUT_INDEPENDENT = tuple(name for name, cls in synthesizers.BY_NAME.items()
                          if cls.input_independent)
# The self-attention layers' scopes: ours and mesh's.
ATTENTION_KINDS = ("SynthesizerAttention", "SelfAttention")


@dataclasses.dataclass
class AttentionLayer:
  """One self-attention layer of a checkpoint.

  Attributes:
    stack: "encoder" or "decoder" (or the LM's stack name).
    block: the block index.
    scope: the variable scope, ".../SynthesizerAttention" or
      ".../SelfAttention" (no trailing slash).
    kind: "SynthesizerAttention" or "SelfAttention" (mesh's own).
    components: the synthesizing functions in mixture order (the order of
      `mixture/alpha_logits`); ["dot_product"] for mesh's layer.
    order_known: False when the mixture order could not be read from the
      operative config (then it is the canonical order of COMPONENT_MARKERS).
  """
  stack: str
  block: int
  scope: str
  kind: str
  components: List[str]
  order_known: bool = True

  @property
  def norm_scope(self) -> str:
    """The scope of the RMS norm applied to the layer's input.

    Under today's name; `names.norm_aliases` gives T5.1.0's.
    """
    return self.scope.rsplit("/", 1)[0] + "/" + names.NORM

  @property
  def label(self) -> str:
    """e.g. "encoder layer 0"."""
    return "%s layer %d" % (self.stack, self.block)

  @property
  def short_kind(self) -> str:
    """e.g. "R+V"; "V (mesh)" for mesh's SelfAttention."""
    if self.kind == "SelfAttention":
      return attentions.MESH_SELF_ATTENTION.label
    return "+".join(SHORT_NAMES[c] for c in self.components)

  def local_variables(self, variables: Dict[str, np.ndarray]
                      ) -> Dict[str, np.ndarray]:
    """The layer's variables by their name inside its scope ("random/R")."""
    prefix = self.scope + "/"
    return {name[len(prefix):]: value for name, value in variables.items()
            if name.startswith(prefix)}


def resolve_checkpoint(path: str) -> str:
  """Returns the checkpoint prefix for a model_dir or a checkpoint path.

  Args:
    path: a model_dir or a checkpoint prefix.

  Returns:
    The latest checkpoint of a model_dir, else `path`.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  if tf.io.gfile.isdir(path):
    ckpt = tf.train.latest_checkpoint(path)
    if ckpt is None:
      raise ValueError("No checkpoint in %s." % path)
    return ckpt
  return path


def model_dir_of(path: str) -> str:
  """Returns the model_dir of a model_dir or checkpoint path."""
  return path if os.path.isdir(path) else os.path.dirname(path)


def load_variables(checkpoint: str) -> Dict[str, np.ndarray]:
  """Reads the model's variables (no optimizer slots) as float64 arrays.

  Args:
    checkpoint: a model_dir or checkpoint path.

  Returns:
    Variable name -> array.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(resolve_checkpoint(checkpoint))
  out = {}
  for name in reader.get_variable_to_shape_map():
    if not names.is_weight(name):
      continue
    out[name] = np.asarray(reader.get_tensor(name)).astype(np.float64)
  return out


class _Reference(str):
  """A configurable reference (`@name()`) in parsed gin text: its name."""


class _Delegate(config_parser.ParserDelegate):
  """Keeps references as their names and macros as None (not evaluated)."""

  def configurable_reference(self, scoped_configurable_name, evaluate):
    return _Reference(scoped_configurable_name)

  def macro(self, macro_name):
    return None


def _bindings(config: str) -> List[config_parser.BindingStatement]:
  """The binding statements of gin text, parsed by gin (nothing is run)."""
  return [s for s in config_parser.ConfigParser(config, _Delegate())
          if isinstance(s, config_parser.BindingStatement)]


def _selector_is(statement: config_parser.BindingStatement, name: str,
                 arg_name: str) -> bool:
  """Whether `statement` binds `arg_name` of configurable `name`."""
  return (statement.selector.split(".")[-1] == name and
          statement.arg_name == arg_name)


def mixture_order(operative_config: str) -> Dict[str, List[str]]:
  """Reads the `synthesizers` bindings of SynthesizerAttention from gin text.

  Args:
    operative_config: the text of an operative_config.gin.

  Returns:
    Binding scope ("" when unscoped, e.g. "encoder") -> component names in
    order.
  """
  out = {}
  for statement in _bindings(operative_config):
    if _selector_is(statement, "SynthesizerAttention", "synthesizers"):
      value = statement.value
      classes = [r.split("/")[-1].split(".")[-1]
                 for r in (value if isinstance(value, (list, tuple)) else [])
                 if isinstance(r, _Reference)]
      out[statement.scope] = [CLASS_TO_COMPONENT[n] for n in classes
                              if n in CLASS_TO_COMPONENT]
  return out


def model_type(operative_config: str) -> str:
  """`run.model_type` of an operative config ("bitransformer" if unset)."""
  found = [s.value for s in _bindings(operative_config)
           if _selector_is(s, "run", "model_type") and not s.scope]
  return found[-1] if found else "bitransformer"


def find_attention_layers(
    variables: Dict[str, np.ndarray],
    operative_config: Optional[str] = None) -> List[AttentionLayer]:
  """Lists the self-attention layers of a checkpoint, sorted.

  Args:
    variables: from load_variables.
    operative_config: the model_dir's operative_config.gin text, used for
      the order of mixture components; None: canonical order.

  Returns:
    AttentionLayers sorted by stack (encoder first) and block.
  """
  scopes = {}
  for name in variables:
    parsed = names.layer_variable(name)
    if parsed and parsed.kind in ATTENTION_KINDS:
      scopes[parsed.scope] = (parsed.stack, parsed.block, parsed.kind)
  orders = mixture_order(operative_config or "")
  layers = []
  for scope, (stack, block, kind) in scopes.items():
    if kind == "SelfAttention":
      layers.append(AttentionLayer(stack, block, scope, kind,
                                   ["dot_product"]))
      continue
    present = [c for c, marker in COMPONENT_MARKERS.items()
               if "%s/%s" % (scope, marker) in variables]
    order = orders.get(stack, orders.get(""))
    known = order is not None and sorted(order) == sorted(present)
    layers.append(AttentionLayer(stack, block, scope, kind,
                                 order if known else present,
                                 known or len(present) == 1))
  rank = {"encoder": 0, "decoder": 1}
  return sorted(layers, key=lambda l: (rank.get(l.stack, 2), l.stack,
                                       l.block))
