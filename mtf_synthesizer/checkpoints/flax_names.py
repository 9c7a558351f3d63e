# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Mesh checkpoint variables as the Flax model's parameters: names, layouts.

NumPy only (no TensorFlow, no JAX). The Flax tree uses T5X/flaxformer's
names for T5's parameters, flat paths joined by "/":

  mesh                                          Flax
  shared/embedding [vocab, d]                   token_embedder/embedding
  transformer/embedding (a language model)      decoder/token_embedder/
                                                  embedding
  {encoder,decoder}/embedding (unshared)        <stack>/token_embedder/embedding
  <stack>/block_i/layer_j/<Attention>/q, k, v   <stack>/layers_i/<attention>/
    [d, heads * d_kv]                             {query,key,value}/kernel
                                                  [embed, heads, kv]
  .../SynthesizerAttention/kv (keys-free layers) .../<attention>/value/kernel
  .../<Attention>/o [heads * d_kv, d]           .../<attention>/out/kernel
                                                  [heads, kv, embed]
  .../relative_attention_bias [heads, buckets]  <stack>/relpos_bias/
    (block 0; a bias shared by the layers)        rel_embedding
  .../relative_attention_bias (a bias per       <stack>/layers_i/relpos_bias/
    layer)                                        rel_embedding
  .../SynthesizerAttention/<function>/<leaf>    .../<attention>/<function>/
    (random/R, dense/w1, ...)                     <leaf>, mesh's shapes
  .../SynthesizerAttention/mixture/alpha_logits .../<attention>/mixture/
    [functions, heads]                            alpha_logits
  .../DenseReluDense/{wi,wi_0,wi_1,wo}/kernel   .../mlp/<same>/kernel
  .../layer_j/{rms_norm,layer_norm}/scale       .../layers_i/<norm>/scale
  <stack>/{rms_norm,final_layer_norm}/scale     encoder/encoder_norm/scale,
                                                decoder/decoder_norm/scale
  decoder/logits/kernel, transformer/logits/... decoder/logits_dense/kernel

where <stack> is encoder or decoder (mesh's `transformer`, a language
model's stack, is the Flax `decoder`); <attention> is `attention` in the
encoder, `self_attention` (SelfAttention, SynthesizerAttention) or
`encoder_decoder_attention` (EncDecAttention) in the decoder; <norm> is the
norm before the layer's sublayer: `pre_attention_layer_norm`,
`pre_self_attention_layer_norm`, `pre_cross_attention_layer_norm` or
`pre_mlp_layer_norm`. Every change of layout is a reshape in C order:
mesh's combined kernels are heads-major (head h owns columns h * d_kv to
(h + 1) * d_kv; `core/reference.py`), and a one-head model's tables that
mesh stores without their heads axis get it back. Adafactor's slots
(`_slot_vc`, `_slot_vr`, `_slot_v`, `_slot_m`) and `global_step` have no
parameter. A relative attention bias in block 0 alone is a shared bias when
the Flax model expects `<stack>/relpos_bias/rel_embedding`, else block 0's
own.

`flax_params` restores a Flax model's expected parameters from a checkpoint
with `checkpoints.from_t5`'s rule; `mesh_params` maps a Flax tree back to
mesh's names and shapes.
"""

import dataclasses
import re
from typing import (Any, Callable, Dict, Iterable, List, Mapping, Optional,
                    Sequence, Tuple, Union)

import numpy as np

from mtf_synthesizer import synthesizing_functions as declarations
from mtf_synthesizer.checkpoints import names

Shape = Tuple[int, ...]

EMBEDDING = "token_embedder/embedding"
LOGITS = "decoder/logits_dense/kernel"
SHARED_RELPOS = "%s/relpos_bias/rel_embedding"
LAYER_RELPOS = "%s/layers_%d/relpos_bias/rel_embedding"
MIXTURE = "mixture/alpha_logits"
_STACKS = {"encoder": "encoder", "decoder": "decoder",
           "transformer": "decoder"}
_FINAL_NORMS = {"encoder": "encoder/encoder_norm/scale",
                "decoder": "decoder/decoder_norm/scale"}
_KERNELS = {"q": "query", "k": "key", "v": "value", "kv": "value",
            "o": "out"}
_SELF_ATTENTIONS = ("SelfAttention", "SynthesizerAttention")
_NORMS = {"attention": "pre_attention_layer_norm",
          "self_attention": "pre_self_attention_layer_norm",
          "encoder_decoder_attention": "pre_cross_attention_layer_norm",
          "mlp": "pre_mlp_layer_norm"}
_MLP = re.compile(r"^(wi|wi_\d+|wo)/kernel$")
# A Synthesizer's own parameters under an attention module: a function's
# tables and projections, and the mixture's weights.
_OWN = re.compile(r"/(?:attention|self_attention)/(?:mixture/alpha_logits|"
                  r"(?!query/|key/|value/|out/)\w+/\w+)$")
_KEY_FREE = re.compile(r"^(.*/(?:attention|self_attention))/(query|key)/"
                       r"kernel$")


class MappingError(ValueError):
  """A checkpoint that does not fit the Flax model, every problem named.

  Attributes:
    unknown: mesh variables no rule maps.
    unexpected: mesh variable -> its Flax path, which the model lacks.
    missing: expected Flax parameters with no mesh variable that may not
      start fresh.
    mismatched: Flax path -> (mesh name, mesh shape, the shape it maps to,
      the expected shape).
  """

  def __init__(self, unknown: Sequence[str],
               unexpected: Mapping[str, str], missing: Sequence[str],
               mismatched: Mapping[str, Tuple[str, Shape, Shape, Shape]],
               checkpoint: str = ""):
    self.unknown = list(unknown)
    self.unexpected = dict(unexpected)
    self.missing = list(missing)
    self.mismatched = dict(mismatched)
    parts = []
    if self.unknown:
      parts.append("%d mesh variables neither mapped to the Flax tree nor "
                   "expected: %s" % (len(self.unknown),
                                     ", ".join(self.unknown)))
    if self.unexpected:
      parts.append("%d mesh variables map to parameters the Flax model does "
                   "not have: %s" % (len(self.unexpected), ", ".join(
                       "%s (%s)" % item
                       for item in sorted(self.unexpected.items()))))
    if self.missing:
      parts.append("%d Flax parameters have no mesh variable and may not "
                   "start fresh: %s" % (len(self.missing),
                                        ", ".join(self.missing)))
    if self.mismatched:
      parts.append("%d shapes differ: %s" % (len(self.mismatched), "; ".join(
          "%s: mesh %s %s -> %s, the Flax model expects %s" % (
              path, name, list(mesh), list(mapped), list(expected))
          for path, (name, mesh, mapped, expected)
          in sorted(self.mismatched.items()))))
    where = " from %s" % checkpoint if checkpoint else ""
    super().__init__("The checkpoint%s does not fit the Flax model. %s." % (
        where, ". ".join(parts)))


@dataclasses.dataclass(frozen=True)
class Rule:
  """Where one mesh variable goes.

  Attributes:
    mesh_name: the checkpoint's name.
    path: the Flax parameter's path.
    kind: how the layout changes: "kernel_in" ([d, heads * kv] -> [d,
      heads, kv]), "kernel_out" ([heads * kv, d] -> [heads, kv, d]),
      "heads_first" (a table whose first axis is the heads), "heads_last"
      (`mixture/alpha_logits`), "w1" ([d, heads, hidden]), "per_head" (a
      function's table whose heads axis is first, given its full rank), or
      "same".
    rank: the full rank of a "per_head" table.
  """
  mesh_name: str
  path: str
  kind: str = "same"
  rank: int = 0

  def flax_shape(self, shape: Sequence[int], num_heads: int
                 ) -> Optional[Shape]:
    """The Flax shape of a mesh shape (None: it cannot be split so)."""
    shape = tuple(int(s) for s in shape)
    size = int(np.prod(shape, dtype=np.int64))
    h = num_heads
    if self.kind == "kernel_in" and len(shape) == 2 and shape[1] % h == 0:
      return (shape[0], h, shape[1] // h)
    if self.kind == "kernel_out" and len(shape) == 2 and shape[0] % h == 0:
      return (h, shape[0] // h, shape[1])
    if self.kind == "heads_first" and size % h == 0 and (
        len(shape) == 2 or (len(shape) == 1 and h == 1)):
      return (h, size // h)
    if self.kind == "heads_last" and size % h == 0 and (
        len(shape) == 2 or (len(shape) == 1 and h == 1)):
      return (size // h, h)
    if self.kind == "w1" and shape and size % (shape[0] * h) == 0 and (
        len(shape) == 3 or (len(shape) == 2 and h == 1)):
      return (shape[0], h, size // (shape[0] * h))
    if self.kind == "per_head":
      if len(shape) == self.rank - 1 and h == 1:
        return (1,) + shape
      return shape if len(shape) == self.rank else None
    if self.kind in ("kernel_in", "kernel_out", "heads_first", "heads_last",
                     "w1"):
      return None
    return shape


def _function_ranks() -> Dict[str, int]:
  """Every synthesizing function's own variables -> their full rank."""
  return {v.name: len(v.shape)
          for function in declarations.FUNCTIONS.values()
          for v in function.variables
          if v.initializer != declarations.LAYER}


_RANKS = _function_ranks()


def _attention_rule(mesh_name: str, module: str, local: str,
                    stack: str, block: int, shared_relpos: bool
                    ) -> Optional[Rule]:
  """The rule of an attention layer's variable (None: unknown)."""
  if local in _KERNELS:
    kind = "kernel_out" if local == "o" else "kernel_in"
    return Rule(mesh_name, "%s/%s/kernel" % (module, _KERNELS[local]), kind)
  if local == "relative_attention_bias":
    path = (SHARED_RELPOS % stack if shared_relpos and block == 0
            else LAYER_RELPOS % (stack, block))
    return Rule(mesh_name, path, "heads_first")
  if local == MIXTURE:
    return Rule(mesh_name, "%s/%s" % (module, MIXTURE), "heads_last")
  parts = local.split("/")
  if len(parts) != 2 or not all(re.fullmatch(r"\w+", p) for p in parts):
    return None
  path = "%s/%s" % (module, local)
  if parts[1] == "w1":
    return Rule(mesh_name, path, "w1")
  if parts[1] == "b1":
    return Rule(mesh_name, path, "heads_first")
  rank = _RANKS.get(local)
  if rank is not None:
    return Rule(mesh_name, path, "per_head", rank)
  return Rule(mesh_name, path)  # a function outside the table: as stored


def rules(mesh_names: Iterable[str], shared_relpos: bool = True
          ) -> Tuple[Dict[str, Rule], List[str]]:
  """The Flax parameter of every weight of a checkpoint.

  Args:
    mesh_names: a checkpoint's variable names (slots and `global_step` are
      skipped).
    shared_relpos: a relative attention bias in block 0 is the stack's
      shared one (`<stack>/relpos_bias/rel_embedding`); else block 0's own.

  Returns:
    (mesh name -> Rule, the weights no rule maps).
  """
  weights = sorted(n for n in mesh_names if names.is_weight(n))
  # The sublayer of each (stack, block, layer), from its variables: a norm
  # is the one before that sublayer.
  sublayers = {}
  for name in weights:
    variable = names.layer_variable(names.canonical(name))
    if variable is None or variable.is_norm:
      continue
    stack = _STACKS.get(variable.stack)
    if variable.kind == "DenseReluDense":
      sublayer = "mlp"
    elif variable.kind == "EncDecAttention":
      sublayer = "encoder_decoder_attention"
    elif variable.kind in _SELF_ATTENTIONS:
      sublayer = "attention" if stack == "encoder" else "self_attention"
    else:
      continue
    sublayers[(variable.stack, variable.block, variable.index)] = sublayer
  out, unknown = {}, []
  for name in weights:
    rule = _rule(name, sublayers, shared_relpos)
    if rule is None:
      unknown.append(name)
    else:
      out[name] = rule
  return out, unknown


def _rule(name: str, sublayers: Mapping[Tuple[str, int, int], str],
          shared_relpos: bool) -> Optional[Rule]:
  """One weight's rule, or None."""
  if name == "shared/embedding":
    return Rule(name, EMBEDDING)
  canonical = names.canonical(name)
  stack_name, _, rest = canonical.partition("/")
  stack = _STACKS.get(stack_name)
  if stack is None:
    return None
  if rest == "embedding":
    return Rule(name, "%s/%s" % (stack, EMBEDDING))
  if rest == names.NORM + "/scale":
    return Rule(name, _FINAL_NORMS[stack])
  if rest == "logits/kernel" and stack == "decoder":
    return Rule(name, LOGITS)
  variable = names.layer_variable(canonical)
  if variable is None:
    return None
  sublayer = sublayers.get((variable.stack, variable.block, variable.index))
  layer = "%s/layers_%d" % (stack, variable.block)
  if variable.is_norm:
    if variable.local != "scale" or sublayer is None:
      return None
    return Rule(name, "%s/%s/scale" % (layer, _NORMS[sublayer]))
  if sublayer is None:
    return None
  if sublayer == "mlp":
    if not _MLP.match(variable.local):
      return None
    return Rule(name, "%s/mlp/%s" % (layer, variable.local))
  return _attention_rule(name, "%s/%s" % (layer, sublayer), variable.local,
                         stack, variable.block, shared_relpos)


def is_synthesizer_own(path: str) -> bool:
  """Whether a Flax parameter is one of the Synthesizer's own.

  Args:
    path: a Flax parameter path.

  Returns:
    True for a synthesizing function's tables and projections (`random/R`,
    `dense/w1`, ...) and the mixture's `mixture/alpha_logits` under a
    self-attention module: what a released T5 checkpoint does not hold, and
    what starts fresh when a Synthesizer starts from T5.
  """
  return bool(_OWN.search(path))


def infer_num_heads(expected: Mapping[str, Sequence[int]]) -> int:
  """The heads of a Flax model, from its attention kernels' shapes.

  Args:
    expected: Flax path -> shape.

  Returns:
    The heads axis of a `query`, `key` or `value` kernel [embed, heads,
    kv], else of an `out` kernel [heads, kv, embed], else 1.
  """
  for path, shape in sorted(expected.items()):
    if re.search(r"/(query|key|value)/kernel$", path) and len(shape) == 3:
      return int(shape[1])
  for path, shape in sorted(expected.items()):
    if path.endswith("/out/kernel") and len(shape) == 3:
      return int(shape[0])
  return 1


class _Source:
  """Shapes and values of a checkpoint, a reader or a dict of arrays."""

  def __init__(self, source: Any):
    self.description = ""
    if isinstance(source, str):
      # pylint: disable-next=g-import-not-at-top
      from mtf_synthesizer.checkpoints import tf_format
      self.description = source
      source = tf_format.load_checkpoint(source)
    if isinstance(source, Mapping):
      self._arrays = source
      self._reader = None
      self.names = sorted(source)
    else:
      self._arrays = None
      self._reader = source
      self.names = list(source.variable_names())
      self.description = self.description or getattr(source, "prefix", "")

  def shape(self, name: str) -> Shape:
    if self._reader is not None:
      return tuple(self._reader.shape(name))
    return tuple(np.shape(self._arrays[name]))

  def read(self, name: str) -> np.ndarray:
    if self._reader is not None:
      return self._reader.read(name)
    return np.asarray(self._arrays[name])


@dataclasses.dataclass
class FlaxParams:
  """A Flax model's parameters restored from a mesh checkpoint.

  Attributes:
    restored: Flax path -> array in the Flax layout, in the stored dtype
      (bfloat16 as `ml_dtypes.bfloat16`), for every expected parameter the
      checkpoint holds.
    fresh: the expected Flax paths that start from the model's initializers
      (the Synthesizer's own parameters absent from a T5 checkpoint).
    sources: Flax path -> the mesh variable it was restored from.
    unused: mesh weights left out by design: the query and key kernels of
      a checkpoint's dot-product attention, where the Flax model's
      attention has neither (a keys-free variant started from T5).
  """
  restored: Dict[str, np.ndarray]
  fresh: List[str]
  sources: Dict[str, str]
  unused: List[str]


def flax_params(source: Union[str, Mapping[str, np.ndarray], Any],
                expected: Mapping[str, Sequence[int]],
                num_heads: Optional[int] = None,
                may_start_fresh: Callable[[str], bool] = is_synthesizer_own
                ) -> FlaxParams:
  """Restores a Flax model's parameters from a mesh checkpoint.

  `checkpoints.from_t5`'s rule: every expected Flax parameter is restored
  from a mesh variable, or is one of the Synthesizer's own and starts fresh
  (a released T5 checkpoint: T5.1.0, T5.1.1, mT5, ByT5 into any variant);
  optimizer slots and `global_step` are ignored; anything else is an error.

  Args:
    source: a checkpoint (a prefix or a model directory, read with
      `tf_format.load_checkpoint`), a reader with `variable_names()`,
      `shape(name)` and `read(name)` (`tf_format.CheckpointReader`), or
      mesh name -> array.
    expected: the Flax model's parameters: path -> shape.
    num_heads: the model's heads (default: `infer_num_heads(expected)`).
    may_start_fresh: which expected paths may start fresh when the
      checkpoint lacks them (default: the Synthesizer's own,
      `is_synthesizer_own`).

  Returns:
    The FlaxParams.

  Raises:
    MappingError: one error naming every mesh weight no rule maps, every
      one whose Flax parameter the model lacks, every expected parameter
      with no mesh variable that may not start fresh, and every shape that
      differs (mesh's, mapped and expected).
  """
  checkpoint = _Source(source)
  heads = num_heads if num_heads is not None else infer_num_heads(expected)
  shared = any(re.fullmatch(SHARED_RELPOS % r"\w+", p) for p in expected)
  mapping, unknown = rules(checkpoint.names, shared_relpos=shared)
  restored, sources, unexpected, mismatched = {}, {}, {}, {}
  by_path = {}
  for name, rule in sorted(mapping.items()):
    if rule.path not in expected:
      unexpected[name] = rule.path
      continue
    if rule.path in by_path:  # two namings of one variable (norm aliases)
      unknown.append(name)
      continue
    by_path[rule.path] = rule
  unused = []
  for name, path in sorted(unexpected.items()):
    match = _KEY_FREE.match(path)
    if match and not any(p.startswith(match.group(1) + "/" + k + "/")
                         for p in expected for k in ("query", "key")):
      unused.append(name)
  for name in unused:
    del unexpected[name]
  for path, rule in sorted(by_path.items()):
    shape = checkpoint.shape(rule.mesh_name)
    mapped = rule.flax_shape(shape, heads)
    want = tuple(int(s) for s in expected[path])
    if mapped != want:
      mismatched[path] = (rule.mesh_name, shape, mapped or shape, want)
      continue
    restored[path] = checkpoint.read(rule.mesh_name).reshape(want)
    sources[path] = rule.mesh_name
  missing, fresh = [], []
  for path in sorted(expected):
    if path in by_path:
      continue
    (fresh if may_start_fresh(path) else missing).append(path)
  if unknown or unexpected or missing or mismatched:
    raise MappingError(sorted(unknown), unexpected, missing, mismatched,
                       checkpoint.description)
  return FlaxParams(restored, fresh, sources, unused)


def mesh_params(params: Mapping[str, np.ndarray],
                mesh_shapes: Mapping[str, Sequence[int]],
                num_heads: Optional[int] = None) -> Dict[str, np.ndarray]:
  """Maps Flax parameters back to mesh's names and layouts.

  Args:
    params: Flax path -> array.
    mesh_shapes: the mesh checkpoint's weights: name -> shape (slots and
      `global_step` are skipped).
    num_heads: the heads (default: from the Flax kernels).

  Returns:
    mesh name -> array in mesh's shape, for every weight of `mesh_shapes`.

  Raises:
    MappingError: a mesh weight with no Flax parameter, or shapes that
      differ.
  """
  heads = num_heads if num_heads is not None else infer_num_heads(
      {p: np.shape(v) for p, v in params.items()})
  shared = any(re.fullmatch(SHARED_RELPOS % r"\w+", p) for p in params)
  mapping, unknown = rules(mesh_shapes, shared_relpos=shared)
  out, unexpected, mismatched = {}, {}, {}
  for name, rule in sorted(mapping.items()):
    if rule.path not in params:
      unexpected[name] = rule.path
      continue
    shape = tuple(int(s) for s in mesh_shapes[name])
    value = np.asarray(params[rule.path])
    if rule.flax_shape(shape, heads) != value.shape:
      mismatched[rule.path] = (name, shape, rule.flax_shape(shape, heads)
                               or shape, value.shape)
      continue
    out[name] = value.reshape(shape)
  if unknown or unexpected or mismatched:
    raise MappingError(sorted(unknown), unexpected, [], mismatched)
  return out
