# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Synthesizer in JAX: Flax (linen) modules, T5X's names and layouts.

Imports JAX, Flax and gin only (no TensorFlow, mesh or torch).

  functions.py   each synthesizing function's math (R, Fix, FR, D, FD, V),
                 its settings and initializers read from the declarations
                 (`mtf_synthesizer.synthesizing_functions`),
                 `trainable_mask` (Fix untrained)
  attention.py   SynthesizerAttention: the functions composed with eq. 8's
                 learned weights, flaxformer's attention call, the cache
  t5.py          the Flax T5 around it (EncoderDecoder, DecoderOnly,
                 T5Config, make_model): mesh's T5.1.0 and T5.1.1 layouts
  losses.py      mesh's teacher-forced loss and eval metrics
  decoding.py    greedy decoding and beam search with the cache
  mesh_checkpoint.py  a mesh checkpoint read (without TensorFlow) as the
                 model's parameters, `init_from_t5`'s rule
  checkpointing.py    the parameters in an orbax checkpoint, with the
                 model's gin bindings, and back

The parameter tree of `EncoderDecoder` (N a layer index; shapes in
brackets; T5X/flaxformer's names, the Synthesizer's with mesh's local
names under the attention):

  token_embedder/embedding                          [vocab, embed]
  encoder/relpos_bias/rel_embedding                 [heads, buckets]
  encoder/layers_N/relpos_bias/rel_embedding        (per-layer bias only)
  encoder/layers_N/pre_attention_layer_norm/scale   [embed]
  encoder/layers_N/attention/ATTENTION
  encoder/layers_N/pre_mlp_layer_norm/scale         [embed]
  encoder/layers_N/mlp/wi/kernel                    [embed, mlp]
      (gated: mlp/wi_0/kernel, mlp/wi_1/kernel)
  encoder/layers_N/mlp/wo/kernel                    [mlp, embed]
  encoder/encoder_norm/scale                        [embed]
  decoder/relpos_bias/rel_embedding                 [heads, buckets]
  decoder/layers_N/pre_self_attention_layer_norm/scale
  decoder/layers_N/self_attention/ATTENTION
  decoder/layers_N/pre_cross_attention_layer_norm/scale
  decoder/layers_N/encoder_decoder_attention/{query,key,value,out}/kernel
  decoder/layers_N/pre_mlp_layer_norm/scale
  decoder/layers_N/mlp/...                          (as the encoder's)
  decoder/decoder_norm/scale                        [embed]
  decoder/logits_dense/kernel                       [embed, vocab] (untied)

`DecoderOnly` has `decoder/...` only: `decoder/token_embedder/embedding`
and the decoder's layers without the cross-attention and its norm.

ATTENTION, a SynthesizerAttention's variables (those its functions use):

  value/kernel                      [embed, heads, kv]     always
  out/kernel                        [heads, kv, embed]     always
  query/kernel                      [embed, heads, kv]     V (and D with
                                                           a shared query)
  key/kernel                        [embed, heads, kv]     V
  random/R                          [heads, N, N]          R
  fixed_random/R                    [heads, N, N]          Fix (untrained)
  factorized_random/R1, R2          [heads, N, k]          FR
  dense/w1 [embed, heads, hidden], dense/b1 [heads, hidden],
  dense/w2 [heads, hidden, N], dense/b2 [heads, N]         D
  factorized_dense/w1, b1 (as D's), wa [heads, hidden, a],
  ba [heads, a], wb [heads, hidden, b], bb [heads, b]      FD
  mixture/alpha_logits              [functions, heads]     mixtures (eq. 8)

N is max_length, hidden the function's hidden_size (d_kv by default). mesh's
combined kernels are these reshaped: q, k, v [d_model, heads * d_kv]
(heads-major) and o [heads * d_kv, d_model]; a layer without the dot
product keeps mesh's shared `kv` as `value`. Parameters are boxed with
logical axis names ('embed', 'heads', 'kv', 'mlp', 'vocab', 'length',
'relpos_buckets') by `nn.with_logical_partitioning`.
"""

from mtf_synthesizer.flax_model import attention
from mtf_synthesizer.flax_model import decoding
from mtf_synthesizer.flax_model import functions
from mtf_synthesizer.flax_model import losses
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.flax_model.attention import SynthesizerAttention
from mtf_synthesizer.flax_model.functions import trainable_mask
from mtf_synthesizer.flax_model.t5 import DecoderOnly
from mtf_synthesizer.flax_model.t5 import EncoderDecoder
from mtf_synthesizer.flax_model.t5 import make_model
from mtf_synthesizer.flax_model.t5 import T5Config

__all__ = ["attention", "decoding", "functions", "losses", "t5",
           "SynthesizerAttention", "trainable_mask", "DecoderOnly",
           "EncoderDecoder", "make_model", "T5Config"]
