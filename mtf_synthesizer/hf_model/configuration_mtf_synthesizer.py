# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The configuration of a Synthesizer T5 exported from Mesh TensorFlow.

Written by `mtf_synthesizer.hf_export` next to the weights and read by
`transformers` (`trust_remote_code=True`). It describes the mesh model as
mesh built it: each layer stack (`encoder`, `decoder`, or `transformer` for a
decoder-only language model) is `num_blocks` blocks of the same layers, each
layer a dict with its mesh class name under "type":

  * "SynthesizerAttention": "functions" (the synthesizing functions, each a
    dict with its "name" and settings), "learned_weights" (a mixture's
    alpha), "max_length" (N), plus the attention settings below;
  * "SelfAttention": mesh's dot-product attention (the attention settings);
  * "EncDecAttention": attention over the encoder's output;
  * "DenseReluDense": "d_ff", "activations" (one, or two for a gated
    layer), "use_bias".

Attention settings: "num_heads", "d_kv", "num_memory_heads" (0: as many as
the heads; 1: multi-query), "relative_attention" (None, "bias" or
"bias_shared"), "relative_attention_num_buckets", "scale_queries" (mesh's
fold_scaling_into_initializer=False).
"""

from typing import Any, Dict, Optional

from transformers import PretrainedConfig


class MtfSynthesizerConfig(PretrainedConfig):
  """A mesh Transformer with Synthesizer attention, as exported."""
  model_type = "mtf_synthesizer"
  keys_to_ignore_at_inference = ["past_key_values"]

  def __init__(self,
               stacks: Optional[Dict[str, Dict[str, Any]]] = None,
               d_model: int = 32,
               vocab_size: int = 384,
               shared_embedding: bool = True,
               layer_norm_epsilon: float = 1e-6,
               relative_attention_max_distance: int = 128,
               is_encoder_decoder: bool = False,
               pad_token_id: int = 0,
               eos_token_id: int = 1,
               decoder_start_token_id: int = 0,
               use_cache: bool = True,
               **kwargs):
    """Creates the configuration.

    Args:
      stacks: stack name -> {"num_blocks", "layers" (a block's layer dicts),
        "autoregressive", "positional_embedding" (rows of the learned
        table, or None), "logits" ("kernel": its own softmax weights,
        "embedding": the embedding's, scaled by d_model**-0.5, None: no
        logits)}.
      d_model: the model width.
      vocab_size: rows of the (padded) vocabulary.
      shared_embedding: the encoder and decoder share one embedding.
      layer_norm_epsilon: epsilon of mesh's RMS norm.
      relative_attention_max_distance: T5's bucket distance (mesh: 128).
      is_encoder_decoder: an encoder-decoder (else a language model).
      pad_token_id: padding id (also marks padding when no mask is given).
      eos_token_id: end of sequence.
      decoder_start_token_id: the first decoder input.
      use_cache: keep keys and values while decoding.
      **kwargs: PretrainedConfig's.
    """
    self.stacks = stacks or {}
    self.d_model = d_model
    self.vocab_size = vocab_size
    self.shared_embedding = shared_embedding
    self.layer_norm_epsilon = layer_norm_epsilon
    self.relative_attention_max_distance = relative_attention_max_distance
    self.use_cache = use_cache
    main = self.stacks.get("decoder") or self.stacks.get("transformer") or {}
    self.num_hidden_layers = main.get("num_blocks", 0)
    kwargs.setdefault("tie_word_embeddings", False)
    super().__init__(pad_token_id=pad_token_id, eos_token_id=eos_token_id,
                     decoder_start_token_id=decoder_start_token_id, **kwargs)
    self.is_encoder_decoder = is_encoder_decoder
