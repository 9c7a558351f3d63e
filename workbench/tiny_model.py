# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Small mesh Transformers for the tools and tests, one per variant.

Two ways to build one, both for any row of `mtf_synthesizer.variants` (or
mesh's own attention, `attentions.MESH_SELF_ATTENTION`):

  * through gin, as the stock CLI configures a model (`configure`, then
    `training_step`): mesh's defaults.gin, T5's v1.0 settings (bi_v1.gin: no
    absolute positions, a shared relative attention bias) at tiny sizes,
    then the variant's gin file. The layout tests and the communication
    audit use it.
  * directly from layer objects (`build_transformer`, with the attention
    layers of `attention_layer` or `baseline_layer`), at any `ModelShape`:
    the benchmark uses it.

`placement_mesh_impl` and `lower` put either on a placement mesh of logical
devices.
"""

import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers
from mesh_tensorflow.transformer import utils as mtf_utils  # pylint: disable=unused-import
import numpy as np
import tensorflow.compat.v1 as tf

from mtf_synthesizer import attentions
from mtf_synthesizer.baselines import linformer
from mtf_synthesizer.baselines import local_attention
from mtf_synthesizer.baselines import local_conv
from mtf_synthesizer.core import layer as layer_lib
from mtf_synthesizer.core import synthesizers

BATCH, LENGTH, VOCAB = 4, 8, 32

# T5 v1.0 settings (bi_v1.gin) at tiny sizes.
_TINY_T5 = """
transformer.Unitransformer.positional_embedding = False
transformer_layers.SelfAttention.relative_attention_type = "bias_shared"
num_layers = 1
d_model = 16
d_ff = 32
num_heads = 4
d_kv = 4
dropout_rate = {dropout_rate}
Unitransformer.max_length = {length}
Unitransformer.z_loss = 1e-4
"""
# With packed examples: mesh passes the positions inside each segment to the
# layers only when the model has positional embeddings.
PACKED_BINDINGS = "transformer.Unitransformer.positional_embedding = True"
# For the synthesizer variants: position tables sized for the sequences, and
# a factorized rank that fits them.
_SYNTHESIZER_SIZES = """
SynthesizerAttention.max_length = {length}
synthesizers.FactorizedRandom.k = 2
"""


def configure(variant: str, length: int = LENGTH, dropout_rate: float = 0.0,
              packed: bool = False,
              extra_bindings: Sequence[str] = ()) -> None:
  """Clears gin and parses the tiny T5 configuration of `variant`.

  Args:
    variant: a variant name or label, or `attentions.MESH_SELF_ATTENTION.name`.
    length: Unitransformer.max_length and SynthesizerAttention.max_length.
    dropout_rate: the model's dropout rate.
    packed: explicit positions (see PACKED_BINDINGS).
    extra_bindings: more gin bindings, parsed last.
  """
  gin_file = attentions.get(variant).gin_file
  gin.clear_config()
  files = [os.path.join(os.path.dirname(transformer.__file__), "gin",
                        "defaults.gin")]
  bindings = [_TINY_T5.format(length=length, dropout_rate=dropout_rate)]
  if packed:
    bindings.append(PACKED_BINDINGS)
  if gin_file is not None:
    files.append(gin_file)
    bindings.append(_SYNTHESIZER_SIZES.format(length=length))
  gin.parse_config_files_and_bindings(files, bindings + list(extra_bindings))


def packed_rows(batch: int, length: int) -> Dict[str, np.ndarray]:
  """Two segments per row: ids 1 and 2, positions restarting at 0.

  Args:
    batch: rows.
    length: tokens per row.

  Returns:
    {"segments": [batch, length], "positions": [batch, length]}, int32.
  """
  half = length // 2
  segment = [1] * half + [2] * (length - half)
  position = list(range(half)) + list(range(length - half))
  return {"segments": np.array([segment] * batch, np.int32),
          "positions": np.array([position] * batch, np.int32)}


@dataclasses.dataclass
class TrainingStep:
  """The tensors of a Bitransformer's training step (and decoding).

  Attributes:
    loss: the scalar loss.
    decoded: greedy decodes of the inputs [batch, length], or None.
    variables: the trainable variables.
    grads: their gradients (None where a variable gets none).
  """
  loss: mtf.Tensor
  decoded: Optional[mtf.Tensor]
  variables: List[mtf.Variable]
  grads: List[Optional[mtf.Tensor]]


def training_step(mesh: mtf.Mesh, inputs: np.ndarray, targets: np.ndarray,
                  layout: Optional[str] = None,
                  mesh_shape: Optional[str] = None,
                  packed: Optional[Dict[str, np.ndarray]] = None,
                  decode: bool = True, vocab: int = VOCAB) -> TrainingStep:
  """Builds the gin-configured Bitransformer's loss, gradients and decodes.

  Args:
    mesh: the mtf.Mesh to build on (its tf.Graph is the default graph).
    inputs: [batch, length] int ids.
    targets: [batch, length] int ids.
    layout: layout rules the model sees (only MoE layers use them).
    mesh_shape: the mesh shape the model sees.
    packed: `packed_rows` output, fed as the sequence ids and positions of
      both stacks; None for plain examples.
    decode: also build greedy decoding of the inputs.
    vocab: input and output vocabulary size.

  Returns:
    A TrainingStep.
  """
  batch_dim = mtf.Dimension("batch", inputs.shape[0])
  length_dim = mtf.Dimension("length", inputs.shape[1])

  def ids(value):
    return mtf.import_tf_tensor(mesh, tf.constant(value, tf.int32),
                                [batch_dim, length_dim])

  features = {}
  if packed is not None:
    features = {"%s_%s" % (stack, key): ids(packed[name])
                for stack in ("encoder", "decoder")
                for key, name in (("sequence_id", "segments"),
                                  ("position", "positions"))}
  model = transformer.make_bitransformer(
      input_vocab_size=vocab, output_vocab_size=vocab, layout=layout,
      mesh_shape=mesh_shape)
  with tf.variable_scope("bt", reuse=tf.AUTO_REUSE):
    _, loss = model.call_simple(
        inputs=ids(inputs), targets=ids(targets), compute_loss=True,
        mode=tf.estimator.ModeKeys.TRAIN, **features)
    decoded = (model.decode(ids(inputs), temperature=0.0) if decode
               else None)
  variables = mesh.graph.trainable_variables
  grads = mtf.gradients([loss], [v.outputs[0] for v in variables])
  return TrainingStep(loss, decoded, variables, grads)


def placement_mesh_impl(
    mesh_shape: str = "", layout: str = "",
    devices: Sequence[str] = ("",),
    impl_class: type = mtf.placement_mesh_impl.PlacementMeshImpl
) -> mtf.placement_mesh_impl.PlacementMeshImpl:
  """A placement mesh (one slice per device) of the given shape and layout.

  Args:
    mesh_shape: e.g. "model:2,batch:2"; "" for one device.
    layout: layout rules, e.g. `mesh_defaults.LAYOUT_RULES`.
    devices: one TF device per slice ("" to let TF place them).
    impl_class: PlacementMeshImpl or a subclass.

  Returns:
    The mesh implementation.
  """
  return impl_class(mtf.convert_to_shape(mesh_shape),
                    mtf.convert_to_layout_rules(layout), list(devices))


def lower(graph: mtf.Graph, mesh: mtf.Mesh,
          mesh_impl: mtf.placement_mesh_impl.PlacementMeshImpl,
          autostack: bool = False) -> mtf.Lowering:
  """Lowers `graph` on `mesh_impl`.

  Args:
    graph: the mtf.Graph (its tf.Graph is the default graph).
    mesh: its mtf.Mesh.
    mesh_impl: e.g. from placement_mesh_impl.
    autostack: stack the variables (False keeps every variable's own name,
      so that runs on different meshes can be compared by name).

  Returns:
    The mtf.Lowering.
  """
  return mtf.Lowering(graph, {mesh: mesh_impl}, autostack=autostack)


# ------------------------------------------------ models from layer objects


@dataclasses.dataclass(frozen=True)
class ModelShape:
  """The Transformer around the attention layers.

  Attributes:
    d_model: model width.
    num_heads: attention heads.
    d_kv: per-head key/value width.
    d_ff: feed-forward hidden width.
    num_layers: decoder layers (decoder-only LM), layers of the encoder-only
      model, or decoder layers of the encoder-decoder.
    encoder_layers: 0 for a single stack; else the encoder's layers.
    vocab: vocabulary size (256: a byte vocabulary).
    causal: with encoder_layers 0, True for a decoder-only LM (causal
      self-attention, next-token loss), False for an encoder-only model
      (every position attends to every position; a loss at every position
      on its own target token, as T5's "aligned" model type).
  """
  d_model: int = 512
  num_heads: int = 8
  d_kv: int = 64
  d_ff: int = 2048
  num_layers: int = 2
  encoder_layers: int = 0
  vocab: int = 256
  causal: bool = True

  @property
  def label(self) -> str:
    """e.g. "LM 2L d512 h8 dkv64 ff2048 vocab256"."""
    if self.encoder_layers:
      kind = "enc-dec %d+%dL" % (self.encoder_layers, self.num_layers)
    else:
      kind = "%s %dL" % ("LM" if self.causal else "encoder-only",
                         self.num_layers)
    return "%s d%d h%d dkv%d ff%d vocab%d" % (
        kind, self.d_model, self.num_heads, self.d_kv, self.d_ff, self.vocab)


# (max_length, model shape) -> a self-attention layer.
LayerFactory = Callable[[int, ModelShape], transformer.TransformerLayer]


def attention_layer(variant: attentions.Attention,
                    fr_rank: int = 8) -> LayerFactory:
  """The self-attention layer of a variant (the gin file's, without gin).

  Args:
    variant: a row of `attentions.VARIANTS` or `attentions.MESH_SELF_ATTENTION`.
    fr_rank: k of Factorized Random.

  Returns:
    A LayerFactory.
  """
  def make(max_length: int, shape: ModelShape):
    if not variant.components:
      return transformer_layers.SelfAttention(num_heads=shape.num_heads,
                                              key_value_size=shape.d_kv)
    classes = [synthesizers.BY_NAME[name] for name in variant.components]
    functions = [cls(k=fr_rank)
                 if issubclass(cls, synthesizers.FactorizedRandom) else cls()
                 for cls in classes]
    return layer_lib.SynthesizerAttention(
        synthesizers=functions, max_length=max_length,
        num_heads=shape.num_heads, key_value_size=shape.d_kv)
  return make


# The baselines' settings, as gin/baselines/*.gin bind them: kernel width 7
# (causal in an autoregressive model, else centred), the local window's
# radius, and Linformer's k (the Synthesizer paper's Table 7).
CONV_KERNEL_WIDTH = 7
LOCAL_RADIUS = 128
LINFORMER_K = 32


def _conv(baseline: attentions.Attention) -> LayerFactory:
  def make(max_length: int, shape: ModelShape):
    del max_length
    return local_conv.DecodableLocalConvAttnBlock(
        kernel_width=CONV_KERNEL_WIDTH, output_size=shape.d_model,
        attention_type=baseline.name)
  return make


def _local(baseline: attentions.Attention) -> LayerFactory:
  del baseline
  def make(max_length: int, shape: ModelShape):
    del max_length
    return local_attention.WindowedSelfAttention(
        radius=LOCAL_RADIUS, num_heads=shape.num_heads,
        key_value_size=shape.d_kv)
  return make


def _linformer(baseline: attentions.Attention) -> LayerFactory:
  del baseline
  def make(max_length: int, shape: ModelShape):
    return linformer.LinformerAttention(
        k=LINFORMER_K, max_length=max_length, num_heads=shape.num_heads,
        key_value_size=shape.d_kv)
  return make


# The baselines' layers by their class name (`Attention.layer` in the
# table): the convolutions' row name is their `attention_type`.
BASELINE_LAYERS: Dict[str, Callable[[attentions.Attention], LayerFactory]] = {
    "DecodableLocalConvAttnBlock": _conv,
    "WindowedSelfAttention": _local,
    "LinformerAttention": _linformer,
}


def baseline_layer(name: str) -> LayerFactory:
  """The self-attention replacement of a baseline (its gin file's layer).

  Args:
    name: a baseline of the table (`mtf_synthesizer.attentions.BASELINES`).

  Returns:
    A LayerFactory.

  Raises:
    ValueError: for an unknown baseline, or one whose layer class has no
      entry in BASELINE_LAYERS.
  """
  baseline = attentions.get(name, attentions.Kind.BASELINE)
  if baseline.layer not in BASELINE_LAYERS:
    raise ValueError("No tiny model of %s's layer %r: add it to "
                     "BASELINE_LAYERS." % (name, baseline.layer))
  return BASELINE_LAYERS[baseline.layer](baseline)


def _layer_stack(layers: Sequence[transformer.TransformerLayer]):
  return transformer.LayerStack(
      list(layers), sublayers_initial=[],
      sublayers_per_layer=[transformer.sublayer_rms_norm,
                           transformer.sublayer_call_layer,
                           transformer.sublayer_residual],
      sublayers_final=[transformer.sublayer_rms_norm])


def _unitransformer(layers, shape: ModelShape, max_length: int,
                    autoregressive: bool, name: str,
                    output_vocab: bool = True):
  # An encoder has no softmax: it returns its last hidden states.
  return transformer.Unitransformer(
      layer_stack=_layer_stack(layers), d_model=shape.d_model,
      input_vocab_size=shape.vocab,
      output_vocab_size=shape.vocab if output_vocab else None,
      autoregressive=autoregressive, max_length=max_length, name=name)


def build_transformer(make_attention: LayerFactory, shape: ModelShape,
                      max_length: int,
                      make_encoder_attention: Optional[LayerFactory] = None,
                      make_decoder_attention: Optional[LayerFactory] = None):
  """A Unitransformer (LM or encoder-only) or an encoder-decoder Bitransformer.

  Args:
    make_attention: builds each self-attention layer of a single stack (and
      of an encoder-decoder's stacks unless overridden below).
    shape: the sizes.
    max_length: the longest sequence (the attention's max_length).
    make_encoder_attention: the encoder's self-attention in an
      encoder-decoder (None: make_attention).
    make_decoder_attention: the decoder's self-attention in an
      encoder-decoder (None: make_attention).

  Returns:
    A mesh Unitransformer or Bitransformer.
  """
  def block(make, cross_attention: bool
           ) -> List[transformer.TransformerLayer]:
    layers = [make(max_length, shape)]
    if cross_attention:
      layers.append(transformer_layers.EncDecAttention(
          num_heads=shape.num_heads, key_value_size=shape.d_kv))
    return layers + [transformer_layers.DenseReluDense(
        hidden_size=shape.d_ff)]

  def stack(make, num_layers: int, cross_attention: bool = False):
    layers = sum((block(make, cross_attention) for _ in range(num_layers)),
                 [])
    # Each layer its own variable scope, as mesh's make_layer_stack names
    # them: unnamed layers share one scope, hence one set of variables.
    for index, layer in enumerate(layers):
      layer.set_name("layer_%03d" % index)
    return layers

  if not shape.encoder_layers:
    # An encoder-only model is mesh's "aligned" model: a non-autoregressive
    # stack with a softmax at every position.
    return _unitransformer(stack(make_attention, shape.num_layers), shape,
                           max_length, shape.causal,
                           "decoder" if shape.causal else "encoder")
  return transformer.Bitransformer(
      encoder=_unitransformer(
          stack(make_encoder_attention or make_attention,
                shape.encoder_layers), shape, max_length, False, "encoder",
          output_vocab=False),
      decoder=_unitransformer(
          stack(make_decoder_attention or make_attention, shape.num_layers,
                True), shape, max_length, True, "decoder"))
