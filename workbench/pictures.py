# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Pictures of the attention of trained Synthesizer and vanilla models.

The library of `tools/attention_pictures.py`: reads checkpoints written by
the stock `t5_mesh_transformer` (a model_dir or a checkpoint path) and the
model_dir's operative_config.gin (with gin's own parser), computes attention
weights, and writes PNGs (matplotlib, Agg backend):

  synthetic_<model>.png   softmax(R) (R, Fix) or softmax(R1 R2^T) (FR) per
                          layer and head, the paper's pictures of learned
                          synthetic attention; truncated to `length`, with
                          the causal mask in decoder stacks.
  input_<model>.png       the attention weights on a text, per layer and
                          head, for every model (input-dependent or not).
  histograms.png          histograms of those weights per layer, one column
                          per model (synthesizer and vanilla side by side).
  mixture_<model>.png     the mixture weights alpha per layer and head.

Attention on a text: the text is encoded with the byte vocabulary of
`pydocs_span_corruption` (plus EOS) and fed to the encoder as inputs and to
the decoder as targets (teacher forcing, inputs shifted right). Either the
real model is built with gin from the model_dir's operative_config.gin and
run by mesh on CPU (`model_attention`: every self-attention layer's weights
are read from its softmax in the graph), or layer 0 of each stack is
computed in NumPy from the checkpoint's variables (`first_layer_attention`:
its input is the embedded token, RMS-normed with the layer's scale) by
`mtf_synthesizer.reference`, including T5's relative position bias and the
causal mask, which mesh adds to the synthesized logits.

The functions and their names come from the variant table and the NumPy
reference: a synthesizing function added there is drawn with no edit here.
"""

import dataclasses
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from gin import config_parser
import numpy as np

from mtf_synthesizer import attentions
from mtf_synthesizer import reference as ref
from mtf_synthesizer import synthesizers

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
ATTENTION_KINDS = ("SynthesizerAttention", "SelfAttention")
DEFAULT_TEXT = "The list.sort() method sorts the list in place."
_LAYER_RE = re.compile(
    r"^(?P<stack>.+?)/block_(?P<block>\d+)/(?P<layer>layer_\d+)/"
    r"(?P<kind>SynthesizerAttention|SelfAttention)/")
# A softmax taken in a self-attention layer's own scope: the ops inside
# mtf.softmax's scope, or the one slicewise op of ops.softmax.
_SOFTMAX_RE = re.compile(
    r"^(?P<scope>.+/(?:SynthesizerAttention|SelfAttention))"
    r"/softmax(?:_\d+)?(?:/|$)")


@dataclasses.dataclass
class AttentionLayer:
  """One self-attention layer of a checkpoint.

  Attributes:
    stack: "encoder" or "decoder" (or the LM's stack name).
    block: the block index.
    scope: the variable scope, ".../SynthesizerAttention" or
      ".../SelfAttention" (no trailing slash).
    kind: "SynthesizerAttention" or "SelfAttention" (mesh's vanilla layer).
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
    """The scope of the RMS norm applied to the layer's input."""
    return self.scope.rsplit("/", 1)[0] + "/rms_norm"

  @property
  def label(self) -> str:
    """e.g. "encoder layer 0"."""
    return "%s layer %d" % (self.stack, self.block)

  @property
  def short_kind(self) -> str:
    """e.g. "R+V"; "V (mesh)" for mesh's SelfAttention."""
    if self.kind == "SelfAttention":
      return "V (mesh)"
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
    if "_slot_" in name or name == "global_step":
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
      names = [r.split("/")[-1].split(".")[-1]
               for r in (value if isinstance(value, (list, tuple)) else [])
               if isinstance(r, _Reference)]
      out[statement.scope] = [CLASS_TO_COMPONENT[n] for n in names
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
    match = _LAYER_RE.match(name)
    if match:
      scope = name[:match.end() - 1]
      scopes[scope] = (match.group("stack"), int(match.group("block")),
                       match.group("kind"))
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
              if c in INPUT_INDEPENDENT), default=None)


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
    independent = [c for c in layer.components if c in INPUT_INDEPENDENT]
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
  return ref.rms_norm(table[ids], variables[layer.norm_scope + "/scale"])


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
    if component in INPUT_INDEPENDENT:
      return variables["%s/%s" % (layer.scope,
                                  COMPONENT_MARKERS[component])].shape[0]
    if component in ("dense", "factorized_dense"):
      return variables["%s/%s/w1" % (layer.scope, component)].shape[1]
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
  checkpoint = resolve_checkpoint(checkpoint or model_dir)
  shapes = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
  vocab_size = shapes["shared/embedding"][0]
  config_path = os.path.join(model_dir, "operative_config.gin")
  with open(config_path) as f:
    kind = model_type(f.read())
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


# ----------------------------------------------------------------- pictures


def _plt():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _heatmap_grid(num_panels: int, columns: int
                  ) -> Tuple[int, int, Tuple[float, float]]:
  """(columns, rows, figure size in inches) of a plot_heatmaps picture."""
  columns = min(columns, num_panels)
  rows = int(math.ceil(num_panels / columns))
  # Inches that are exact binary fractions, so pixels are exact too.
  return columns, rows, (4.5 * columns, 4.0 * rows + 0.5)


def heatmap_size(num_panels: int, columns: int = 4,
                 dpi: int = 100) -> Tuple[int, int]:
  """The (width, height) in pixels of a plot_heatmaps picture."""
  width, height = _heatmap_grid(num_panels, columns)[2]
  return int(width * dpi), int(height * dpi)


def plot_heatmaps(panels: Sequence[Tuple[str, np.ndarray, bool]], path: str,
                  title: str, tick_labels: Optional[Sequence[str]] = None,
                  columns: int = 4, dpi: int = 100) -> str:
  """Writes a grid of [query, memory] heatmaps to `path`.

  Masked (future) cells of causal panels are white. The colour scale of each
  panel runs from its smallest to its 99th-percentile visible weight, so
  that a few large weights (e.g. row 0 of a causal panel, which is 1) do not
  hide the rest; the colour bar gives the values.

  Args:
    panels: (panel title, [length, length] weights, causal).
    path: the PNG to write.
    title: the figure title.
    tick_labels: token labels for both axes (up to 64 tokens).
    columns: panels per row.
    dpi: resolution.

  Returns:
    path.
  """
  plt = _plt()
  columns, rows, inches = _heatmap_grid(len(panels), columns)
  fig, axes = plt.subplots(rows, columns, figsize=inches, squeeze=False)
  for ax in axes.flat[len(panels):]:
    ax.axis("off")
  cmap = plt.get_cmap("viridis").copy()
  cmap.set_bad("white")
  for ax, (name, weights, causal) in zip(axes.flat, panels):
    length = weights.shape[-1]
    visible = (causal_mask(length) if causal
               else np.ones(weights.shape, bool))
    shown = np.ma.masked_where(~visible, weights)
    image = ax.imshow(shown, cmap=cmap, interpolation="nearest",
                      vmin=float(np.min(weights[visible])),
                      vmax=float(np.percentile(weights[visible], 99)))
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("memory position j (attended to)", fontsize=8)
    ax.set_ylabel("query position i", fontsize=8)
    if tick_labels is not None and len(tick_labels) <= 64:
      ticks = np.arange(len(tick_labels))
      ax.set_xticks(ticks, tick_labels, fontsize=6, rotation=90,
                    family="monospace")
      ax.set_yticks(ticks, tick_labels, fontsize=6, family="monospace")
    else:
      ax.tick_params(labelsize=7)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, extend="max")
    bar.ax.tick_params(labelsize=6)
  fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path


def plot_histograms(models: Dict[str, Dict[str, Tuple[str, np.ndarray]]],
                    path: str, title: str, bins: int = 40,
                    dpi: int = 100) -> str:
  """Histograms of attention weights per layer, one column per model.

  Args:
    models: model name -> {layer label -> (layer kind, weights [heads, L, L])}.
      Entries that are exactly 0 because of the causal mask are left out.
    path: the PNG to write.
    title: the figure title.
    bins: histogram bins over [0, 1].
    dpi: resolution.

  Returns:
    path.
  """
  plt = _plt()
  labels = []
  for per_layer in models.values():
    labels += [l for l in per_layer if l not in labels]
  fig, axes = plt.subplots(len(labels), len(models),
                           figsize=(4.0 * len(models), 2.5 * len(labels) + 0.5),
                           squeeze=False, sharex=True)
  edges = np.linspace(0.0, 1.0, bins + 1)
  for col, (model, per_layer) in enumerate(models.items()):
    for row, label in enumerate(labels):
      ax = axes[row, col]
      if label not in per_layer:
        ax.axis("off")
        continue
      kind, weights = per_layer[label]
      length = weights.shape[-1]
      visible = np.broadcast_to(
          causal_mask(length) if is_causal_stack(label.split()[0])
          else np.ones((length, length), bool), weights.shape)
      ax.hist(weights[visible], bins=edges, color="C%d" % col, log=True)
      ax.set_title("%s (%s): %s" % (model, kind, label), fontsize=8)
      ax.tick_params(labelsize=7)
      if row == len(labels) - 1:
        ax.set_xlabel("attention weight", fontsize=8)
      if col == 0:
        ax.set_ylabel("count (log)", fontsize=8)
  fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path


def plot_mixture_weights(alphas: Sequence[Tuple[str, List[str], np.ndarray]],
                         path: str, title: str, dpi: int = 100) -> str:
  """Bar charts of alpha per head, one panel per layer.

  Args:
    alphas: (layer label, component short names, alpha [components, heads]).
    path: the PNG to write.
    title: the figure title.
    dpi: resolution.

  Returns:
    path.
  """
  plt = _plt()
  fig, axes = plt.subplots(1, len(alphas), figsize=(3.5 * len(alphas), 3.5),
                           squeeze=False)
  for ax, (label, names, alpha) in zip(axes.flat, alphas):
    heads = alpha.shape[1]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
      bars = ax.bar(np.arange(heads) + (i - (len(names) - 1) / 2) * width,
                    alpha[i], width, label=name)
      ax.bar_label(bars, fmt="%.4f", fontsize=6)
    ax.set_xticks(np.arange(heads), ["head %d" % h for h in range(heads)],
                  fontsize=7)
    ax.set_ylim(0.0, 1.0)
    ax.axhline(1.0 / len(names), color="gray", lw=0.6, ls="--")
    ax.set_title(label, fontsize=9)
    ax.set_ylabel("alpha", fontsize=8)
    ax.legend(fontsize=7)
  fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path


# --------------------------------------------------------------------- main


def _safe(name: str) -> str:
  return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def draw(models: Sequence[Tuple[str, str]], output_dir: str, text: str,
         length: int = 64, causal: bool = True, run_model: bool = True,
         dpi: int = 100) -> List[str]:
  """Writes every picture that applies to the models; returns the paths.

  Args:
    models: (name, model_dir or checkpoint path).
    output_dir: where the PNGs go (created).
    text: the input text for input-dependent attention.
    length: positions shown by the synthetic-attention pictures.
    causal: mask decoder stacks' synthetic attention causally.
    run_model: all layers through mesh (True) or layer 0 in NumPy only.
    dpi: resolution.

  Returns:
    The PNG paths written.
  """
  os.makedirs(output_dir, exist_ok=True)
  ids = encode_text(text)
  tokens = decode_ids(ids)
  written = []
  histograms = {}
  for name, path in models:
    variables = load_variables(path)
    config_path = os.path.join(model_dir_of(path), "operative_config.gin")
    config = (open(config_path).read() if os.path.exists(config_path)
              else None)
    layers = find_attention_layers(variables, config)
    if not layers:
      raise ValueError("No attention layers in %s." % path)
    max_length = max_positions(variables, layers)
    if max_length is not None and len(ids) > max_length:
      raise ValueError("The text is %d tokens (with EOS); %s holds %d "
                       "positions." % (len(ids), name, max_length))
    # 1. Input-independent synthetic attention.
    panels = []
    for layer in layers:
      for c in layer.components:
        if c not in INPUT_INDEPENDENT:
          continue
        masked = causal and is_causal_stack(layer.stack)
        weights = synthetic_attention(variables, layer, length, masked, c)
        for h, w in enumerate(weights):
          panels.append(("%s: %s, head %d\nsoftmax(%s)%s" % (
              name, layer.label, h,
              "R1 R2^T" if c == "factorized_random" else SHORT_NAMES[c],
              ", causal" if masked else ""), w, masked))
    if panels:
      written.append(plot_heatmaps(
          panels, os.path.join(output_dir, "synthetic_%s.png" % _safe(name)),
          "%s: learned synthetic attention (first %d positions, no position "
          "bias)" % (name, length), dpi=dpi))
    # 2. Attention on the text.
    if run_model:
      attention = model_attention(model_dir_of(path), ids,
                                  None if os.path.isdir(path) else path)
    else:
      attention = first_layer_attention(variables, layers, ids)
    panels, per_layer = [], {}
    for layer in layers:
      if layer.scope not in attention:
        continue
      weights = attention[layer.scope]
      per_layer[layer.label] = (layer.short_kind, weights)
      for h, w in enumerate(weights):
        panels.append(("%s (%s): %s, head %d" % (
            name, layer.short_kind, layer.label, h), w,
                        is_causal_stack(layer.stack)))
    written.append(plot_heatmaps(
        panels, os.path.join(output_dir, "input_%s.png" % _safe(name)),
        "%s: attention on %r (%s)" % (
            name, text if len(text) < 50 else text[:47] + "...",
            "mesh forward pass" if run_model else "layer 0, NumPy"),
        tick_labels=tokens, dpi=dpi))
    histograms[name] = per_layer
    # 3. Mixture weights.
    alphas = []
    for layer in layers:
      alpha = mixture_weights(variables, layer)
      if alpha is not None:
        alphas.append(("%s %s" % (name, layer.label) if layer.order_known
                       else layer.label + " (order unknown)",
                       [SHORT_NAMES[c] for c in layer.components], alpha))
    if alphas:
      written.append(plot_mixture_weights(
          alphas, os.path.join(output_dir, "mixture_%s.png" % _safe(name)),
          "%s: mixture weights alpha per layer and head" % name, dpi=dpi))
  written.append(plot_histograms(
      histograms, os.path.join(output_dir, "histograms.png"),
      "Attention weights on the text (%s)" % (
          "all layers" if run_model else "layer 0"), dpi=dpi))
  return written


