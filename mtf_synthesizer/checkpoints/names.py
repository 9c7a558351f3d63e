# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Mesh's checkpoint variable names: their grammar, in one place.

  <stack>/block_NNN/layer_NNN/<Layer>/<local>    a layer's variable, e.g.
                                                 encoder/block_001/layer_000/
                                                 SynthesizerAttention/random/R
  <stack>/block_NNN/layer_NNN/rms_norm/scale     a layer's norm (T5.1.0's
                                                 released checkpoints:
                                                 layer_norm)
  <stack>/rms_norm/scale                         a stack's final norm
                                                 (T5.1.0: final_layer_norm)
  <variable>_slot_<name>                         an optimizer slot
  global_step                                    the step

Starting from T5 (`checkpoints.from_t5`), converting the original release's
checkpoints (`checkpoints.release`) and reading a checkpoint's layers (the
workbench's pictures) read names through this module; `canonical` is the
name an exporter reads whatever mesh version wrote the checkpoint.
"""

import dataclasses
import re
from typing import List, Optional

GLOBAL_STEP = "global_step"
SLOT = "_slot_"
# Today's mesh names a layer's norm and a stack's final norm `rms_norm`
# (`transformer.sublayer_rms_norm`); mesh's legacy LayerStack, which wrote
# the released T5.1.0 checkpoints, names them `layer_norm` and
# `final_layer_norm` (`sublayer_legacy_rms_norm`,
# `sublayer_legacy_final_rms_norm`). Either name is read for the other.
NORM = "rms_norm"
LEGACY_LAYER_NORM = "layer_norm"
LEGACY_FINAL_NORM = "final_layer_norm"
NORM_SCOPES = (NORM, LEGACY_LAYER_NORM)
_LAYER_NORM = re.compile(
    r"^(.*/block_\d+/layer_\d+/)(rms_norm|layer_norm)(/scale.*)$")
_FINAL_NORM = re.compile(r"^([^/]+/)(rms_norm|final_layer_norm)(/scale.*)$")
_LAYER = re.compile(
    r"^(?P<stack>[^/]+)/block_(?P<block>\d+)/layer_(?P<index>\d+)/"
    r"(?P<kind>\w+)/(?P<local>.+)$")


@dataclasses.dataclass(frozen=True)
class LayerVariable:
  """A variable of one layer of a block.

  Attributes:
    stack: "encoder", "decoder" (or a language model's stack name).
    block: the block's index.
    index: the layer's index in the block.
    kind: the layer's scope: its class name ("SynthesizerAttention",
      "SelfAttention", "EncDecAttention", "DenseReluDense") or a norm.
    local: the name inside the layer's scope ("random/R", "q_slot_vc").
  """
  stack: str
  block: int
  index: int
  kind: str
  local: str

  @property
  def scope(self) -> str:
    """The layer's variable scope, e.g. ".../layer_000/SelfAttention"."""
    return "%s/block_%03d/layer_%03d/%s" % (self.stack, self.block,
                                             self.index, self.kind)

  @property
  def is_norm(self) -> bool:
    return self.kind in NORM_SCOPES


def layer_variable(name: str) -> Optional[LayerVariable]:
  """Parses a layer's variable name (None for any other variable).

  Args:
    name: a checkpoint variable's name.

  Returns:
    Its stack, block, layer index, layer scope and local name.
  """
  match = _LAYER.match(name)
  if not match:
    return None
  return LayerVariable(match.group("stack"), int(match.group("block")),
                       int(match.group("index")), match.group("kind"),
                       match.group("local"))


def is_slot(name: str) -> bool:
  """Whether a variable is an optimizer slot of another."""
  return SLOT in name


def is_weight(name: str) -> bool:
  """Whether a variable is a model weight: not a slot, not the step."""
  return name != GLOBAL_STEP and not is_slot(name)


def split_scope(name: str, scope: str) -> Optional[List[str]]:
  """Splits a name at a layer scope: [prefix/, local], or None.

  Args:
    name: a variable name.
    scope: a layer scope's last part, e.g. "SynthesizerAttention".

  Returns:
    E.g. ["encoder/block_000/layer_000/", "random/R"] for scope
    "SynthesizerAttention"; None when the name is not in such a scope.
  """
  marker = "/%s/" % scope
  if marker not in name:
    return None
  prefix, local = name.split(marker, 1)
  return [prefix + "/", local]


def norm_aliases(name: str) -> List[str]:
  """The other names a norm scale (or its slot) has in T5 checkpoints.

  Args:
    name: a variable name, e.g. "encoder/block_000/layer_001/rms_norm/scale"
      or "decoder/final_layer_norm/scale_slot_v".

  Returns:
    The same variable under the other naming (`layer_norm` or
    `final_layer_norm` for `rms_norm`, and back), or [] for anything else.
  """
  for pattern, legacy in ((_LAYER_NORM, LEGACY_LAYER_NORM),
                          (_FINAL_NORM, LEGACY_FINAL_NORM)):
    match = pattern.match(name)
    if match:
      other = legacy if match.group(2) == NORM else NORM
      return [match.group(1) + other + match.group(3)]
  return []


def canonical(name: str) -> str:
  """A variable's name as today's mesh writes it (legacy norms renamed).

  Args:
    name: a checkpoint variable's name.

  Returns:
    `.../layer_norm/scale` and `<stack>/final_layer_norm/scale` (T5.1.0's
    released checkpoints) as `.../rms_norm/scale`; any other name as it is.
  """
  for pattern in (_LAYER_NORM, _FINAL_NORM):
    match = pattern.match(name)
    if match and match.group(2) != NORM:
      return match.group(1) + NORM + match.group(3)
  return name
