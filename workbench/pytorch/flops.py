# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The FLOPs of one training step of a benchmark model, from its dims.

The numerator of the benchmark's model-FLOPs utilization (MFU): what the
model's math costs, not what a kernel happens to run (no recomputation, no
padding of head widths, no zero columns). See `training_flops`.
"""

from typing import Any, Dict, Sequence

import torch
from torch import nn

from workbench.pytorch import models as bench_models

# A forward matmul of 2 m n k FLOPs costs its backward 4 m n k: the
# gradient of each operand is a matmul of the same size.
TRAINING = 3
# Weights softmax(R + mask) that need no gradient (Fix's without T5's
# relative bias): the backward of the weights-times-values product is one
# matmul.
TRAINING_WITHOUT_WEIGHTS_GRADIENT = 2


def training_flops(dims: bench_models.Dims, components: Sequence[str],
                   config: Any) -> Dict[str, int]:
  """FLOPs of one training step (forward and backward), term by term.

  Every matmul of the forward and of the backward, a multiply-add counted
  as 2 FLOPs; a forward matmul [m, k] x [k, n] is 2 m n k, and its backward
  twice that (the gradient of each operand), so each term below is 3 times
  its forward (the weights-times-values product where the weights need no
  gradient, Fix's without T5's relative bias: 2 times). The optimizer's
  step, the embedding lookup, norms, softmaxes, dropout, the relative bias
  and the loss are elementwise or gathers and are not counted; a
  function's own elementwise product is, where it declares one (FD's
  outer product).

  With B = batch, I = input_length, T = target_length, d = d_model,
  h = heads, c = d_kv, f = d_ff, V = vocab_size, E and D the encoder's and
  decoder's blocks, and, per attention layer, L its queries and S its
  memory positions (I and I in the encoder, T and T in the decoder's
  self-attention, T and I in its cross-attention):

    lm_head      3 * 2 B T d V (the output layer, tied to the embedding)
    feed_forward 3 * 2 (E B I + D B T) d f * 2 (3 matrices when gated)
    projections  3 * 2 (rows) (in) (out) for each projection the layer
                 has (q, k, v, o: q and k only where a function reads
                 them), its rows the layer's B L queries (q, o) or B S
                 memory positions (k, v)
    values       the weights times the values: 3 * 2 B h L S c
    <function>   each synthesizing function's own products, as it declares
                 them (`MtfSynthesizerFunction.training_flops` in
                 mtf_synthesizer/hf_model/functions_mtf_synthesizer.py):
                 the dot product's Q K^T (3 * 2 B h L S c), D's and FD's
                 layers, FD's outer product, FR's R1 R2^T; R and Fix
                 have none

  A mixture has the sum of its functions' terms (one weights-times-values
  product). T5 (no components) is V's count. The count builds one layer of
  each kind on the meta device (no memory) and reads its projections and
  functions: no function is named here.

  Args:
    dims: the sizes.
    components: the variant's synthesizing functions (T5: none, its
      attention the dot product).
    config: the model's config (`MtfSynthesizerConfig` or transformers'
      `T5Config`): the functions' own widths, `num_memory_heads`,
      `is_gated_act` and `relative_attention_type` where it has them.

  Returns:
    FLOPs per term: the keys above, each of the model's terms present.

  Raises:
    ValueError: a function the model code does not define.
  """
  attention = bench_models.load_model_code("attention")
  functions = tuple(components) or attention.dot_product_only()
  unknown = set(functions) - set(attention.FUNCTIONS)
  if unknown:
    raise ValueError("no FLOP count for the synthesizing functions %s" %
                     sorted(unknown))
  layer_config = _synthesizer_config(config)
  with torch.device("meta"):
    self_attention = attention.MtfSynthesizerAttention(layer_config,
                                                       functions)
    cross_attention = attention.MtfSynthesizerAttention(layer_config)
  b, d = dims.batch, dims.d_model
  matrices = 3 if getattr(config, "is_gated_act", False) else 2
  relative_bias = getattr(config, "relative_attention_type",
                          "bias_shared") is not None
  terms = dict.fromkeys(("lm_head", "feed_forward", "projections",
                         "values"), 0)
  terms["lm_head"] = TRAINING * 2 * b * dims.target_length * d * (
      dims.vocab_size)
  t, i = dims.target_length, dims.input_length
  layers = ((self_attention, dims.num_layers, i, i),
            (self_attention, dims.num_decoder_layers, t, t),
            (cross_attention, dims.num_decoder_layers, t, i))
  for layer, count, length, memory in layers:
    weights_train = relative_bias or layer is cross_attention or any(
        f.trainable for f in layer.functions)
    per_layer = _attention_flops(layer, b, length, memory, weights_train)
    for key, value in per_layer.items():
      terms[key] = terms.get(key, 0) + count * value
  terms["feed_forward"] = TRAINING * 2 * b * d * dims.d_ff * matrices * (
      dims.num_layers * i + dims.num_decoder_layers * t)
  return terms


def _synthesizer_config(config: Any):
  """The model code's config for a layer: config itself, or T5's dims."""
  modeling = bench_models.load_model_code("modeling")
  if isinstance(config, modeling.MtfSynthesizerConfig):
    return config
  return modeling.MtfSynthesizerConfig(
      d_model=config.d_model, d_kv=config.d_kv, num_heads=config.num_heads)


def _attention_flops(layer: nn.Module, batch: int, length: int,
                     memory: int, weights_train: bool) -> Dict[str, int]:
  """One attention layer's terms: projections, values, its functions'."""
  rows = {"q": batch * length, "o": batch * length,
          "k": batch * memory, "v": batch * memory}
  terms = {"projections": 0}
  for name, child in layer.named_children():
    if isinstance(child, nn.Linear):
      terms["projections"] += (TRAINING * 2 * rows[name] *
                               child.in_features * child.out_features)
  factor = TRAINING if weights_train else TRAINING_WITHOUT_WEIGHTS_GRADIENT
  terms["values"] = (factor * 2 * batch * layer.num_heads * length *
                     memory * layer.d_kv)
  for function in layer.functions:
    for key, value in function.training_flops(batch, length,
                                              memory).items():
      terms[key] = terms.get(key, 0) + value
  return terms
