# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention weights of a trained model's layers, in NumPy or by mesh.

Attention on a text: the text is encoded with the byte vocabulary of
`pydocs_span_corruption` (plus EOS) and fed to the encoder as inputs and to
the decoder as targets (teacher forcing, inputs shifted right). Either the
real model is built with gin from the model_dir's operative_config.gin and
run by mesh on CPU (`model_attention`: every self-attention layer's weights
are read from its softmax in the graph), or layer 0 of each stack is
computed in NumPy from the checkpoint's variables (`first_layer_attention`:
its input is the embedded token, RMS-normed with the layer's scale) by
`mtf_synthesizer.core.reference`, including T5's relative position bias and
the causal mask, which mesh adds to the synthesized logits. The
input-independent functions' own attention (softmax(R), softmax(R1 R2^T)) is
`synthetic_attention`.
"""

import os
import re
from typing import Dict, List, Optional, Sequence

import numpy as np

from mtf_synthesizer import synthesizing_functions as declarations
from mtf_synthesizer.checkpoints import names
from mtf_synthesizer.core import reference as ref
from workbench import attention_layers

AttentionLayer = attention_layers.AttentionLayer

# A softmax taken in a self-attention layer's own scope: the ops inside
# mtf.softmax's scope, or the one slicewise op of ops.softmax.
_SOFTMAX_RE = re.compile(
    r"^(?P<scope>.+/(?:SynthesizerAttention|SelfAttention))"
    r"/softmax(?:_\d+)?(?:/|$)")


def causal_mask(length: int) -> np.ndarray:
  """[length, length] bool: True where query i may see memory j (j <= i)."""
  return ref.causal_mask(length)


def is_causal_stack(stack: str) -> bool:
  """Decoder (and LM) stacks are causal; the encoder is not."""
  return stack != "encoder"


def synthetic_logits(variables: Dict[str, np.ndarray], layer: AttentionLayer,
                     component: str, length: int) -> np.ndarray:
  """The input-independent logits R or R1 R2^T: [heads, length, length].

  Args:
    variables: from load_variables.
    layer: the layer.
    component: an INPUT_INDEPENDENT function of the layer.
    length: positions to keep (at most the table's max_length).

  Returns:
    The logits of every head.
  """
  return ref.synthetic_logits(component, layer.local_variables(variables),
                              length)


def max_positions(variables: Dict[str, np.ndarray],
                  layers: Sequence[AttentionLayer]) -> Optional[int]:
  """The longest position table of the layers (None: no such table)."""
  return max((ref.max_positions(c, l.local_variables(variables))
              for l in layers for c in l.components
              if c in attention_layers.INPUT_INDEPENDENT), default=None)


def synthetic_attention(variables: Dict[str, np.ndarray],
                        layer: AttentionLayer, length: int,
                        causal: bool = False,
                        component: Optional[str] = None) -> np.ndarray:
  """softmax(R) or softmax(R1 R2^T) of one layer, per head.

  Without T5's relative position bias: the synthetic attention itself, as in
  the paper's figures.

  Args:
    variables: from load_variables.
    layer: the layer.
    length: the number of positions to keep (<= max_length).
    causal: mask j > i (decoder stacks) before the softmax.
    component: which input-independent function of a mixture; default: the
      only one.

  Returns:
    [heads, length, length]; every row sums to one.
  """
  if component is None:
    independent = [c for c in layer.components
                   if c in attention_layers.INPUT_INDEPENDENT]
    if len(independent) != 1:
      raise ValueError("%s has no single input-independent synthesizer (%s)"
                       % (layer.scope, layer.components))
    component = independent[0]
  logits = synthetic_logits(variables, layer, component, length)
  if causal:
    logits = np.where(causal_mask(length), logits, -np.inf)
  return ref.softmax(logits)


def mixture_weights(variables: Dict[str, np.ndarray],
                    layer: AttentionLayer) -> Optional[np.ndarray]:
  """alpha = softmax over components of `mixture/alpha_logits`.

  Args:
    variables: from load_variables.
    layer: the layer.

  Returns:
    [components, heads], summing to one over components; None for layers
    without learned mixture weights.
  """
  return ref.mixture_weights(layer.local_variables(variables))


def encode_text(text: str) -> np.ndarray:
  """Byte-vocabulary ids of `text` plus EOS (id 1), as the task encodes it.

  Args:
    text: the text.

  Returns:
    [length] int32 ids.
  """
  import seqio  # pylint: disable=g-import-not-at-top
  ids = list(seqio.ByteVocabulary().encode(text)) + [1]
  return np.asarray(ids, np.int32)


def decode_ids(ids: Sequence[int]) -> List[str]:
  """One printable label per id (bytes as characters, EOS as </s>).

  Args:
    ids: byte-vocabulary ids.

  Returns:
    One label per id.
  """
  labels = []
  for i in ids:
    if i == 1:
      labels.append("</s>")
    elif i == 0:
      labels.append("<0>")
    elif 3 <= i < 259:
      ch = chr(i - 3)
      labels.append(ch if ch.isprintable() and ch != " " else "_")
    else:
      labels.append("<%d>" % i)
  return labels


def stack_input_ids(stack: str, ids: np.ndarray) -> np.ndarray:
  """The ids a stack embeds: the text (encoder) or it shifted right.

  Args:
    stack: "encoder" or a decoder stack's name.
    ids: [length] ids of the text.

  Returns:
    [length] int32 ids.
  """
  if stack == "encoder":
    return ids
  return np.concatenate([[0], ids[:-1]]).astype(np.int32)



def relative_bias(variables: Dict[str, np.ndarray], layer: AttentionLayer,
                  length: int) -> np.ndarray:
  """T5's relative position bias for the layer: [heads, length, length].

  With `bias_shared` (T5.1.1) the variable is held by block 0 of the stack;
  zeros when the checkpoint has none.

  Args:
    variables: from load_variables.
    layer: the layer.
    length: query and memory length.

  Returns:
    The bias (or 0.0).
  """
  own = layer.scope + "/relative_attention_bias"
  first = re.sub(r"/block_\d+/", "/block_000/", own)
  table = variables.get(own, variables.get(first))
  if table is None:
    return 0.0
  return ref.relative_bias(table, length,
                           bidirectional=not is_causal_stack(layer.stack))


def first_layer_input(variables: Dict[str, np.ndarray], layer: AttentionLayer,
                      ids: np.ndarray) -> np.ndarray:
  """The normed input of layer 0: rms_norm(embedding[ids]) * scale.

  Args:
    variables: from load_variables.
    layer: block 0 of a stack.
    ids: the stack's input ids (stack_input_ids).

  Returns:
    [length, d_model].
  """
  if layer.block != 0:
    raise ValueError("Only layer 0's input is the embedding; run the model "
                     "(--layers=all) for deeper layers.")
  stack_embedding = layer.stack + "/embedding"
  table = variables.get("shared/embedding", variables.get(stack_embedding))
  scale = layer.norm_scope + "/scale"
  scale = next(n for n in [scale] + names.norm_aliases(scale)
               if n in variables)
  return ref.rms_norm(table[ids], variables[scale])


def attention_from_input(variables: Dict[str, np.ndarray],
                         layer: AttentionLayer, x: np.ndarray,
                         causal: Optional[bool] = None) -> np.ndarray:
  """The layer's attention weights for a normed input, in NumPy.

  softmax(sum_i alpha_i S_i(X) + relative bias + causal mask), as the layer
  computes them (eq. 8), for one unpacked, unpadded sequence.

  Args:
    variables: from load_variables.
    layer: the layer.
    x: [length, d_model], the layer's normed input.
    causal: default: the stack's.

  Returns:
    [heads, length, length].
  """
  length = x.shape[0]
  num_heads = num_heads_of(variables, layer)
  local = layer.local_variables(variables)
  if ref.mixture_weights(local) is not None and not layer.order_known:
    raise ValueError("The order of the mixture components of %s is unknown "
                     "(no operative_config.gin)." % layer.scope)
  dk = local["q"].shape[1] // num_heads if "q" in local else 0
  if causal is None:
    causal = is_causal_stack(layer.stack)
  return ref.attention_weights(
      layer.components, local, x, num_heads, dk,
      visible=causal_mask(length) if causal else None,
      bias=relative_bias(variables, layer, length))


def _heads_axes(component: str) -> Dict[str, int]:
  """The axis of the heads in each of a function's variables (Table 1).

  Read from `reference.variable_shapes` with sizes that differ from one
  another; F_Q and F_K's combined [d_model, heads * d_kv] kernels have no
  heads axis of their own and are left out.

  Args:
    component: a synthesizing function's name.

  Returns:
    Local variable name -> the index of its heads axis.
  """
  heads = 13
  # Its sizes set, each to a size of its own (17, 18, ...).
  sizes = {s.name: 17 + i for i, s in enumerate(
      declarations.FUNCTIONS[component].settings)
           if s.kind in (declarations.POSITIVE_INT,
                         declarations.OPTIONAL_POSITIVE_INT)}
  shapes = ref.variable_shapes(component, d_model=7, num_heads=heads, d_kv=5,
                               max_length=11, settings=sizes)
  return {name: shape.index(heads) for name, shape in shapes.items()
          if heads in shape}


def num_heads_of(variables: Dict[str, np.ndarray],
                 layer: AttentionLayer) -> int:
  """The number of heads, from a per-head variable of the layer.

  Args:
    variables: from load_variables.
    layer: the layer.

  Returns:
    The number of heads.
  """
  for suffix in ("relative_attention_bias", "mixture/alpha_logits"):
    name = layer.scope + "/" + suffix
    if name in variables:
      return variables[name].shape[-1 if "alpha" in suffix else 0]
  for component in layer.components:
    for local, axis in _heads_axes(component).items():
      name = "%s/%s" % (layer.scope, local)
      if name in variables:
        return variables[name].shape[axis]
  first = re.sub(r"/block_\d+/", "/block_000/",
                 layer.scope + "/relative_attention_bias")
  if first in variables:
    return variables[first].shape[0]
  raise ValueError("Cannot tell the number of heads of %s." % layer.scope)


def first_layer_attention(variables: Dict[str, np.ndarray],
                          layers: Sequence[AttentionLayer],
                          ids: np.ndarray) -> Dict[str, np.ndarray]:
  """Attention weights of layer 0 of every stack on `ids`, in NumPy.

  Args:
    variables: from load_variables.
    layers: from find_attention_layers.
    ids: [length] ids of the text.

  Returns:
    layer scope -> [heads, length, length].
  """
  out = {}
  for layer in layers:
    if layer.block == 0:
      x = first_layer_input(variables, layer,
                            stack_input_ids(layer.stack, ids))
      out[layer.scope] = attention_from_input(variables, layer, x)
  return out


def model_attention(model_dir: str, ids: np.ndarray,
                    checkpoint: Optional[str] = None) -> Dict[str, np.ndarray]:
  """Runs the real model (mesh, CPU) on `ids`; reads every attention.

  The Bitransformer is built with gin from `<model_dir>/operative_config.gin`
  and restored from the checkpoint. The encoder gets `ids` as inputs, the
  decoder as targets. The attention weights of a self-attention layer
  (mesh's or ours) are the output of the softmax over `memory_length` that
  the layer takes in its own variable scope: found among the graph's
  operations by name after the graph is built.

  Args:
    model_dir: a directory with operative_config.gin and checkpoints.
    ids: [length] int ids.
    checkpoint: default: the latest in model_dir.

  Returns:
    layer scope -> [heads, length, length] (batch of one removed).
  """
  # pylint: disable=g-import-not-at-top
  import gin
  import mesh_tensorflow as mtf
  from mesh_tensorflow.transformer import utils as mtf_utils
  import tensorflow.compat.v1 as tf
  import t5.models.mesh_transformer  # pylint: disable=unused-import
  import t5_tasks  # pylint: disable=unused-import
  from workbench import tiny_model
  # pylint: enable=g-import-not-at-top
  checkpoint = attention_layers.resolve_checkpoint(checkpoint or model_dir)
  shapes = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
  vocab_size = shapes["shared/embedding"][0]
  config_path = os.path.join(model_dir, "operative_config.gin")
  with open(config_path) as f:
    kind = attention_layers.model_type(f.read())
  if kind != "bitransformer":
    raise ValueError("Only bitransformer models are supported, got %s."
                     % kind)
  with gin.unlock_config():
    gin.clear_config()
    gin.parse_config_file(config_path, skip_unknown=True)
  model = mtf_utils.build_model(
      model_type=kind, input_vocab_size=vocab_size,
      output_vocab_size=shapes.get("decoder/logits/kernel",
                                   [0, vocab_size])[1],
      layout_rules=mtf.convert_to_layout_rules(""),
      mesh_shape=mtf.convert_to_shape(""))
  graph = tf.Graph()
  with graph.as_default():
    mtf_graph = mtf.Graph()
    mesh = mtf.Mesh(mtf_graph, "mesh")
    tokens = mtf.import_tf_tensor(
        mesh, tf.constant(np.asarray(ids, np.int32)[None]),
        mtf.Shape([mtf.Dimension("batch", 1),
                   mtf.Dimension("length", len(ids))]))
    model.call_simple(inputs=tokens, targets=tokens, compute_loss=False,
                      mode=tf.estimator.ModeKeys.EVAL,
                      variable_dtype=mtf_utils.get_variable_dtype())
    weights = _attention_softmaxes(mtf_graph)
    lowering = tiny_model.lower(mtf_graph, mesh,
                                tiny_model.placement_mesh_impl(),
                                autostack=True)
    outputs = {scope: lowering.export_to_tf_tensor(w)
               for scope, w in weights.items()}
    saver = tf.train.Saver(tf.global_variables())
    copy_to_slices = lowering.copy_masters_to_slices()
    with tf.Session(graph=graph) as sess:
      saver.restore(sess, checkpoint)
      sess.run(copy_to_slices)
      values = sess.run(outputs)
  result = {}
  for scope, w in weights.items():
    names = [d.name for d in w.shape.dims]
    # Heads first, then query length, then memory length; batch (1) merged.
    rest = [i for i, n in enumerate(names)
            if n not in ("length", "memory_length")]
    value = np.transpose(values[scope], rest + [names.index("length"),
                                                names.index("memory_length")])
    result[scope] = value.reshape((-1,) + value.shape[-2:]).astype(np.float64)
  return result


def _attention_softmaxes(graph) -> Dict[str, object]:
  """The softmax over memory_length of every self-attention layer.

  mtf.softmax builds its operations in a variable scope "softmax" (made
  unique) inside the caller's scope, and its output is the last of them;
  ops.softmax (TF's fused softmax on each device's slice) is one
  operation named "softmax" in the caller's scope.

  Args:
    graph: an mtf.Graph with the model built.

  Returns:
    layer scope -> the attention weights (an mtf.Tensor).
  """
  found = {}
  for op in graph.operations:  # in the order they were built
    match = _SOFTMAX_RE.match(op.name)
    if match and op.outputs and "memory_length" in [
        d.name for d in op.outputs[0].shape.dims]:
      found[match.group("scope")] = op.outputs[0]
  return found
