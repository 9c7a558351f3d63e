# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A Synthesizer T5 in PyTorch, computing what the mesh model computes.

The classes follow transformers' T5: `MtfSynthesizerModel` (the
encoder-decoder), `MtfSynthesizerForConditionalGeneration`
(`AutoModelForSeq2SeqLM`) and `MtfSynthesizerForCausalLM`
(`AutoModelForCausalLM`, one causal stack). Inside a stack the names are
T5's (`block.0.layer.0.SelfAttention.q`), with each synthesizing function's
weights under its name (`SelfAttention.random.R`); `mtf_synthesizer.export`
maps mesh's variables to them. Where the computation and the weight names
are T5's, they are transformers' T5's (the norm, the relative position
buckets), as is its machinery (outputs recorded by `capture_outputs`,
`TransformersKwargs`); docs/pytorch.md says what stays the Synthesizer's
own, and why.

The files of the model, each of one job: configuration_mtf_synthesizer.py
(the configuration, plain data), functions_mtf_synthesizer.py (the
synthesizing functions, eq. 1-7), attention_mtf_synthesizer.py (the
attention layer that composes them, eq. 3 and 8), this file (blocks,
stacks, the base model and its heads), loss_mtf_synthesizer.py (mesh's
loss), checks_mtf_synthesizer.py (the checks of a call's arguments) and
extensions_mtf_synthesizer.py (the functions from outside the package
that a saved model carries). What the package does with the model beyond
loading and running it (conversion from T5, mesh's optimizer, saving with
a model card) is in `mtf_synthesizer/hf_tools/`, which this code never
imports.

Initialization is mesh's (`_init_weights`): a model from a config trains
from scratch as the mesh model would. Masks follow mesh: without an
attention mask, token id 0 marks the inputs' padding. The masks are
boolean, applied once the biases and synthesized logits are summed: a
masked logit is `torch.finfo(dtype).min` of the dtype the kernel computes
in, as transformers' masks (mesh's -1e9 is -inf in float16, and a row with
nothing to attend to would be NaN; `attention_mtf_synthesizer.masked_bias`
says why it is selected rather than added).
"""

import copy
import functools
import math
from typing import Dict, Iterable, Optional, Sequence, Tuple, Union

import torch
from torch import nn
from transformers import GenerationMixin
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers import initialization as init
from transformers.cache_utils import Cache
from transformers.cache_utils import DynamicCache
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput
from transformers.modeling_outputs import BaseModelOutputWithPastAndCrossAttentions
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.modeling_outputs import Seq2SeqModelOutput
from transformers.models.t5.modeling_t5 import T5Attention
from transformers.models.t5.modeling_t5 import T5LayerNorm
from transformers.processing_utils import Unpack
from transformers.utils import ModelOutput
from transformers.utils import TransformersKwargs
from transformers.utils import auto_docstring
from transformers.utils import can_return_tuple
from transformers.utils.output_capturing import OutputRecorder
from transformers.utils.output_capturing import capture_outputs

# pylint: disable=relative-beyond-top-level,unused-import
from .attention_mtf_synthesizer import MtfSynthesizerAttention
from .attention_mtf_synthesizer import MtfSynthesizerRelativeBias
from .checks_mtf_synthesizer import check_embeds
from .checks_mtf_synthesizer import check_encoder_decoder
from .checks_mtf_synthesizer import check_ids
from .checks_mtf_synthesizer import check_kwargs
from .checks_mtf_synthesizer import check_labels
from .checks_mtf_synthesizer import check_length
from .checks_mtf_synthesizer import check_stack_inputs
from .checks_mtf_synthesizer import embed
from .configuration_mtf_synthesizer import ACTIVATIONS
from .configuration_mtf_synthesizer import FUNCTION_SETTINGS
from .configuration_mtf_synthesizer import MtfSynthesizerConfig
from .functions_mtf_synthesizer import BIAS
from .functions_mtf_synthesizer import COLUMNS
from .functions_mtf_synthesizer import FUNCTIONS
from .functions_mtf_synthesizer import MtfSynthesizerFunction
from .functions_mtf_synthesizer import Positions
from .functions_mtf_synthesizer import _linear
from .loss_mtf_synthesizer import mesh_loss
# pylint: enable=relative-beyond-top-level,unused-import

class MtfSynthesizerRMSNorm(T5LayerNorm):
  """T5's norm, mesh's too: x rsqrt(mean(x^2) + epsilon) weight.

  T5's computation (float32 statistics, the weight applied in a half
  weight's dtype: how mesh rounds a bf16 model), fused into one kernel
  where the residual stream and the weight are float32 (training under
  autocast, float32 inference: docs/pytorch_benchmark.md, "Choices on
  CUDA"). The TorchScript exporter has no ONNX operator for the fused one.
  """

  def __init__(self, d_model: int, epsilon: float):
    super().__init__(d_model, eps=epsilon)

  def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
    if (hidden_states.dtype == torch.float32 and
        self.weight.dtype == torch.float32 and not torch.jit.is_tracing()):
      return nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],),
                                    self.weight, self.variance_epsilon)
    return super().forward(hidden_states)


class MtfSynthesizerDenseReluDense(nn.Module):
  """The feed-forward layer: wo(act(wi x)), or gated: wo(act(wi_0 x) wi_1 x)."""

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__()
    self.gated = config.is_gated_act
    self.act = ACT2FN[ACTIVATIONS[config.dense_act_fn]]
    d, d_ff = config.d_model, config.d_ff
    if self.gated:
      self.wi_0 = _linear(d, d_ff, d**-0.5, truncated=True)
      self.wi_1 = _linear(d, d_ff, d**-0.5, truncated=True)
    else:
      self.wi = _linear(d, d_ff, d**-0.5, truncated=True)
    self.wo = _linear(d_ff, d, d_ff**-0.5, truncated=True)
    self.dropout = nn.Dropout(config.dropout_rate)

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    if self.gated:
      h = self.act(self.wi_0(x)) * self.wi_1(x)
    else:
      h = self.act(self.wi(x))
    return self.wo(self.dropout(h))


class MtfSynthesizerLayerSelfAttention(nn.Module):
  """x + dropout(SelfAttention(norm(x)))."""

  def __init__(self, config, functions, has_relative_attention_bias,
               layer_idx):
    super().__init__()
    self.SelfAttention = MtfSynthesizerAttention(  # pylint: disable=invalid-name
        config, functions, has_relative_attention_bias, layer_idx)
    self.layer_norm = MtfSynthesizerRMSNorm(config.d_model,
                                            config.layer_norm_epsilon)
    self.dropout = nn.Dropout(config.dropout_rate)

  def forward(self, x, bias, mask, positions, past_key_values,
              output_attentions):
    y, weights = self.SelfAttention(
        self.layer_norm(x), bias, positions,
        past_key_values=past_key_values, output_attentions=output_attentions,
        mask=mask)
    return x + self.dropout(y), weights


class MtfSynthesizerLayerCrossAttention(nn.Module):
  """x + dropout(EncDecAttention(norm(x), encoder output))."""

  def __init__(self, config, layer_idx):
    super().__init__()
    self.EncDecAttention = MtfSynthesizerAttention(  # pylint: disable=invalid-name
        config, None, False, layer_idx)
    self.layer_norm = MtfSynthesizerRMSNorm(config.d_model,
                                            config.layer_norm_epsilon)
    self.dropout = nn.Dropout(config.dropout_rate)

  def forward(self, x, memory, mask, past_key_values, output_attentions):
    y, weights = self.EncDecAttention(
        self.layer_norm(x), None, key_value_states=memory,
        past_key_values=past_key_values, output_attentions=output_attentions,
        mask=mask)
    return x + self.dropout(y), weights


class MtfSynthesizerLayerFF(nn.Module):
  """x + dropout(DenseReluDense(norm(x)))."""

  def __init__(self, config):
    super().__init__()
    self.DenseReluDense = MtfSynthesizerDenseReluDense(config)  # pylint: disable=invalid-name
    self.layer_norm = MtfSynthesizerRMSNorm(config.d_model,
                                            config.layer_norm_epsilon)
    self.dropout = nn.Dropout(config.dropout_rate)

  def forward(self, x):
    return x + self.dropout(self.DenseReluDense(self.layer_norm(x)))


class MtfSynthesizerBlock(GradientCheckpointingLayer):
  """One block: self-attention, cross-attention (a decoder's), feed-forward."""

  def __init__(self, config: MtfSynthesizerConfig, functions: Tuple[str, ...],
               has_relative_attention_bias: bool, is_decoder: bool,
               layer_idx: int):
    super().__init__()
    self.is_decoder = is_decoder
    self.layer = nn.ModuleList([MtfSynthesizerLayerSelfAttention(
        config, functions, has_relative_attention_bias, layer_idx)])
    if is_decoder:
      self.layer.append(MtfSynthesizerLayerCrossAttention(config, layer_idx))
    self.layer.append(MtfSynthesizerLayerFF(config))

  def forward(self, x, bias, mask, positions, memory=None, cross_mask=None,
              past_key_values=None, output_attentions=False):
    x, self_weights = self.layer[0](x, bias, mask, positions,
                                    past_key_values, output_attentions)
    cross_weights = None
    if self.is_decoder:
      x, cross_weights = self.layer[1](x, memory, cross_mask,
                                       past_key_values, output_attentions)
    return self.layer[-1](x), self_weights, cross_weights


# ---------------------------------------------------------------------------
# Models.


@auto_docstring(custom_intro="""
    Initialization as mesh's, and what transformers asks of a model.

    The embedding getters and setters are transformers' own
    (`EmbeddingAccessMixin`: `embed_tokens`, `model.embed_tokens`, the base
    model's, `lm_head`); only `MtfSynthesizerModel`, whose input embedding
    may be shared by both stacks, defines its own.
""")
class MtfSynthesizerPreTrainedModel(PreTrainedModel):
  config_class = MtfSynthesizerConfig
  base_model_prefix = "model"
  supports_gradient_checkpointing = True
  _no_split_modules = ["MtfSynthesizerBlock"]
  _supports_sdpa = True
  _supports_flash_attn = False
  _supports_flex_attn = False
  _supports_attention_backend = False
  # Static caches and a compiled forward (generate's compile_config): the
  # stack reads a static cache's whole length, masked past the written part.
  _can_compile_fullgraph = True
  # What `output_hidden_states` and `output_attentions` return, recorded by
  # transformers' hooks (`capture_outputs` on the stack's forward): each
  # block's input and the stack's output, each layer's attention weights.
  _can_record_outputs = {
      "hidden_states": OutputRecorder(MtfSynthesizerBlock, index=0),
      "attentions": OutputRecorder(MtfSynthesizerLayerSelfAttention,
                                   index=-1),
      "cross_attentions": OutputRecorder(MtfSynthesizerLayerCrossAttention,
                                         index=-1),
  }

  def get_expanded_tied_weights_keys(self, all_submodels: bool = False
                                    ) -> Dict[str, str]:
    """transformers' ties, less any whose source the model lacks.

    transformers keeps none without `tie_word_embeddings`; without
    `shared_embedding` each stack has its own embedding, and there is no
    `shared` for the stacks or the output layer to tie to.

    Args:
      all_submodels: as transformers' (each submodel's ties, prefixed).

    Returns:
      {tied parameter: its source}.
    """
    tied = super().get_expanded_tied_weights_keys(all_submodels)
    if all_submodels:  # each submodel's went through this method
      return tied
    names = {name for name, _ in self.named_parameters(
        remove_duplicate=False)}
    return {target: source for target, source in tied.items()
            if source in names}

  def _decoding_cache(self, use_cache: Optional[bool],
                      past_key_values: Optional[Cache],
                      cross_attention: bool) -> Optional[Cache]:
    """The call's cache: the given one, a new one, or None without caching.

    Args:
      use_cache: the call's (None: the config's).
      past_key_values: the cache given, or None.
      cross_attention: the decoder attends to an encoder (an
        EncoderDecoderCache; else a DynamicCache).

    Returns:
      The cache to use, or None.
    """
    if not (self.config.use_cache if use_cache is None else use_cache):
      return None
    if past_key_values is None:
      past_key_values = (EncoderDecoderCache(DynamicCache(), DynamicCache())
                         if cross_attention else DynamicCache())
    return past_key_values

  def _output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
    """The output layer: mesh scales tied embeddings by d_model^-1/2."""
    if self.config.tie_word_embeddings:
      hidden = hidden * self.config.d_model**-0.5
    return self.lm_head(hidden)

  def _output_loss(self, logits: torch.Tensor, targets: torch.Tensor,
                   num_items_in_batch: Optional[Union[int, torch.Tensor]]
                  ) -> torch.Tensor:
    """mesh's loss of both heads (`loss_mtf_synthesizer.mesh_loss`).

    Not transformers' `self.loss_function`: mesh adds z_loss * log(Z)^2 per
    token in training and can divide by every position
    (`loss_denominator="positions"`), neither of which its losses do.

    Args:
      logits: [batch, length, vocab] of the positions that predict.
      targets: [batch, length] the ids they predict (-100: ignored).
      num_items_in_batch: as the heads' argument.

    Returns:
      The scalar loss.
    """
    return mesh_loss(logits, targets,
                     self.config.z_loss if self.training else 0.0,
                     self.config.loss_denominator == "positions",
                     num_items_in_batch)

  def create_masks_for_generate(self, config, inputs_embeds, attention_mask,
                                past_key_values, position_ids=None,
                                **kwargs) -> Optional[torch.Tensor]:
    """The mask generate() passes with a static cache: still [batch, s].

    The stacks build their masks themselves (with the relative bias, once
    per stack); a static cache's mask is padded with 0 to the cache's
    length, so that a compiled step sees one shape.

    Args:
      config: the model's configuration (unused).
      inputs_embeds: the step's inputs (unused: only their shape matters).
      attention_mask: [batch, s] 1 at tokens, 0 at padding, or None.
      past_key_values: the cache.
      position_ids: the step's positions (unused).
      **kwargs: generate()'s other arguments (unused).

    Returns:
      [batch, cache length] or the mask as given (None stays None).
    """
    del config, inputs_embeds, position_ids, kwargs
    cache = past_key_values
    if isinstance(cache, EncoderDecoderCache):
      cache = cache.self_attention_cache
    length = _static_length(cache)
    if attention_mask is None or length is None:
      return attention_mask
    return _static_mask(attention_mask, length)

  @classmethod
  def _can_set_attn_implementation(cls) -> bool:
    """Whether `set_attn_implementation` may switch the kernel: it may.

    transformers decides it from the source of the model's file, where it
    looks for the attention interface's call; that call is in
    attention_mtf_synthesizer.py.
    """
    return True

  @property
  def accepts_loss_kwargs(self) -> bool:
    """Whether the Trainer may pass `num_items_in_batch` to forward.

    With `loss_denominator="tokens"` the loss divides by the tokens of the
    whole accumulated batch when given them; mesh's "positions" has no such
    count, so the Trainer divides the per-call mean over accumulation steps
    itself.
    """
    return self.config.loss_denominator == "tokens"

  @torch.no_grad()
  def _init_weights(self, module: nn.Module) -> None:
    """mesh's initializer of each weight (mesh_tensorflow and this package).

    Each weight is initialized by the module that holds it. Norms (1) and
    token embeddings (N(0, 1)) are transformers' own initializer's
    (`PreTrainedModel._init_weights`, which draws embeddings with
    `initializer_factor` as their deviation): mesh's. The others are
    mesh's, through `transformers.initialization`: nn.Linear by the
    `mesh_initializer` it was made with (the query kernel N(0, (d_model
    d_kv)^-1/2), mesh folding the 1/sqrt(d_kv) scale into it; keys,
    values, D's and FD's first layer N(0, d_model^-1/2); the output N(0,
    (heads d_kv)^-1/2); feed-forward and softmax kernels truncated normal
    with 1/sqrt(fan_in)), where transformers' would draw N(0,
    initializer_factor); the relative bias and R, FR uniform (glorot on
    the original release's shapes); D's and FD's tables N(0,
    fan_in^-1/2), their biases and the mixture logits 0 (a synthesizing
    function's own weights: its `initializers()`). `initializer_factor`
    multiplies each scale.
    """
    config = self.config
    factor = config.initializer_factor

    def normal(tensor, std):
      init.normal_(tensor, 0.0, factor * std)

    def truncated(tensor, std):
      init.trunc_normal_(tensor, 0.0, factor * std, -2 * factor * std,
                         2 * factor * std)

    def uniform(tensor, limit):
      init.uniform_(tensor, -factor * limit, factor * limit)

    if isinstance(module, MtfSynthesizerRelativeBias):
      # mesh's default (glorot uniform) on its [heads, buckets] table.
      uniform(module.weight, math.sqrt(6.0 / sum(module.weight.shape)))
    elif isinstance(module, (MtfSynthesizerRMSNorm, nn.Embedding)):
      super()._init_weights(module)
    elif isinstance(module, nn.Linear):
      kind, std = getattr(module, "mesh_initializer",
                          ("normal", module.in_features**-0.5))
      (truncated if kind == "truncated" else normal)(module.weight, std)
      if module.bias is not None:
        init.zeros_(module.bias)
    elif isinstance(module, MtfSynthesizerAttention):
      if hasattr(module, "alpha_logits"):
        init.zeros_(module.alpha_logits)
    elif isinstance(module, MtfSynthesizerFunction):
      draw = {"normal": normal, "uniform": uniform,
              "zeros": lambda tensor, _: init.zeros_(tensor),
              "constant": init.constant_}
      for name, (kind, scale) in module.initializers(config).items():
        draw[kind](getattr(module, name), scale)

  def _shift_right(self, labels: torch.Tensor) -> torch.Tensor:
    """The decoder inputs of targets: decoder_start_token_id, then labels."""
    start = torch.full_like(labels[:, :1], self.config.decoder_start_token_id)
    shifted = torch.cat([start, labels[:, :-1]], dim=1)
    return shifted.masked_fill(shifted == -100, self.config.pad_token_id)


class MtfSynthesizerStack(MtfSynthesizerPreTrainedModel):
  """One stack: embeddings, blocks, final norm (mesh's Unitransformer)."""

  def __init__(self, config: MtfSynthesizerConfig, is_decoder: bool,
               synthesizers: Tuple[str, ...], num_layers: int,
               embed_tokens: Optional[nn.Embedding] = None):
    super().__init__(config)
    self.is_decoder = is_decoder
    self.embed_tokens = embed_tokens if embed_tokens is not None else (
        nn.Embedding(config.vocab_size, config.d_model))
    if config.max_position_embeddings:
      self.embed_positions = nn.Embedding(config.max_position_embeddings,
                                          config.d_model)
    self.synthesizer_names = tuple(synthesizers)
    self.has_tables = any(FUNCTION_SETTINGS[n].reads_max_length
                          for n in synthesizers)
    relative = config.relative_attention_type
    self.block = nn.ModuleList(
        MtfSynthesizerBlock(
            config, synthesizers,
            relative == "bias" or (relative == "bias_shared" and i == 0),
            is_decoder and config.is_encoder_decoder, i)
        for i in range(num_layers))
    self.final_layer_norm = MtfSynthesizerRMSNorm(config.d_model,
                                                  config.layer_norm_epsilon)
    self.dropout = nn.Dropout(config.dropout_rate)
    self.gradient_checkpointing = False
    self.post_init()

  def _embedded(self, input_ids: Optional[torch.Tensor],
                inputs_embeds: Optional[torch.Tensor],
                prefix: str) -> torch.Tensor:
    """[batch, t, d_model]: the ids' embeddings, or inputs_embeds, checked.

    Args:
      input_ids: [batch, t] or None.
      inputs_embeds: [batch, t, d_model] or None (exactly one is given).
      prefix: how the caller names the arguments ("decoder_" or "").

    Returns:
      The embeddings.
    """
    if (input_ids is None) == (inputs_embeds is None):
      raise ValueError("give exactly one of %sinput_ids and %sinputs_embeds" %
                       (prefix, prefix))
    if inputs_embeds is None:
      check_ids(prefix + "input_ids", input_ids)
      return embed(self.embed_tokens, input_ids, prefix + "input_ids")
    check_embeds(prefix + "inputs_embeds", inputs_embeds,
                 self.config.d_model)
    return inputs_embeds

  def _memory_span(self, past_key_values: Optional[Cache], t: int
                  ) -> Tuple[Union[int, torch.Tensor], int, Optional[int]]:
    """The self-attention's memory: (start, its length s, a static length).

    Args:
      past_key_values: the cache, or None.
      t: the new positions.

    Returns:
      start: the cache's length (a tensor with a static cache, whose value
        a compiled step never reads: the length check runs outside
        compilation); s: the positions read, start + t, or a static cache's
        whole length (the causal mask hides what is not written yet); the
        static cache's length, or None.
    """
    cache = past_key_values
    if isinstance(cache, EncoderDecoderCache):
      cache = cache.self_attention_cache
    start = cache.get_seq_length() if cache is not None else 0
    static = _static_length(cache)
    if static is None:
      check_length(self.has_tables, start + t, self.config)
      return start, start + t, None
    if not torch.compiler.is_compiling():
      check_length(self.has_tables, int(start) + t, self.config)
    return start, static, static

  def _positions(self, start: Union[int, torch.Tensor], query: torch.Tensor,
                 s: int, static: Optional[int],
                 attention_mask: Optional[torch.Tensor],
                 position_ids: Optional[torch.Tensor]
                 ) -> Tuple[Positions, torch.Tensor]:
    """The call's query and memory positions.

    Per example where position_ids are given (left padding: each memory
    position is the count of tokens before it) or the cache is static;
    else start + arange(t) against arange(s).

    Args:
      start, s, static: as `_memory_span` gives them.
      query: [t] the queries' positions (`_query_positions`).
      attention_mask: [batch, s] or None.
      position_ids: [batch, t] or None.

    Returns:
      (Positions, the learned position table's rows for the queries).
    """
    t = query.shape[0]
    if position_ids is None and static is None:
      return Positions(start, t, s), query[None]
    if position_ids is None:
      position_ids = query[None]
    if attention_mask is None:  # no padding (generate() drops all-1 masks)
      memory = torch.arange(s, device=query.device)[None].expand(
          position_ids.shape[0], s)
    else:
      memory = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    if static is not None:  # positions past the tables are masked
      memory = memory.clamp(max=self.config.synthesizer_max_length - 1)
    return Positions(start, t, s, position_ids.long(), memory), position_ids

  def _self_attention_biases(self, query: torch.Tensor, s: int,
                             attention_mask: Optional[torch.Tensor]
                             ) -> Tuple[Optional[torch.Tensor],
                                        Iterable[Optional[torch.Tensor]]]:
    """The self-attention's mask, and each block's relative bias.

    Computed once per stack: a boolean mask (the causal mask and the
    padding), and float32 relative biases [1, heads, t, s] without the
    mask. The attention sums the bias and the synthesized logits first and
    masks the sum last (`attention_mtf_synthesizer.masked_bias`).

    Args:
      query: [t] the queries' positions (`_query_positions`).
      s: the memory's length (`_memory_span`).
      attention_mask: [batch, s] or None.

    Returns:
      (the mask [1 or batch, 1, t, s], True where a key may be attended to,
      or None; one relative bias (or None) per block, in order).
    """
    config = self.config
    causal = self.is_decoder
    relative = (torch.arange(s, device=query.device)[None, :] -
                query[:, None])
    mask = (relative <= 0)[None, None] if causal else None
    padding = _padding_mask(attention_mask)
    if padding is not None:
      mask = padding if mask is None else mask & padding
    if (mask is not None and padding is None and _may_sync() and
        bool(mask.all())):
      # A decoding step's one query sees every key: nothing to select in
      # each layer (transformers' masks drop it likewise).
      mask = None
    relative_type = config.relative_attention_type
    if relative_type is None:
      return mask, [None] * len(self.block)
    # T5's buckets, mesh's too (in float32; tests/test_torch_follows_mesh.py).
    # pylint: disable-next=protected-access
    buckets = T5Attention._relative_position_bucket(
        relative, not causal, config.relative_attention_num_buckets,
        config.relative_attention_max_distance)
    def relative_bias(block):
      table = block.layer[0].SelfAttention.relative_attention_bias
      return self._relative_bias(table, buckets)

    if relative_type == "bias_shared":
      return mask, [relative_bias(self.block[0])] * len(self.block)
    # One block's at a time, as the blocks run.
    return mask, (relative_bias(block) for block in self.block)

  def _relative_bias(self, table: nn.Embedding, buckets: torch.Tensor):
    """[t, s] buckets -> [1, heads, t, s] float32 (one embedding lookup)."""
    return table(buckets).permute(2, 0, 1)[None].float()

  @capture_outputs
  @auto_docstring
  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              inputs_embeds: Optional[torch.Tensor] = None,
              position_ids: Optional[torch.LongTensor] = None,
              encoder_hidden_states: Optional[torch.Tensor] = None,
              encoder_attention_mask: Optional[torch.Tensor] = None,
              past_key_values: Optional[Cache] = None,
              **kwargs: Unpack[TransformersKwargs]
             ) -> BaseModelOutputWithPastAndCrossAttentions:
    r"""
    attention_mask (`torch.Tensor`, *optional*):
        `(batch_size, cache_length + sequence_length)`: 1 at tokens, 0 at
        padding, over the memory of the self-attention (a causal stack's:
        the cache's positions and the new ones). None: an encoder masks
        `input_ids == pad_token_id`, a causal stack nothing.
    position_ids (`torch.LongTensor`, *optional*):
        `(batch_size, sequence_length)`: each token's position in its
        example, the row of the synthesizing functions' tables it reads
        (left padding). None: the cache's length +
        `arange(sequence_length)`.

    Returns:
        BaseModelOutputWithPastAndCrossAttentions (`cross_attentions`: a
        decoder's, with `output_attentions`), or its tuple. Keywords beyond
        the named ones and the output flags raise (`check_kwargs`).
    """
    check_kwargs(kwargs, type(self).__name__)
    config = self.config
    output_attentions = kwargs.get("output_attentions")
    if output_attentions is None:
      output_attentions = config.output_attentions
    # The arguments as the caller named them (a decoder's: decoder_...).
    prefix = "decoder_" if self.is_decoder and config.is_encoder_decoder else ""
    x = self._embedded(input_ids, inputs_embeds, prefix)
    b, t = x.shape[:2]
    start, s, static = self._memory_span(past_key_values, t)
    if attention_mask is None and not self.is_decoder and (
        input_ids is not None):
      attention_mask = (input_ids != config.pad_token_id).long()
    if attention_mask is not None and static is not None:
      attention_mask = _static_mask(attention_mask, static)
    check_stack_inputs(prefix, b, t, s, attention_mask, position_ids,
                       encoder_hidden_states, encoder_attention_mask)
    query = _query_positions(start, t, static, x.device)
    positions, rows = self._positions(start, query, s, static,
                                      attention_mask, position_ids)
    if hasattr(self, "embed_positions"):
      if static is None and s > config.max_position_embeddings:
        raise ValueError(
            "a sequence of length %d is longer than max_position_embeddings "
            "%d, the rows of the learned position table" % (
                s, config.max_position_embeddings))
      x = x + self.embed_positions(rows)
    x = self.dropout(x)
    mask, biases = self._self_attention_biases(query, s, attention_mask)
    cross_mask = None
    if encoder_hidden_states is not None:
      cross_mask = _padding_mask(encoder_attention_mask)
    for block, bias in zip(self.block, biases):
      # The cache by keyword: gradient checkpointing drops it (a replayed
      # block would append its keys and values again).
      x, _, _ = block(x, bias, mask, positions, encoder_hidden_states,
                      cross_mask,
                      past_key_values=past_key_values,
                      output_attentions=bool(output_attentions))
    x = self.dropout(self.final_layer_norm(x))
    return BaseModelOutputWithPastAndCrossAttentions(
        last_hidden_state=x, past_key_values=past_key_values)


def _query_positions(start: Union[int, torch.Tensor], t: int,
                     static: Optional[int],
                     device: torch.device) -> torch.Tensor:
  """[t]: start + arange(t) (start a tensor with a static cache)."""
  if static is None:
    return torch.arange(start, start + t, device=device)
  return torch.as_tensor(start, device=device) + torch.arange(
      t, device=device)


def _static_length(cache: Optional[Cache]) -> Optional[int]:
  """A static cache's length (what each layer returns), else None."""
  if cache is None or not cache.is_compileable:
    return None
  return cache.layers[0].max_cache_len


def _static_mask(mask: torch.Tensor, length: int) -> torch.Tensor:
  """[batch, s] -> [batch, length]: the positions not yet written are 0."""
  if mask.dim() != 2 or mask.shape[-1] >= length:
    return mask
  return nn.functional.pad(mask, (0, length - mask.shape[-1]), value=0)


HiddenStates = Union[bool, int, Sequence[int]]


def _output_flags(config: MtfSynthesizerConfig,
                  output_attentions: Optional[bool],
                  output_hidden_states: Optional[HiddenStates]
                 ) -> Tuple[bool, HiddenStates]:
  """The call's output_attentions and output_hidden_states, else the config's.

  Args:
    config: the model's.
    output_attentions: the call's, or None.
    output_hidden_states: the call's (a flag, or the indices of the hidden
      states to keep, as transformers' `capture_outputs` takes them), or
      None.

  Returns:
    (output_attentions, output_hidden_states).
  """
  if output_attentions is None:
    output_attentions = config.output_attentions
  if output_hidden_states is None:
    output_hidden_states = config.output_hidden_states
  return bool(output_attentions), output_hidden_states


def _stack_hidden_states(output_hidden_states: HiddenStates,
                         stack: "MtfSynthesizerStack") -> HiddenStates:
  """output_hidden_states for one stack, its negative indices resolved.

  transformers resolves a negative index against `num_hidden_layers` (the
  decoder's depth); an encoder may have another.

  Args:
    output_hidden_states: a flag, or indices of the stack's hidden states
      (each block's input and the output), negative from the end.
    stack: the stack.

  Returns:
    The flag, or the indices in [0, blocks].
  """
  if isinstance(output_hidden_states, bool):
    return output_hidden_states
  count = len(stack.block) + 1
  indices = ([output_hidden_states] if isinstance(output_hidden_states, int)
             else list(output_hidden_states))
  return [i % count for i in indices if -count <= i < count]


def _padding_mask(mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
  """[batch, s] 1/0 -> boolean [batch, 1, 1, s]; None where nothing is masked.

  A mask of ones is dropped (outside torch.compile, torch.export and the
  TorchScript tracer, as transformers' masks are), so that an unpadded
  batch's mask has no batch dimension.

  Args:
    mask: 1 at a position that may be attended to, 0 at padding; or None.

  Returns:
    True where a key may be attended to, or None.
  """
  if mask is None or (_may_sync() and bool(mask.all())):
    return None
  return mask[:, None, None, :] > 0


def _may_sync() -> bool:
  """Whether a mask's values may be read on the host: not while compiling,
  exporting or tracing, whose graphs must hold for every mask."""
  return not torch.compiler.is_compiling() and not torch.jit.is_tracing()


@auto_docstring(custom_intro="""
    The encoder-decoder without an output layer (T5Model's place).
""")
class MtfSynthesizerModel(MtfSynthesizerPreTrainedModel):
  _tied_weights_keys = {"encoder.embed_tokens.weight": "shared.weight",
                        "decoder.embed_tokens.weight": "shared.weight"}

  def __init__(self, config: MtfSynthesizerConfig):
    check_encoder_decoder(config, type(self).__name__)
    super().__init__(config)
    if config.shared_embedding:
      self.shared = nn.Embedding(config.vocab_size, config.d_model)
      encoder_embedding = decoder_embedding = self.shared
    else:
      encoder_embedding = decoder_embedding = None
    self.encoder = MtfSynthesizerStack(
        config, False, config.encoder_synthesizers, config.num_layers,
        encoder_embedding)
    self.decoder = MtfSynthesizerStack(
        config, True, config.decoder_synthesizers,
        config.num_decoder_layers, decoder_embedding)
    self.post_init()

  def get_input_embeddings(self) -> nn.Embedding:
    return self.shared if self.config.shared_embedding else (
        self.encoder.embed_tokens)

  def set_input_embeddings(self, value: nn.Embedding) -> None:
    if self.config.shared_embedding:
      self.shared = value
      self.decoder.embed_tokens = value
    self.encoder.embed_tokens = value

  def get_encoder(self, modality=None):
    del modality
    return self.encoder

  @can_return_tuple
  @auto_docstring
  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              decoder_input_ids: Optional[torch.LongTensor] = None,
              decoder_attention_mask: Optional[torch.Tensor] = None,
              encoder_outputs: Optional[Tuple] = None,
              past_key_values: Optional[Cache] = None,
              inputs_embeds: Optional[torch.Tensor] = None,
              decoder_inputs_embeds: Optional[torch.Tensor] = None,
              use_cache: Optional[bool] = None,
              output_attentions: Optional[bool] = None,
              output_hidden_states: Optional[HiddenStates] = None,
              **kwargs: Unpack[TransformersKwargs]
             ) -> Union[Seq2SeqModelOutput, Tuple]:
    r"""
    attention_mask (`torch.Tensor`, *optional*):
        `(batch_size, sequence_length)`: 1 at the encoder's tokens, 0 at
        padding; default `input_ids != pad_token_id` (mesh marks padding
        with id 0).
    decoder_attention_mask (`torch.Tensor`, *optional*):
        `(batch_size, cache_length + target_length)`: 1 at the decoder's
        tokens over the cache's positions and the new ones, 0 at padding;
        padding at the end needs none (the decoder is causal).
    output_hidden_states (`bool`, `int` or `Sequence[int]`, *optional*):
        Whether to return the hidden states (each block's input and the
        stack's output), or the indices of those to return, negative from
        the end of each stack's own (an encoder's depth may differ from the
        decoder's). None: the config's.

    Returns:
        Seq2SeqModelOutput, or its tuple. Keywords beyond the named ones
        but generation's bookkeeping raise (`check_kwargs`).
    """
    check_kwargs(kwargs, type(self).__name__)
    config = self.config
    output_attentions, output_hidden_states = _output_flags(
        config, output_attentions, output_hidden_states)
    if attention_mask is None and input_ids is not None:
      attention_mask = (input_ids != config.pad_token_id).long()
    if encoder_outputs is None:
      encoder_outputs = self.encoder(
          input_ids=input_ids, attention_mask=attention_mask,
          inputs_embeds=inputs_embeds, output_attentions=output_attentions,
          output_hidden_states=_stack_hidden_states(output_hidden_states,
                                                    self.encoder),
          return_dict=True)
    elif not isinstance(encoder_outputs, ModelOutput):
      encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs[0])
    memory = encoder_outputs.last_hidden_state
    past_key_values = self._decoding_cache(use_cache, past_key_values, True)
    decoded = self.decoder(
        input_ids=decoder_input_ids, attention_mask=decoder_attention_mask,
        inputs_embeds=decoder_inputs_embeds, encoder_hidden_states=memory,
        encoder_attention_mask=attention_mask,
        past_key_values=past_key_values, output_attentions=output_attentions,
        output_hidden_states=_stack_hidden_states(output_hidden_states,
                                                  self.decoder),
        return_dict=True)
    return Seq2SeqModelOutput(
        last_hidden_state=decoded.last_hidden_state,
        past_key_values=past_key_values,
        decoder_hidden_states=decoded.hidden_states,
        decoder_attentions=decoded.attentions,
        cross_attentions=decoded.cross_attentions,
        encoder_last_hidden_state=memory,
        encoder_hidden_states=getattr(encoder_outputs, "hidden_states", None),
        encoder_attentions=getattr(encoder_outputs, "attentions", None))


@auto_docstring(custom_intro="""
    The encoder-decoder with its output layer (mesh's Bitransformer).
""")
class MtfSynthesizerForConditionalGeneration(MtfSynthesizerPreTrainedModel,
                                             GenerationMixin):
  _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

  def __init__(self, config: MtfSynthesizerConfig):
    check_encoder_decoder(config, type(self).__name__)
    super().__init__(config)
    self.model = MtfSynthesizerModel(config)
    self.lm_head = _linear(config.d_model, config.vocab_size,
                           config.d_model**-0.5, truncated=True)
    self.post_init()

  def get_encoder(self, modality=None):
    del modality
    return self.model.encoder

  def get_decoder(self):
    return self.model.decoder

  @can_return_tuple
  @auto_docstring
  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              decoder_input_ids: Optional[torch.LongTensor] = None,
              decoder_attention_mask: Optional[torch.Tensor] = None,
              encoder_outputs: Optional[Tuple] = None,
              past_key_values: Optional[Cache] = None,
              inputs_embeds: Optional[torch.Tensor] = None,
              decoder_inputs_embeds: Optional[torch.Tensor] = None,
              labels: Optional[torch.LongTensor] = None,
              use_cache: Optional[bool] = None,
              output_attentions: Optional[bool] = None,
              output_hidden_states: Optional[HiddenStates] = None,
              num_items_in_batch: Optional[Union[int, torch.Tensor]] = None,
              **kwargs: Unpack[TransformersKwargs]
             ) -> Union[Seq2SeqLMOutput, Tuple]:
    r"""
    attention_mask (`torch.Tensor`, *optional*):
        `(batch_size, sequence_length)`: 1 at the encoder's tokens, 0 at
        padding; default `input_ids != pad_token_id` (mesh marks padding
        with id 0).
    decoder_attention_mask (`torch.Tensor`, *optional*):
        `(batch_size, cache_length + target_length)`: 1 at the decoder's
        tokens over the cache's positions and the new ones, 0 at padding;
        padding at the end needs none (the decoder is causal).
    labels (`torch.LongTensor`, *optional*):
        `(batch_size, target_length)`: the targets (-100: ignored);
        `decoder_input_ids` default to them shifted right. The loss is
        mesh's (`loss_mtf_synthesizer.mesh_loss`: cross entropy, and
        `z_loss` in training).
    output_hidden_states (`bool`, `int` or `Sequence[int]`, *optional*):
        Whether to return the hidden states (each block's input and the
        stack's output), or the indices of those to return, negative from
        the end of each stack's own (an encoder's depth may differ from the
        decoder's). None: the config's.
    num_items_in_batch (`int` or `torch.Tensor`, *optional*):
        The loss divides its sum by this: the target tokens of a whole
        batch split over calls, as transformers' Trainer counts them; only
        with `loss_denominator="tokens"`.

    Returns:
        Seq2SeqLMOutput, or its tuple: the logits of the decoder inputs
        (teacher forcing or a decoding step).
    """
    if labels is not None:
      check_labels("labels", labels)
    from_labels = decoder_input_ids is None and decoder_inputs_embeds is None
    if from_labels:
      if labels is None:
        raise ValueError("give decoder_input_ids or labels")
      decoder_input_ids = self._shift_right(labels)
    model = functools.partial(
        self.model, input_ids=input_ids, attention_mask=attention_mask,
        decoder_input_ids=decoder_input_ids,
        decoder_attention_mask=decoder_attention_mask,
        encoder_outputs=encoder_outputs, past_key_values=past_key_values,
        inputs_embeds=inputs_embeds,
        decoder_inputs_embeds=decoder_inputs_embeds, use_cache=use_cache,
        output_attentions=output_attentions,
        output_hidden_states=output_hidden_states, return_dict=True,
        **kwargs)
    if from_labels and not (torch.compiler.is_compiling() or
                            torch.jit.is_tracing()):
      try:
        out = model()
      except ValueError as error:  # the decoder's inputs are the labels'
        if "decoder_input_ids" not in str(error):
          raise
        raise ValueError("labels, shifted right into decoder_input_ids: %s" %
                         error) from None
    else:
      out = model()
    logits = self._output_logits(out.last_hidden_state)
    loss = None
    if labels is not None:
      check_labels("labels", labels, logits)
      loss = self._output_loss(logits, labels, num_items_in_batch)
    return Seq2SeqLMOutput(
        loss=loss, logits=logits, past_key_values=out.past_key_values,
        decoder_hidden_states=out.decoder_hidden_states,
        decoder_attentions=out.decoder_attentions,
        cross_attentions=out.cross_attentions,
        encoder_last_hidden_state=out.encoder_last_hidden_state,
        encoder_hidden_states=out.encoder_hidden_states,
        encoder_attentions=out.encoder_attentions)

  def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor):
    return self._shift_right(labels)

@auto_docstring(custom_intro="""
    A decoder-only language model (mesh's Unitransformer, model_type lm).

    One causal stack of `num_layers` blocks with `decoder_synthesizers`. As
    in mesh, a sequence starts with id 0: give [0] + prompt ids. A
    left-padded batch (attention_mask 0 at the padding, and position_ids,
    which `generate()` derives from it) reads each example's tables from its
    first token, so each row generates what it generates alone. An
    encoder-decoder's config gives its decoder alone (`num_decoder_layers`
    blocks).
""")
class MtfSynthesizerForCausalLM(MtfSynthesizerPreTrainedModel,
                               GenerationMixin):
  _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

  def __init__(self, config: MtfSynthesizerConfig):
    if config.is_encoder_decoder:
      # The decoder of an encoder-decoder's config, alone (as transformers'
      # BartForCausalLM takes one): its blocks and functions, no
      # cross-attention.
      config = copy.deepcopy(config)
      config.num_layers = config.num_decoder_layers
      config.is_encoder_decoder = False
    super().__init__(config)
    self.model = MtfSynthesizerStack(config, True,
                                     config.decoder_synthesizers,
                                     config.num_layers)
    self.lm_head = _linear(config.d_model, config.vocab_size,
                           config.d_model**-0.5, truncated=True)
    self.post_init()

  def get_decoder(self):
    return self.model

  def _prepare_attention_mask_for_generation(self, inputs_tensor,
                                             generation_config,
                                             model_kwargs):
    """Without a mask every id is a token: mesh's sequences start with id 0.

    (transformers would take the leading 0, the pad id, for padding.) Give
    `attention_mask` for a left-padded batch.
    """
    del generation_config, model_kwargs
    return torch.ones(inputs_tensor.shape[:2], dtype=torch.long,
                      device=inputs_tensor.device)

  @can_return_tuple
  @auto_docstring
  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              position_ids: Optional[torch.LongTensor] = None,
              past_key_values: Optional[Cache] = None,
              inputs_embeds: Optional[torch.Tensor] = None,
              labels: Optional[torch.LongTensor] = None,
              use_cache: Optional[bool] = None,
              output_attentions: Optional[bool] = None,
              output_hidden_states: Optional[HiddenStates] = None,
              shift_labels: Optional[torch.LongTensor] = None,
              num_items_in_batch: Optional[Union[int, torch.Tensor]] = None,
              **kwargs: Unpack[TransformersKwargs]
             ) -> Union[CausalLMOutputWithPast, Tuple]:
    r"""
    input_ids (`torch.LongTensor`, *optional*):
        `(batch_size, sequence_length)`, the new tokens when decoding with a
        cache. As in mesh, a sequence starts with id 0.
    attention_mask (`torch.Tensor`, *optional*):
        `(batch_size, cache_length + sequence_length)`: 1 at tokens, 0 at
        padding (left padding included).
    position_ids (`torch.LongTensor`, *optional*):
        `(batch_size, sequence_length)`: each token's position in its
        example, the row of the tables it reads: with left padding, the
        count of tokens before it, as `generate()` derives them from
        `attention_mask`. None: the cache's length + `arange`.
    labels (`torch.LongTensor`, *optional*):
        `(batch_size, sequence_length)`: targets aligned with `input_ids`
        (shifted inside, as in transformers' causal LMs; -100: ignored).
        The loss is mesh's (`loss_mtf_synthesizer.mesh_loss`).
    shift_labels (`torch.LongTensor`, *optional*):
        The targets already shifted, the token each position predicts
        (-100: ignored). Given with `labels`, the loss is computed on
        these, as transformers' causal LMs do (its Trainer passes both
        where the sequence is split across devices).
    output_hidden_states (`bool`, `int` or `Sequence[int]`, *optional*):
        Whether to return the hidden states (each block's input and the
        stack's output), or the indices of those to return, negative from
        the end of each stack's own (an encoder's depth may differ from the
        decoder's). None: the config's.
    num_items_in_batch (`int` or `torch.Tensor`, *optional*):
        The loss divides its sum by this: the target tokens of a whole
        batch split over calls, as transformers' Trainer counts them; only
        with `loss_denominator="tokens"`.

    Returns:
        CausalLMOutputWithPast, or its tuple: the logits of every position
        (of the new ones, with a cache). Keywords beyond the named ones
        but generation's bookkeeping raise (`check_kwargs`).
    """
    check_kwargs(kwargs, type(self).__name__)
    config = self.config
    output_attentions, output_hidden_states = _output_flags(
        config, output_attentions, output_hidden_states)
    past_key_values = self._decoding_cache(use_cache, past_key_values,
                                           False)
    out = self.model(
        input_ids=input_ids, attention_mask=attention_mask,
        inputs_embeds=inputs_embeds, position_ids=position_ids,
        past_key_values=past_key_values,
        output_attentions=output_attentions,
        output_hidden_states=_stack_hidden_states(output_hidden_states,
                                                  self.model),
        return_dict=True)
    logits = self._output_logits(out.last_hidden_state)
    loss = None
    predicting = logits
    if shift_labels is not None:  # as given (labels, if any, are unused)
      check_labels("shift_labels", shift_labels, logits)
    elif labels is not None:  # position i predicts token i + 1
      check_labels("labels", labels, logits)
      predicting, shift_labels = logits[:, :-1], labels[:, 1:]
    if shift_labels is not None:
      loss = self._output_loss(predicting, shift_labels, num_items_in_batch)
    return CausalLMOutputWithPast(
        loss=loss, logits=logits, past_key_values=past_key_values,
        hidden_states=out.hidden_states, attentions=out.attentions)
