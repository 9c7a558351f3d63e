# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The FLOPs of one training step of a benchmark model, from its dims.

The numerator of the benchmark's model-FLOPs utilization (MFU): what the
model's math costs, not what a kernel happens to run (no recomputation, no
padding of head widths, no zero columns). See `training_flops`.
"""

import math
from typing import Any, Dict, Sequence

from workbench import torch_benchmark_models as bench_models

# A forward matmul of 2 m n k FLOPs costs its backward 4 m n k: the
# gradient of each operand is a matmul of the same size.
TRAINING = 3
# Fix's weights softmax(R + mask) without T5's relative bias need no
# gradient: the backward of its weights-times-values product is one matmul.
TRAINING_WITHOUT_WEIGHTS_GRADIENT = 2


def training_flops(dims: bench_models.Dims, components: Sequence[str],
                   config: Any) -> Dict[str, int]:
  """FLOPs of one training step (forward and backward), term by term.

  Every matmul of the forward and of the backward, a multiply-add counted
  as 2 FLOPs; a forward matmul [m, k] x [k, n] is 2 m n k, and its backward
  twice that (the gradient of each operand), so each term below is 3 times
  its forward (Fix's weights-times-values product without T5's relative
  bias: 2 times, its weights need no gradient). The optimizer's step, the
  embedding lookup, norms, softmaxes, dropout, the relative bias and the
  loss are elementwise or gathers and are not counted, but for FD's outer
  product, which is the function's own (forward 1 multiply per logit;
  backward 1 multiply-add per logit for each factor: 5 per logit).

  With B = batch, I = input_length, T = target_length, d = d_model,
  h = heads, c = d_kv, m = heads of keys and values (h unless the
  config's `num_memory_heads` says), f = d_ff, V = vocab_size, E and D the
  encoder's and decoder's blocks, and, per self-attention layer, L its
  length (I in the encoder, T in the decoder) and n = B L its tokens:

    lm_head      3 * 2 B T d V (the output layer, tied to the embedding)
    feed_forward 3 * 2 (E B I + D B T) d f * 2 (3 matrices when gated)
    projections  3 * 2 n d (h c [q] + m c [k] + m c [v]) + 3 * 2 n h c d
                 [o] per self-attention layer, q and k only with the dot
                 product (q also for D sharing the query projection); per
                 cross-attention layer 3 * 2 (B T d h c [q] + 2 B I d m c
                 [k, v] + B T h c d [o])
    scores       Q K^T: 3 * 2 B h L L c per self-attention layer with the
                 dot product, 3 * 2 B h T I c per cross-attention layer
    values       the weights times the values: 3 * 2 B h L L c per
                 self-attention layer, 3 * 2 B h T I c per cross-attention
    dense        D: 3 * 2 n d h H [W1, unless it shares the query
                 projection] + 3 * 2 n h H L [W2's columns in use],
                 H = `dense_hidden_size` or c
    factorized_dense        FD: 3 * 2 n d h H [W1] + 3 * 2 n h H (a + b)
                            [the factors' layers], (a, b) its factors
    factorized_dense_product FD's outer product: 5 n h ceil(L / a) a
    factorized_random       FR: 3 * 2 h L L k [R1 R2^T, once for the
                            batch], k = `factorized_random_k`

  R and Fix have no FLOPs beyond the weights-times-values product; a
  mixture has the sum of its functions' terms (one weights-times-values
  product). T5 (no components) is V's count.

  Args:
    dims: the sizes.
    components: the variant's synthesizing functions (T5: none, its
      attention the dot product).
    config: the model's config (`MtfSynthesizerConfig` or transformers'
      `T5Config`): the functions' own widths, `num_memory_heads`,
      `is_gated_act` and `relative_attention_type` where it has them.

  Returns:
    FLOPs per term: the keys above, each term present (0 where the model
    has none).
  """
  functions = tuple(components) or ("dot_product",)
  unknown = set(functions) - {"dot_product", "random", "fixed_random",
                              "factorized_random", "dense",
                              "factorized_dense"}
  if unknown:
    raise ValueError("no FLOP count for the synthesizing functions %s" %
                     sorted(unknown))
  b, h, c, d = dims.batch, dims.num_heads, dims.d_kv, dims.d_model
  memory = getattr(config, "num_memory_heads", 0) or h
  matrices = 3 if getattr(config, "is_gated_act", False) else 2
  dot = "dot_product" in functions
  shared_queries = "dense" in functions and getattr(
      config, "dense_share_query_projection", False)
  hidden = getattr(config, "dense_hidden_size", None) or c
  relative_bias = getattr(config, "relative_attention_type",
                          "bias_shared") is not None
  values_factor = TRAINING
  if functions == ("fixed_random",) and not relative_bias:
    values_factor = TRAINING_WITHOUT_WEIGHTS_GRADIENT
  terms = dict.fromkeys(("lm_head", "feed_forward", "projections", "scores",
                         "values", "dense", "factorized_dense",
                         "factorized_dense_product", "factorized_random"), 0)
  terms["lm_head"] = TRAINING * 2 * b * dims.target_length * d * (
      dims.vocab_size)
  stacks = ((dims.num_layers, dims.input_length),
            (dims.num_decoder_layers, dims.target_length))
  for layers, length in stacks:
    n = b * length
    per_layer = dict.fromkeys(terms, 0)
    per_layer["feed_forward"] = TRAINING * 2 * n * d * dims.d_ff * matrices
    widths = memory * c + h * c  # v and o
    if dot or shared_queries:
      widths += h * c  # q
    if dot:
      widths += memory * c  # k
    per_layer["projections"] = TRAINING * 2 * n * d * widths
    if dot:
      per_layer["scores"] = TRAINING * 2 * b * h * length * length * c
    per_layer["values"] = values_factor * 2 * b * h * length * length * c
    if "dense" in functions:
      per_layer["dense"] = TRAINING * 2 * n * h * hidden * length
      if not shared_queries:
        per_layer["dense"] += TRAINING * 2 * n * d * h * hidden
    if "factorized_dense" in functions:
      a, b_factor = config.factorized_dense_factors
      per_layer["factorized_dense"] = TRAINING * 2 * n * h * hidden * (
          d + a + b_factor)
      per_layer["factorized_dense_product"] = 5 * n * h * math.ceil(
          length / a) * a
    if "factorized_random" in functions:
      per_layer["factorized_random"] = TRAINING * 2 * h * length * length * (
          config.factorized_random_k)
    for key, value in per_layer.items():
      terms[key] += layers * value
  # Cross-attention: the decoder's queries against the encoder's output.
  cross_layers = dims.num_decoder_layers
  t, i = dims.target_length, dims.input_length
  terms["projections"] += cross_layers * TRAINING * 2 * d * (
      b * t * h * c + 2 * b * i * memory * c + b * t * h * c)
  terms["scores"] += cross_layers * TRAINING * 2 * b * h * t * i * c
  terms["values"] += cross_layers * TRAINING * 2 * b * h * t * i * c
  return terms
