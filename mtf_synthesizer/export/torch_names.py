# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Mesh checkpoint variables as the PyTorch model's weights: names, layouts.

One rule per kind of variable, NumPy only:

  mesh                                             PyTorch
  shared/embedding                                 model.shared.weight
  <stack>/embedding                                model.<stack>.embed_tokens.weight
  <stack>/positional_embedding                     model.<stack>.embed_positions.weight
  <stack>/block_i/layer_j/<Attention>/{q,k,v,o}    ...block.i.layer.j.<T5 name>.q.weight (transposed)
  .../SynthesizerAttention/kv                      ...SelfAttention.v.weight (keys-free layers)
  .../<fn>/w1 [d_model, heads, hidden]             ...SelfAttention.<fn>.w1.weight [heads * hidden, d_model]
  .../<fn>/b1 [heads, hidden]                      ...SelfAttention.<fn>.w1.bias
  .../<fn>/{R,R1,R2,w2,b2,wa,ba,wb,bb}             ...SelfAttention.<fn>.<same>
  .../mixture/alpha_logits                         ...SelfAttention.alpha_logits
  .../relative_attention_bias [heads, buckets]     ...relative_attention_bias.weight (transposed)
  .../DenseReluDense/{wi,wi_0,wi_1,wo}/kernel      ...DenseReluDense.<same>.weight (transposed)
  .../layer_j/{rms_norm,layer_norm}/scale          ...layer.j.layer_norm.weight
  <stack>/{rms_norm,final_layer_norm}/scale        model.<stack>.final_layer_norm.weight
  <stack>/logits/kernel                            lm_head.weight (transposed)

where <T5 name> is SelfAttention for mesh's SelfAttention and
SynthesizerAttention, EncDecAttention for the cross-attention. A one-head
mesh model leaves the heads axis out of its per-head tables; it is put back.
global_step and optimizer slots have no PyTorch weight. Mesh's names are
parsed by `mtf_synthesizer.checkpoints.names` (the grammar, and T5.1.0's
legacy norm names).
"""

from typing import Dict, Optional, Tuple

import numpy as np

from mtf_synthesizer import attentions
from mtf_synthesizer.checkpoints import names
from mtf_synthesizer.core import reference

_ATTENTIONS = {"SelfAttention": "SelfAttention",
               "SynthesizerAttention": "SelfAttention",
               "EncDecAttention": "EncDecAttention"}
# D's and FD's first layer: an nn.Linear in PyTorch, not a per-head table.
_FIRST_LAYER = ("w1", "b1")


def per_head_tables() -> Dict[str, int]:
  """Each function's per-head tables and their rank with the heads axis.

  Read from Table 1's variables (`reference.variable_shapes`) of every
  function of the attention table, so a new function's tables are named
  with no edit here: `<function>/<leaf>` is `SelfAttention.<function>.<leaf>`.

  Returns:
    Leaf name -> rank (the heads axis is axis 0).
  """
  functions = sorted({f for a in attentions.VARIANTS for f in a.components})
  ranks = {}
  for function in functions:
    shapes = reference.variable_shapes(function, d_model=2, num_heads=3,
                                       d_kv=4, max_length=6)
    for variable, shape in shapes.items():
      scope, _, leaf = variable.rpartition("/")
      if scope == function and leaf not in _FIRST_LAYER:
        ranks[leaf] = len(shape)
  return ranks


_PER_HEAD = per_head_tables()


def _per_head_rank(function: str, leaf: str) -> Optional[int]:
  """A per-head table's rank: Table 1's, or a function's own `export_ranks`.

  Functions outside the attention table (defined elsewhere and registered
  with mesh's `synthesizers.BY_NAME`) declare their tables' ranks.
  """
  if leaf in _PER_HEAD:
    return _PER_HEAD[leaf]
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.core import interface
  cls = interface.BY_NAME.get(function)
  return None if cls is None else cls.export_ranks.get(leaf)


class UnknownVariable(ValueError):
  """A checkpoint variable the PyTorch model has no weight for."""


def _attention_weight(scope: str, rest: str, value: np.ndarray,
                      num_heads: int) -> Tuple[str, np.ndarray]:
  """An attention layer's variable: its local name and PyTorch layout."""
  parts = rest.split("/")
  if parts[-1] == "kernel":
    parts = parts[:-1]
  leaf = parts[-1]
  if len(parts) == 1:
    if leaf in ("q", "k", "v", "o"):
      return "%s.%s.weight" % (scope, leaf), value.T
    if leaf == "kv":
      return "%s.v.weight" % scope, value.T
    if leaf == "relative_attention_bias":
      table = value.reshape(num_heads, -1)
      return "%s.relative_attention_bias.weight" % scope, table.T
  if parts == ["mixture", "alpha_logits"]:
    return "%s.alpha_logits" % scope, value.reshape(-1, num_heads)
  if len(parts) == 2:
    function, leaf = parts
    prefix = "%s.%s" % (scope, function)
    if leaf == "w1":  # [d_model, heads, hidden] -> Linear [heads*hidden, d]
      return prefix + ".w1.weight", value.reshape(value.shape[0], -1).T
    if leaf == "b1":
      return prefix + ".w1.bias", value.reshape(-1)
    rank = _per_head_rank(function, leaf)
    if rank is not None:
      if value.ndim == rank - 1:
        value = value[None]
      return "%s.%s" % (prefix, leaf), value
  raise UnknownVariable(rest)


def torch_weight(mesh_name: str, value: np.ndarray, num_heads: int,
                 stacks: Dict[str, str]) -> Optional[Tuple[str, np.ndarray]]:
  """The PyTorch weight of a checkpoint variable.

  Args:
    mesh_name: the variable's name in the checkpoint.
    value: its value.
    num_heads: the model's heads (for one-head tables).
    stacks: mesh's stack scope -> the PyTorch model's prefix of that stack,
      e.g. {"encoder": "model.encoder", "decoder": "model.decoder"} or, for
      a language model, {"decoder": "model"}.

  Returns:
    (name, array in the PyTorch layout), or None for global_step and
    optimizer slots.

  Raises:
    UnknownVariable: a variable the PyTorch model has no weight for.
  """
  if not names.is_weight(mesh_name):
    return None
  if mesh_name == "shared/embedding":
    return "model.shared.weight", value
  name = names.canonical(mesh_name)  # T5.1.0's released norm names
  stack, _, rest = name.partition("/")
  if stack not in stacks:
    raise UnknownVariable(mesh_name)
  prefix = stacks[stack]
  variable = names.layer_variable(name)
  if variable:
    layer = "%s.block.%d.layer.%d" % (prefix, variable.block, variable.index)
    if variable.is_norm and variable.local == "scale":
      return layer + ".layer_norm.weight", value
    if variable.kind in _ATTENTIONS:
      try:
        return _attention_weight(
            "%s.%s" % (layer, _ATTENTIONS[variable.kind]), variable.local,
            value, num_heads)
      except UnknownVariable:
        raise UnknownVariable(mesh_name) from None
    if variable.kind == "DenseReluDense" and variable.local.endswith(
        "/kernel"):
      return "%s.DenseReluDense.%s.weight" % (
          layer, variable.local[:-len("/kernel")]), value.T
    raise UnknownVariable(mesh_name)
  if rest == "embedding":
    return prefix + ".embed_tokens.weight", value
  if rest == "positional_embedding":
    return prefix + ".embed_positions.weight", value
  if rest == names.NORM + "/scale":
    return prefix + ".final_layer_norm.weight", value
  if rest == "logits/kernel":
    return "lm_head.weight", value.T
  raise UnknownVariable(mesh_name)
