# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The released T5 checkpoint families, as tiny synthetic checkpoints.

Each family's variable names, shapes and dtypes are written from public
facts, not from a graph this package builds, so that a name the mapping
misses fails the tests:

  * Mesh TensorFlow T5 names (Hugging Face transformers' `load_tf_weights_in_t5`
    and T5X's `checkpoint_importer.py` read them): `shared/embedding`;
    `{encoder,decoder}/block_NNN/layer_NNN/{SelfAttention,EncDecAttention}/
    {q,k,v,o}`; the relative attention bias in each stack's first block
    only; `DenseReluDense/wi/kernel` (T5.1.0) or `wi_0` and `wi_1` (gated
    GELU, T5.1.1 and later) and `wo/kernel`; a norm scale per layer and one
    per stack; `decoder/logits/kernel` unless the embedding is shared with
    the softmax (T5.1.0); `global_step`.
  * Norm scale names: `layer_norm/scale` and `final_layer_norm/scale` in the
    T5.1.0 release (mesh's legacy LayerStack); `rms_norm/scale` for both in
    checkpoints of today's mesh. Both converters accept either in every
    family, so the tests write later families both ways.
  * ByT5: an encoder three times as deep as its decoder (ByT5 paper, Table 1).
  * Checkpoints stored in bfloat16 (mesh issue 178) and without optimizer
    slots.
  * Adafactor slots where present: mesh's AdafactorOptimizer factors a
    variable whose two largest dimensions are both at least 128 into
    `_slot_vr` and `_slot_vc`; every other variable has a full-size
    `_slot_v`.
"""

import dataclasses
from typing import Dict, List, Tuple

import numpy as np
import tensorflow.compat.v1 as tf

# The tiny sizes of the tests (t5's models/t5.1.1.tiny.gin but d_kv = 16).
D_MODEL, D_FF, HEADS, D_KV = 32, 64, 2, 16
BUCKETS = 32  # relative attention buckets
VOCAB = 384   # the byte vocabulary, padded as mesh pads it


@dataclasses.dataclass(frozen=True)
class Family:
  """A released checkpoint family's layout.

  Attributes:
    name: the family.
    model_gin: t5's model gin file to finetune it with.
    gated: `wi_0`/`wi_1` (gated GELU) instead of `wi`.
    shared_softmax: the decoder's softmax is the embedding (no
      `decoder/logits/kernel`).
    namings: the norm scale namings its checkpoints may hold ("layer_norm":
      `layer_norm` and `final_layer_norm`; "rms_norm": `rms_norm` for both).
    encoder_layers, decoder_layers: stack depths.
    dtype: the stored dtype of the weights.
    slots: whether Adafactor slots are stored.
    source: where the layout facts come from.
  """
  name: str
  model_gin: str
  gated: bool
  shared_softmax: bool
  namings: Tuple[str, ...] = ("rms_norm", "layer_norm")
  encoder_layers: int = 2
  decoder_layers: int = 2
  dtype: str = "float32"
  slots: bool = True
  source: str = ""

  def gin_params(self) -> List[str]:
    """The tiny sizes as gin bindings for the finetuning run."""
    params = ["d_model = %d" % D_MODEL, "d_ff = %d" % D_FF,
              "num_heads = %d" % HEADS, "d_kv = %d" % D_KV,
              "num_layers = %d" % self.decoder_layers]
    if self.encoder_layers != self.decoder_layers:
      params.append("encoder/transformer.make_layer_stack.num_layers = %d"
                    % self.encoder_layers)
    return params


RMS_NORM = "rms_norm", "rms_norm"
LEGACY = "layer_norm", "final_layer_norm"
NAMINGS = {"rms_norm": RMS_NORM, "layer_norm": LEGACY}

FAMILIES = (
    Family("T5.1.0", "models/t5.1.0.base.gin", gated=False,
           shared_softmax=True, namings=("layer_norm",),
           source="HF load_tf_weights_in_t5 (written for this release); "
           "mesh's sublayer_legacy_rms_norm"),
    Family("T5.1.1", "models/t5.1.1.base.gin", gated=True,
           shared_softmax=False, source="t5's models/t5.1.1.base.gin; "
           "T5X checkpoint_importer"),
    Family("T5.1.1 LM-adapted", "models/t5.1.1.base.gin", gated=True,
           shared_softmax=False,
           source="T5's released_checkpoints.md: T5.1.1 further trained "
           "on the LM objective, same architecture"),
    Family("mT5", "models/t5.1.1.base.gin", gated=True, shared_softmax=False,
           source="mT5 paper and gin files: the T5.1.1 recipe"),
    Family("ByT5", "models/t5.1.1.base.gin", gated=True, shared_softmax=False,
           encoder_layers=6, decoder_layers=2,
           source="ByT5 paper, Table 1: encoder 3x as deep as the decoder"),
    Family("T5.1.1, bfloat16, no slots", "models/t5.1.1.base.gin",
           gated=True, shared_softmax=False, dtype="bfloat16", slots=False,
           source="mesh issue 178 (bfloat16 storage)"),
)
BY_NAME = {f.name: f for f in FAMILIES}


def _attention(prefix: str, bias: bool) -> Dict[str, List[int]]:
  inner = HEADS * D_KV
  shapes = {prefix + "q": [D_MODEL, inner], prefix + "k": [D_MODEL, inner],
            prefix + "v": [D_MODEL, inner], prefix + "o": [inner, D_MODEL]}
  if bias:
    shapes[prefix + "relative_attention_bias"] = [HEADS, BUCKETS]
  return shapes


def _feed_forward(prefix: str, gated: bool) -> Dict[str, List[int]]:
  shapes = {prefix + "wo/kernel": [D_FF, D_MODEL]}
  for name in (["wi_0", "wi_1"] if gated else ["wi"]):
    shapes[prefix + name + "/kernel"] = [D_MODEL, D_FF]
  return shapes


def weight_shapes(family: Family, naming: str) -> Dict[str, List[int]]:
  """The family's weights (no slots, no global_step) and their shapes.

  Args:
    family: a Family.
    naming: one of its namings.

  Returns:
    name -> shape.
  """
  layer_norm, final_norm = NAMINGS[naming]
  shapes = {"shared/embedding": [VOCAB, D_MODEL]}
  for stack, depth, kinds in (
      ("encoder", family.encoder_layers, ["SelfAttention", "ff"]),
      ("decoder", family.decoder_layers,
       ["SelfAttention", "EncDecAttention", "ff"])):
    for block in range(depth):
      for index, kind in enumerate(kinds):
        prefix = "%s/block_%03d/layer_%03d/" % (stack, block, index)
        shapes[prefix + layer_norm + "/scale"] = [D_MODEL]
        if kind == "ff":
          shapes.update(_feed_forward(prefix + "DenseReluDense/",
                                      family.gated))
        else:
          shapes.update(_attention(
              prefix + kind + "/",
              bias=(block == 0 and kind == "SelfAttention")))
    shapes["%s/%s/scale" % (stack, final_norm)] = [D_MODEL]
  if not family.shared_softmax:
    shapes["decoder/logits/kernel"] = [D_MODEL, VOCAB]
  return shapes


def slot_shapes(name: str, shape: List[int]) -> Dict[str, List[int]]:
  """Adafactor's slots of a variable (see the module docstring)."""
  largest = sorted(shape, reverse=True)
  if len(shape) >= 2 and largest[1] >= 128:
    return {name + "_slot_vr": shape[:-1], name + "_slot_vc":
            shape[:-2] + shape[-1:]}
  return {name + "_slot_v": list(shape)}


def write(family: Family, naming: str, path: str, step: int = 1000,
          seed: int = 0) -> Dict[str, np.ndarray]:
  """Writes the family's checkpoint with random values.

  Args:
    family: a Family.
    naming: one of its namings.
    path: the checkpoint prefix, e.g. ".../model.ckpt-1000".
    step: its global_step.
    seed: the values' seed.

  Returns:
    name -> the value written (float32 values of bfloat16 variables).
  """
  rng = np.random.RandomState(seed)
  values = {}
  for name, shape in sorted(weight_shapes(family, naming).items()):
    values[name] = rng.normal(0, 0.5, shape).astype(np.float32)
    if family.slots:
      for slot, slot_shape in slot_shapes(name, shape).items():
        values[slot] = rng.uniform(0.1, 1.0, slot_shape).astype(np.float32)
  dtype = tf.as_dtype(family.dtype)
  with tf.Graph().as_default(), tf.Session() as sess:
    tensors = [tf.cast(tf.constant(v), dtype) for v in values.values()]
    names = list(values) + ["global_step"]
    tensors.append(tf.constant(step, tf.int64))
    stored = sess.run(tensors)
    sess.run(tf.raw_ops.SaveV2(prefix=path, tensor_names=names,
                               shape_and_slices=[""] * len(names),
                               tensors=[tf.constant(v) for v in stored]))
  out = {n: np.asarray(v).astype(np.float32)
         for n, v in zip(names[:-1], stored[:-1])}
  out["global_step"] = np.int64(step)
  return out
