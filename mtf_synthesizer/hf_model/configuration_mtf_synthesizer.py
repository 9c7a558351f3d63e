# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The configuration of a Synthesizer T5 in PyTorch.

Fields that mean what they mean in transformers' `T5Config` have its names
(`d_model`, `d_kv`, `d_ff`, `num_heads`, `num_layers`, `num_decoder_layers`,
`vocab_size`, `feed_forward_proj`, `relative_attention_num_buckets`, ...):
set them on a loaded config and `from_config` builds that size. The
Synthesizer's own fields say which synthesizing functions each stack's
self-attention composes (Tay et al., Table 1) and their sizes; mesh's layout
options (a relative position bias per layer, multi-query attention, queries
scaled at run time, learned absolute positions) are fields too, so that
`mtf_synthesizer.export` can describe any model the stock CLI trains.
"""

import copy
import inspect
from typing import Any, Dict, Optional, Sequence, Tuple

from transformers import PretrainedConfig

RELATIVE_ATTENTION_TYPES = (None, "bias", "bias_shared")


def function_names() -> Tuple[str, ...]:
  """The synthesizing functions the model code implements.

  The names of the mesh package (`mtf_synthesizer.synthesizers.BY_NAME`),
  as the modeling module registers its function classes (`FUNCTIONS`).

  Returns:
    The names.
  """
  # pylint: disable-next=import-outside-toplevel,relative-beyond-top-level
  from .modeling_mtf_synthesizer import FUNCTIONS
  return tuple(FUNCTIONS)


def _functions(value: Sequence[str], field: str) -> Tuple[str, ...]:
  """A stack's synthesizing functions, checked."""
  if isinstance(value, str):
    value = value.split("+")
  value = tuple(value)
  known = function_names()
  unknown = [name for name in value if name not in known]
  if not value or unknown or len(set(value)) != len(value):
    raise ValueError(
        "%s must name distinct synthesizing functions of %s, got %r" %
        (field, list(known), value))
  return value


class MtfSynthesizerConfig(PretrainedConfig):
  """A T5 whose self-attention composes synthesizing functions.

  The defaults are T5.1.1-small's sizes with mesh's dot-product attention
  (V); `encoder_synthesizers=("random",)`, for example, makes the Random
  Synthesizer (R) and `("dense", "dot_product")` the mixture D+V.
  """
  model_type = "mtf_synthesizer"
  keys_to_ignore_at_inference = ["past_key_values"]
  attribute_map = {"hidden_size": "d_model",
                   "num_attention_heads": "num_heads",
                   "num_hidden_layers": "num_layers",
                   "head_dim": "d_kv"}

  def __init__(
      self,
      vocab_size: int = 32128,
      d_model: int = 512,
      d_kv: int = 64,
      d_ff: int = 1024,
      num_layers: int = 8,
      num_decoder_layers: Optional[int] = None,
      num_heads: int = 6,
      relative_attention_num_buckets: int = 32,
      relative_attention_max_distance: int = 128,
      dropout_rate: float = 0.1,
      layer_norm_epsilon: float = 1e-6,
      initializer_factor: float = 1.0,
      feed_forward_proj: str = "gated-gelu",
      is_encoder_decoder: bool = True,
      use_cache: bool = True,
      pad_token_id: int = 0,
      eos_token_id: int = 1,
      decoder_start_token_id: int = 0,
      tie_word_embeddings: bool = False,
      encoder_synthesizers: Sequence[str] = ("dot_product",),
      decoder_synthesizers: Sequence[str] = ("dot_product",),
      synthesizer_max_length: int = 512,
      learned_mixture_weights: bool = True,
      factorized_random_k: int = 8,
      factorized_dense_factors: Optional[Sequence[int]] = None,
      dense_hidden_size: Optional[int] = None,
      dense_share_query_projection: bool = False,
      synthesizer_use_bias: bool = True,
      relative_attention_type: Optional[str] = "bias_shared",
      num_memory_heads: int = 0,
      scale_queries: bool = False,
      shared_embedding: bool = True,
      max_position_embeddings: Optional[int] = None,
      z_loss: float = 1e-4,
      loss_denominator: str = "tokens",
      **kwargs):
    """Creates the configuration.

    Args:
      vocab_size: rows of the (padded) vocabulary.
      d_model: the model width.
      d_kv: width of a head's queries, keys and values.
      d_ff: width of the feed-forward layers.
      num_layers: blocks of the encoder (of a causal LM's one stack).
      num_decoder_layers: blocks of the decoder; default num_layers.
      num_heads: attention heads.
      relative_attention_num_buckets: T5's relative position buckets.
      relative_attention_max_distance: distances from here share a bucket.
      dropout_rate: mesh's dropout, where mesh applies it: the embeddings,
        each layer's output, the attention weights, the feed-forward
        hidden layer, the stack's output.
      layer_norm_epsilon: epsilon of the RMS norm.
      initializer_factor: multiplies every initializer's scale (T5's).
      feed_forward_proj: "relu" (T5.1.0) or "gated-gelu" (T5.1.1): an
        activation name, "gated-" for mesh's two input kernels.
      is_encoder_decoder: an encoder-decoder (else a causal LM of one stack).
      use_cache: keep keys and values while decoding.
      pad_token_id: padding id (marks the inputs' padding when no mask is
        given).
      eos_token_id: end of sequence.
      decoder_start_token_id: the first decoder input.
      tie_word_embeddings: the output layer is the embedding (scaled by
        d_model**-0.5, as mesh and T5.1.0 do); else its own weights.
      encoder_synthesizers: the synthesizing functions of the encoder's
        self-attention (of the causal LM's, which reads
        decoder_synthesizers), a tuple or a "+"-joined string; several make
        a mixture (eq. 8).
      decoder_synthesizers: those of the decoder's self-attention.
      synthesizer_max_length: N, the positions of R, FR, D and FD (their
        tables' size; mesh's SynthesizerAttention.max_length, renamed here
        because a config's max_length is generate()'s); the longest
        sequence a stack with them reads.
      learned_mixture_weights: a mixture learns its weights alpha (softmax
        over functions, per head); else each function weighs 1.
      factorized_random_k: FR's rank k (eq. 7).
      factorized_dense_factors: FD's (a, b), a * b = N; default
        the largest divisor a <= sqrt(N).
      dense_hidden_size: the per-head hidden width of D's and FD's first
        layer; default d_kv.
      dense_share_query_projection: D's first layer is the query projection
        (the original release's dense modes).
      synthesizer_use_bias: D and FD have biases b1, b2.
      relative_attention_type: "bias_shared" (one table per stack, T5),
        "bias" (one per layer) or None.
      num_memory_heads: heads of keys and values: 0 as many as num_heads,
        1 multi-query attention.
      scale_queries: scale the queries by d_kv**-0.5 at run time (mesh's
        fold_scaling_into_initializer=False); default: the scale is in the
        query kernel's initializer, as mesh and T5 do.
      shared_embedding: the encoder and decoder read one embedding.
      max_position_embeddings: rows of a learned absolute position table
        added to the embeddings (mesh's positional_embedding), or None.
      z_loss: mesh's auxiliary loss z_loss * log(Z)^2 per token, added in
        training only (mesh's default 1e-4; T5 trained with it).
      loss_denominator: "tokens": the loss is the mean over the target
        tokens (labels != -100), as transformers' models report it;
        "positions": the sum over the tokens divided by batch x target
        length, as mesh divides it (with Adafactor, whose updates are
        normalized, only mesh's choice weighs the batches as mesh does).
      **kwargs: PretrainedConfig's.
    """
    self.vocab_size = vocab_size
    self.d_model = d_model
    self.d_kv = d_kv
    self.d_ff = d_ff
    self.num_layers = num_layers
    self.num_decoder_layers = (num_decoder_layers
                               if num_decoder_layers is not None
                               else num_layers)
    self.num_heads = num_heads
    self.relative_attention_num_buckets = relative_attention_num_buckets
    self.relative_attention_max_distance = relative_attention_max_distance
    self.dropout_rate = dropout_rate
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_factor = initializer_factor
    self.feed_forward_proj = feed_forward_proj
    parts = feed_forward_proj.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
      raise ValueError("feed_forward_proj must be an activation or "
                       "'gated-<activation>', got %r" % feed_forward_proj)
    self.dense_act_fn = parts[-1]
    self.is_gated_act = len(parts) == 2
    self.use_cache = use_cache
    self.encoder_synthesizers = _functions(encoder_synthesizers,
                                           "encoder_synthesizers")
    self.decoder_synthesizers = _functions(decoder_synthesizers,
                                           "decoder_synthesizers")
    if "max_length" in kwargs:
      raise ValueError(
          "max_length is generate()'s setting (set it on generation_config); "
          "the size of the synthesizing functions' tables is "
          "synthesizer_max_length")
    max_length = synthesizer_max_length
    self.synthesizer_max_length = max_length
    self.learned_mixture_weights = learned_mixture_weights
    self.factorized_random_k = factorized_random_k
    if factorized_dense_factors is None:
      a = max(d for d in range(1, int(max_length**0.5) + 1)
              if max_length % d == 0)
      factorized_dense_factors = (a, max_length // a)
    factorized_dense_factors = tuple(factorized_dense_factors)
    uses_fd = "factorized_dense" in (self.encoder_synthesizers +
                                     self.decoder_synthesizers)
    if uses_fd and (len(factorized_dense_factors) != 2 or
                    factorized_dense_factors[0] * factorized_dense_factors[1]
                    != max_length):
      raise ValueError("factorized_dense_factors (a, b) need a * b == "
                       "synthesizer_max_length (%d), got %r" %
                       (max_length, factorized_dense_factors))
    self.factorized_dense_factors = factorized_dense_factors
    self.dense_hidden_size = dense_hidden_size
    self.dense_share_query_projection = dense_share_query_projection
    self.synthesizer_use_bias = synthesizer_use_bias
    if relative_attention_type not in RELATIVE_ATTENTION_TYPES:
      raise ValueError("relative_attention_type must be one of %r, got %r" %
                       (RELATIVE_ATTENTION_TYPES, relative_attention_type))
    self.relative_attention_type = relative_attention_type
    if num_memory_heads not in (0, 1, num_heads):
      raise ValueError("num_memory_heads must be 0, 1 or num_heads, got %r" %
                       (num_memory_heads,))
    self.num_memory_heads = num_memory_heads
    self.scale_queries = scale_queries
    self.shared_embedding = shared_embedding
    self.max_position_embeddings = max_position_embeddings
    self.z_loss = z_loss
    if loss_denominator not in ("tokens", "positions"):
      raise ValueError("loss_denominator must be 'tokens' or 'positions', "
                       "got %r" % (loss_denominator,))
    self.loss_denominator = loss_denominator
    super().__init__(pad_token_id=pad_token_id, eos_token_id=eos_token_id,
                     decoder_start_token_id=decoder_start_token_id,
                     is_encoder_decoder=is_encoder_decoder,
                     tie_word_embeddings=tie_word_embeddings, **kwargs)

  def to_diff_dict(self) -> Dict[str, Any]:
    """config.json's fields: every one of this class, the others if changed.

    transformers writes a field only where it differs from PretrainedConfig's
    default; a field whose default here is another (`is_encoder_decoder`,
    True here, False there) would be left out and read back as this class's
    default. Every field of `__init__` is written, so a reload is the same
    model.

    Returns:
      The dictionary written to config.json.
    """
    written = super().to_diff_dict()
    full = self.to_dict()
    for name in inspect.signature(MtfSynthesizerConfig.__init__).parameters:
      if name in full:
        written[name] = full[name]
    return written

  def get_text_config(self, decoder: Optional[bool] = None,
                      encoder: Optional[bool] = None) -> PretrainedConfig:
    """The config of one end of the model; the decoder's has its blocks.

    transformers sizes a generation's caches (DynamicCache, StaticCache)
    by the decoder's config `num_hidden_layers`: an encoder-decoder whose
    decoder has another number of blocks (`num_decoder_layers`) gets it
    there, not the encoder's `num_layers`.

    Args:
      decoder: the decoder's end.
      encoder: the encoder's end.

    Returns:
      This config, or a copy for the decoder's end.
    """
    config = super().get_text_config(decoder=decoder, encoder=encoder)
    if (decoder and not encoder and self.is_encoder_decoder and
        config.num_layers != self.num_decoder_layers):
      config = copy.deepcopy(config) if config is self else config
      config.num_layers = self.num_decoder_layers
    return config

  def synthesizers(self, stack: str) -> Tuple[str, ...]:
    """The functions of a stack's self-attention ("encoder"/"decoder")."""
    return (self.encoder_synthesizers if stack == "encoder"
            else self.decoder_synthesizers)
