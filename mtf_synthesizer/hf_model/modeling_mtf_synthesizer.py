# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A Synthesizer T5 in PyTorch, computing what the mesh model computes.

Loaded by `transformers` from a directory that `mtf_synthesizer.hf_export`
wrote (`trust_remote_code=True`): `MtfSynthesizerForConditionalGeneration`
(`AutoModelForSeq2SeqLM`) for encoder-decoder models and
`MtfSynthesizerForCausalLM` (`AutoModelForCausalLM`) for decoder-only
language models. The modules mirror mesh's variable scopes, so that a
parameter's name is its mesh name with "/" as ".", "block_001" as
"block.1" and the "kernel" and "scale" leaves dropped, in mesh's layouts
(combined [d_model, heads * d_kv] kernels; per-head tables).

The synthesizing functions (Tay et al., sec. 3), per head h, for a query at
position i and a memory position j:

  Dense (D)            S_ij = (W2 relu(W1 X_i + b1) + b2)_j       eq. 1-2
  Random (R), Fix      S_ij = R_ij                                eq. 4
  FactorizedDense (FD) S_ij = A_i[j mod a] * B_i[floor(j / a)]    eq. 5-6
  FactorizedRandom     S_ij = (R1 R2^T)_ij                        eq. 7
  DotProduct (V)       S_ij = Q_i . K_j
  Mixture              S = sum_f alpha_f S_f, alpha = softmax(w)  eq. 8

and Y = softmax(S + relative position bias + masks) G(X) W_o (eq. 3).
Positions index R's rows and the columns of R, D and FD: when decoding with
the cache, the query at step t reads row t, as mesh's incremental decoding
does.

Masks follow mesh: without an attention mask, token id 0 (padding) marks the
padding of the inputs; a masked logit gets -1e9.
"""

import math
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn
from transformers import GenerationMixin
from transformers import PreTrainedModel
from transformers.cache_utils import Cache
from transformers.cache_utils import DynamicCache
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.modeling_outputs import Seq2SeqLMOutput

# pylint: disable-next=relative-beyond-top-level
from .configuration_mtf_synthesizer import MtfSynthesizerConfig

# mesh's attention bias for a position that may not be attended to.
MASKED = -1e9


def relative_position_bucket(relative_position: torch.Tensor,
                             bidirectional: bool, num_buckets: int,
                             max_distance: int) -> torch.Tensor:
  """T5's relative position buckets, in float32 as mesh computes them.

  Args:
    relative_position: memory position minus query position (int64).
    bidirectional: encoder (True) or causal stack (False).
    num_buckets: buckets (half for each direction when bidirectional).
    max_distance: distances from here on share the last bucket.

  Returns:
    Bucket ids, like relative_position.
  """
  n = -relative_position
  ret = torch.zeros_like(n)
  if bidirectional:
    num_buckets //= 2
    ret = ret + (n < 0).long() * num_buckets
    n = n.abs()
  else:
    n = n.clamp(min=0)
  max_exact = num_buckets // 2
  scale = torch.tensor(math.log(max_distance / max_exact), dtype=torch.float32)
  ratio = torch.log(n.clamp(min=1).float() / max_exact) / scale
  large = max_exact + (ratio * (num_buckets - max_exact)).long()
  large = large.clamp(max=num_buckets - 1)
  return ret + torch.where(n < max_exact, n, large)


def rms_norm(x: torch.Tensor, scale: torch.Tensor,
             epsilon: float) -> torch.Tensor:
  """mesh's norm: x / sqrt(mean(x^2) + epsilon) * scale."""
  return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon) * scale


def _activation(name: str):
  """mesh's activation by name (gelu: its tanh approximation)."""
  functions = {
      "relu": torch.relu,
      "gelu": lambda x: nn.functional.gelu(x, approximate="tanh"),
      "gelu_new": lambda x: nn.functional.gelu(x, approximate="tanh"),
      "silu": nn.functional.silu,
      "swish": nn.functional.silu,
      "linear": lambda x: x,
  }
  if name not in functions:
    raise ValueError("activation %r is not supported (supported: %s)" %
                     (name, sorted(functions)))
  return functions[name]


class Positions:
  """Query and memory positions of one attention call.

  Attributes:
    query: [t] int64.
    memory: [s] int64.
  """

  def __init__(self, query: torch.Tensor, memory: torch.Tensor):
    self.query = query
    self.memory = memory


# ---------------------------------------------------------------------------
# Synthesizing functions: each returns logits [batch or 1, heads, t, s].


class Random(nn.Module):
  """R (eq. 4): a trainable [heads, N, N] table, read at the positions."""
  name = "random"
  needs_queries = False
  needs_keys = False

  def __init__(self, spec: Dict, num_heads: int, d_model: int, d_kv: int,
               max_length: int):
    super().__init__()
    del spec, d_model, d_kv
    self.R = nn.Parameter(torch.zeros(num_heads, max_length, max_length))

  def forward(self, x, queries, keys, positions: Positions):
    del x, queries, keys
    return self.R[:, positions.query[:, None], positions.memory[None, :]][None]


class FixedRandom(Random):
  """Fix (eq. 4): R never trained (a buffer, saved with the weights)."""
  name = "fixed_random"

  def __init__(self, spec, num_heads, d_model, d_kv, max_length):
    nn.Module.__init__(self)
    self.register_buffer(
        "R", torch.zeros(num_heads, max_length, max_length), persistent=True)


class FactorizedRandom(nn.Module):
  """FR (eq. 7): R1 R2^T, R1 and R2 [heads, N, k]."""
  name = "factorized_random"
  needs_queries = False
  needs_keys = False

  def __init__(self, spec, num_heads, d_model, d_kv, max_length):
    super().__init__()
    del d_model, d_kv
    k = spec["k"]
    self.R1 = nn.Parameter(torch.zeros(num_heads, max_length, k))
    self.R2 = nn.Parameter(torch.zeros(num_heads, max_length, k))

  def forward(self, x, queries, keys, positions: Positions):
    del x, queries, keys
    r1 = self.R1[:, positions.query]
    r2 = self.R2[:, positions.memory]
    return torch.matmul(r1, r2.transpose(-1, -2))[None]


class _DenseHidden(nn.Module):
  """relu(W1 X_i + b1) per head, the first layer of D and FD."""

  def __init__(self, spec, num_heads, d_model, d_kv):
    super().__init__()
    hidden = spec.get("hidden_size") or d_kv
    self.use_bias = spec.get("use_bias", True)
    self.w1 = nn.Parameter(torch.zeros(d_model, num_heads, hidden))
    if self.use_bias:
      self.b1 = nn.Parameter(torch.zeros(num_heads, hidden))

  def hidden(self, x: torch.Tensor) -> torch.Tensor:
    """[batch, t, d_model] -> [batch, heads, t, hidden]."""
    h = torch.einsum("btd,dhk->bhtk", x, self.w1)
    if self.use_bias:
      h = h + self.b1[None, :, None, :]
    return torch.relu(h)


class Dense(_DenseHidden):
  """D (eq. 1-2): each query predicts its row of N logits."""
  name = "dense"
  needs_keys = False

  def __init__(self, spec, num_heads, d_model, d_kv, max_length):
    self.share_query_projection = spec.get("share_query_projection", False)
    if self.share_query_projection:
      nn.Module.__init__(self)
      self.use_bias = spec.get("use_bias", True)
      hidden = d_kv
    else:
      super().__init__(spec, num_heads, d_model, d_kv)
      hidden = self.w1.shape[-1]
    self.w2 = nn.Parameter(torch.zeros(num_heads, hidden, max_length))
    if self.use_bias:
      self.b2 = nn.Parameter(torch.zeros(num_heads, max_length))

  @property
  def needs_queries(self):
    return self.share_query_projection

  def forward(self, x, queries, keys, positions: Positions):
    del keys
    h = torch.relu(queries) if self.share_query_projection else self.hidden(x)
    logits = torch.einsum("bhtk,hks->bhts", h,
                          self.w2[:, :, positions.memory])
    if self.use_bias:
      logits = logits + self.b2[:, positions.memory][None, :, None, :]
    return logits


class FactorizedDense(_DenseHidden):
  """FD (eq. 5-6): C_ij = A_i[j mod a] * B_i[floor(j / a)]."""
  name = "factorized_dense"
  needs_queries = False
  needs_keys = False

  def __init__(self, spec, num_heads, d_model, d_kv, max_length):
    super().__init__(spec, num_heads, d_model, d_kv)
    hidden = self.w1.shape[-1]
    a, b = spec["a"], spec["b"]
    if a * b != max_length:
      raise ValueError("FactorizedDense needs a * b == max_length, got %d * "
                       "%d != %d" % (a, b, max_length))
    self.a = a
    self.wa = nn.Parameter(torch.zeros(num_heads, hidden, a))
    self.wb = nn.Parameter(torch.zeros(num_heads, hidden, b))
    if self.use_bias:
      self.ba = nn.Parameter(torch.zeros(num_heads, a))
      self.bb = nn.Parameter(torch.zeros(num_heads, b))

  def forward(self, x, queries, keys, positions: Positions):
    del queries, keys
    h = self.hidden(x)
    fa = torch.einsum("bhtk,hka->bhta", h, self.wa)
    fb = torch.einsum("bhtk,hkc->bhtc", h, self.wb)
    if self.use_bias:
      fa = fa + self.ba[None, :, None, :]
      fb = fb + self.bb[None, :, None, :]
    columns = positions.memory
    return fa[..., columns % self.a] * fb[..., columns // self.a]


class DotProduct(nn.Module):
  """V: Q_i . K_j (mesh's scale is in the query kernel or the queries)."""
  name = "dot_product"
  needs_queries = True
  needs_keys = True

  def __init__(self, spec, num_heads, d_model, d_kv, max_length):
    super().__init__()

  def forward(self, x, queries, keys, positions: Positions):
    del x, positions
    return torch.matmul(queries, keys.transpose(-1, -2))


FUNCTIONS = {f.name: f for f in (Random, FixedRandom, FactorizedRandom, Dense,
                                 FactorizedDense, DotProduct)}


# ---------------------------------------------------------------------------
# Layers.


class Mixture(nn.Module):
  """The mixture weights of eq. 8: alpha = softmax(alpha_logits) [f, heads]."""

  def __init__(self, functions: int, num_heads: int):
    super().__init__()
    self.alpha_logits = nn.Parameter(torch.zeros(functions, num_heads))

  def forward(self) -> torch.Tensor:
    return torch.softmax(self.alpha_logits.float(), dim=0)


class Attention(nn.Module):
  """SynthesizerAttention, mesh's SelfAttention or EncDecAttention."""

  def __init__(self, spec: Dict, d_model: int):
    super().__init__()
    self.kind = spec["type"]
    h, dk = spec["num_heads"], spec["d_kv"]
    self.num_heads, self.d_kv = h, dk
    memory_heads = spec.get("num_memory_heads", 0) or h
    if memory_heads not in (1, h):
      raise ValueError("num_memory_heads must be 0, 1 or num_heads; got %d"
                       % memory_heads)
    self.memory_heads = memory_heads
    self.scale_queries = spec.get("scale_queries", False)
    self.relative_attention = spec.get("relative_attention")
    self.num_buckets = spec.get("relative_attention_num_buckets", 32)
    self.max_length = spec.get("max_length")
    function_specs = spec.get("functions") or [{"name": "dot_product"}]
    self.function_names = [f["name"] for f in function_specs]
    for f in function_specs:
      setattr(self, f["name"], FUNCTIONS[f["name"]](
          f, h, d_model, dk, self.max_length or 0))
    functions = self.functions()
    self.needs_queries = any(f.needs_queries for f in functions)
    self.needs_keys = any(f.needs_keys for f in functions)
    if len(functions) > 1 and spec.get("learned_weights", True):
      self.mixture = Mixture(len(functions), h)
    if self.needs_queries:
      self.q = nn.Parameter(torch.zeros(d_model, h * dk))
    if self.needs_keys:
      self.k = nn.Parameter(torch.zeros(d_model, memory_heads * dk))
      self.v = nn.Parameter(torch.zeros(d_model, memory_heads * dk))
    else:
      self.kv = nn.Parameter(torch.zeros(d_model, memory_heads * dk))
    self.o = nn.Parameter(torch.zeros(h * dk, d_model))
    if self.relative_attention == "bias" or (
        self.relative_attention == "bias_shared" and spec.get("owns_bias")):
      self.relative_attention_bias = nn.Parameter(
          torch.zeros(h, self.num_buckets))

  def functions(self) -> List[nn.Module]:
    return [getattr(self, name) for name in self.function_names]

  def _heads(self, x: torch.Tensor, kernel: torch.Tensor,
             heads: int) -> torch.Tensor:
    """x [b, t, d_model] @ kernel -> [b, heads, t, d_kv]."""
    b, t, _ = x.shape
    return torch.matmul(x, kernel).view(b, t, heads, self.d_kv).transpose(1, 2)

  def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor],
              positions: Optional[Positions],
              memory: Optional[torch.Tensor] = None,
              cache: Optional[Cache] = None, layer_idx: int = 0,
              cross_cache_ready: bool = False) -> torch.Tensor:
    """Attends.

    Args:
      x: the normalized layer input [batch, t, d_model].
      bias: added to the logits, broadcastable to [batch, heads, t, s].
      positions: query and memory positions (self-attention).
      memory: the encoder output (EncDecAttention).
      cache: the layer's key/value cache (DynamicCache), or None.
      layer_idx: its index in the cache.
      cross_cache_ready: the cache already holds the encoder's keys/values.

    Returns:
      [batch, t, d_model].
    """
    queries = (self._heads(x, self.q, self.num_heads)
               if self.needs_queries else None)
    if queries is not None and self.scale_queries:
      queries = queries * self.d_kv**-0.5
    if cross_cache_ready:
      stored = cache.layers[layer_idx]
      keys, values = stored.keys, stored.values
    else:
      source = x if memory is None else memory
      if self.needs_keys:
        keys = self._heads(source, self.k, self.memory_heads)
        values = self._heads(source, self.v, self.memory_heads)
      else:
        values = self._heads(source, self.kv, self.memory_heads)
        # No keys: the cache keeps one column of the values in their place
        # (it measures its length by the keys and takes an empty one as
        # none).
        keys = values[..., :1]
      if cache is not None:
        keys, values = cache.update(keys, values, layer_idx)
    logits = None
    weights = self.mixture() if hasattr(self, "mixture") else None
    for i, function in enumerate(self.functions()):
      term = function(x, queries, keys, positions).float()
      if weights is not None:
        term = term * weights[i][None, :, None, None]
      logits = term if logits is None else logits + term
    if bias is not None:
      logits = logits + bias
    probabilities = torch.softmax(logits, dim=-1).to(values.dtype)
    out = torch.matmul(probabilities, values)       # [b, h, t, d_kv]
    b, _, t, _ = out.shape
    return torch.matmul(out.transpose(1, 2).reshape(b, t, -1), self.o)


class DenseReluDense(nn.Module):
  """mesh's feed-forward layer, plain or gated (wi_0, wi_1)."""

  def __init__(self, spec: Dict, d_model: int):
    super().__init__()
    d_ff = spec["d_ff"]
    self.activations = [_activation(a) for a in spec["activations"]]
    if spec.get("use_bias"):
      raise ValueError("DenseReluDense with use_bias is not supported")
    if len(self.activations) == 1:
      self.wi = nn.Parameter(torch.zeros(d_model, d_ff))
    else:
      for i in range(len(self.activations)):
        setattr(self, "wi_%d" % i, nn.Parameter(torch.zeros(d_model, d_ff)))
    self.wo = nn.Parameter(torch.zeros(d_ff, d_model))

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    if len(self.activations) == 1:
      h = self.activations[0](torch.matmul(x, self.wi))
    else:
      h = None
      for i, activation in enumerate(self.activations):
        term = activation(torch.matmul(x, getattr(self, "wi_%d" % i)))
        h = term if h is None else h * term
    return torch.matmul(h, self.wo)


class Sublayer(nn.Module):
  """A mesh layer with its pre-norm: x + layer(rms_norm(x))."""

  def __init__(self, spec: Dict, d_model: int):
    super().__init__()
    self.type = spec["type"]
    self.rms_norm = nn.Parameter(torch.ones(d_model))
    if self.type == "DenseReluDense":
      setattr(self, self.type, DenseReluDense(spec, d_model))
    elif self.type in ("SynthesizerAttention", "SelfAttention",
                       "EncDecAttention"):
      setattr(self, self.type, Attention(spec, d_model))
    else:
      raise ValueError("layer %r is not supported" % self.type)

  @property
  def layer(self) -> nn.Module:
    return getattr(self, self.type)


class Block(nn.Module):
  """One block of a stack: its layers in mesh's order."""

  def __init__(self, layer_specs: Sequence[Dict], d_model: int):
    super().__init__()
    self.layer = nn.ModuleList(Sublayer(s, d_model) for s in layer_specs)


class Stack(nn.Module):
  """A mesh Unitransformer's layer stack with its final norm."""

  def __init__(self, config: MtfSynthesizerConfig, name: str,
               owns_embedding: bool):
    super().__init__()
    spec = config.stacks[name]
    self.name = name
    self.main_input_name = "input_ids"
    self.epsilon = config.layer_norm_epsilon
    self.max_distance = config.relative_attention_max_distance
    self.autoregressive = spec["autoregressive"]
    layer_specs = [dict(s) for s in spec["layers"]]
    self.block = nn.ModuleList()
    for i in range(spec["num_blocks"]):
      for s in layer_specs:
        s["owns_bias"] = i == 0
      self.block.append(Block(layer_specs, config.d_model))
    if owns_embedding:
      self.embedding = nn.Parameter(torch.zeros(config.vocab_size,
                                                config.d_model))
    if spec.get("positional_embedding"):
      self.positional_embedding = nn.Parameter(
          torch.zeros(spec["positional_embedding"], config.d_model))
    self.rms_norm = nn.Parameter(torch.ones(config.d_model))
    self.logits_kind = spec.get("logits")
    if self.logits_kind == "kernel":
      self.logits = nn.Parameter(torch.zeros(config.d_model,
                                             config.vocab_size))

  def embedding_table(self, shared: Optional[torch.Tensor]) -> torch.Tensor:
    """The stack's own embedding, else the model's shared one."""
    return self.embedding if hasattr(self, "embedding") else shared

  def to_logits(self, x: torch.Tensor,
                shared: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The output layer: own kernel, or the embedding scaled as mesh does."""
    if self.logits_kind == "kernel":
      return torch.matmul(x, self.logits)
    table = self.embedding_table(shared)
    return torch.matmul(x * table.shape[1]**-0.5, table.t())

  def _shared_bias_table(self, kind: str) -> Optional[torch.Tensor]:
    for sublayer in self.block[0].layer:
      if sublayer.type == kind and hasattr(sublayer.layer,
                                           "relative_attention_bias"):
        return sublayer.layer.relative_attention_bias
    return None

  def forward(self, input_ids: torch.Tensor,
              segments: Optional[torch.Tensor] = None,
              memory: Optional[torch.Tensor] = None,
              memory_segments: Optional[torch.Tensor] = None,
              cache: Optional[Cache] = None,
              shared: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Runs the stack.

    Args:
      input_ids: [batch, t].
      segments: [batch, s] 1 for tokens, 0 for padding of the memory this
        stack's self-attention reads (for a non-autoregressive stack, the
        inputs themselves); None: no padding.
      memory: the encoder output (a decoder).
      memory_segments: [batch, s_enc] 1 for the encoder's tokens.
      cache: a DynamicCache or EncoderDecoderCache when decoding.
      shared: the model's shared embedding, when the stack has none.

    Returns:
      The normalized output [batch, t, d_model].
    """
    self_cache, cross_cache, cross_ready = cache, None, False
    if isinstance(cache, EncoderDecoderCache):
      self_cache = cache.self_attention_cache
      cross_cache = cache.cross_attention_cache
    past = self_cache.get_seq_length() if self_cache is not None else 0
    t = input_ids.shape[1]
    device = input_ids.device
    query = torch.arange(past, past + t, device=device)
    memory_positions = torch.arange(past + t, device=device)
    positions = Positions(query, memory_positions)
    x = nn.functional.embedding(input_ids, self.embedding_table(shared))
    if hasattr(self, "positional_embedding"):
      x = x + self.positional_embedding[query][None]
    relative = memory_positions[None, :] - query[:, None]
    mask = torch.zeros(relative.shape, device=device)
    if self.autoregressive:
      mask = mask.masked_fill(relative > 0, MASKED)
    mask = mask[None, None]
    if segments is not None:
      visible = segments[:, None, -t:, None] == segments[:, None, None, :]
      mask = mask + torch.where(visible, 0.0, MASKED)
    cross_bias = None
    if memory is not None and memory_segments is not None:
      cross_bias = torch.where(memory_segments[:, None, None, :] > 0, 0.0,
                               MASKED)
    buckets = None
    index = 0
    for block in self.block:
      for sublayer in block.layer:
        layer = sublayer.layer
        y = rms_norm(x, sublayer.rms_norm, self.epsilon)
        if sublayer.type == "DenseReluDense":
          y = layer(y)
        elif sublayer.type == "EncDecAttention":
          if cross_cache is not None:
            cross_ready = bool(cache.is_updated.get(index))
          y = layer(y, cross_bias, None, memory=memory, cache=cross_cache,
                    layer_idx=index, cross_cache_ready=cross_ready)
          if cross_cache is not None:
            cache.is_updated[index] = True
        else:
          bias = mask
          if layer.relative_attention is not None:
            if buckets is None:
              buckets = relative_position_bucket(
                  relative, not self.autoregressive, layer.num_buckets,
                  self.max_distance)
            table = (layer.relative_attention_bias
                     if layer.relative_attention == "bias" else
                     self._shared_bias_table(sublayer.type))
            bias = bias + table[:, buckets][None].float()
          if layer.max_length and past + t > layer.max_length:
            raise ValueError(
                "%s got a sequence of length %d but its max_length is %d (the "
                "size of its position-indexed parameters)" % (
                    sublayer.type, past + t, layer.max_length))
          y = layer(y, bias, positions, cache=self_cache, layer_idx=index)
        x = x + y
      index += 1
    return rms_norm(x, self.rms_norm, self.epsilon)


class MtfSynthesizerPreTrainedModel(PreTrainedModel):
  """Weights come from mesh; nothing is initialized here."""
  config_class = MtfSynthesizerConfig
  base_model_prefix = "model"
  _no_split_modules = ["Block"]

  def _init_weights(self, module):
    del module  # every weight is in the exported checkpoint


def _segments(input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor],
              pad_token_id: int) -> torch.Tensor:
  """1 at tokens, 0 at padding: the mask, else token ids != padding."""
  if attention_mask is not None:
    return (attention_mask > 0).long()
  return (input_ids != pad_token_id).long()


class MtfSynthesizerForConditionalGeneration(MtfSynthesizerPreTrainedModel,
                                             GenerationMixin):
  """An encoder-decoder (mesh's Bitransformer)."""

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__(config)
    if config.shared_embedding:
      self.shared = nn.Parameter(torch.zeros(config.vocab_size,
                                             config.d_model))
    owns = not config.shared_embedding
    self.encoder = Stack(config, "encoder", owns)
    self.decoder = Stack(config, "decoder", owns)
    self.post_init()

  def shared_embedding(self) -> Optional[torch.Tensor]:
    return self.shared if self.config.shared_embedding else None

  def get_encoder(self, modality=None):
    del modality
    return _Encoder(self)

  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              decoder_input_ids: Optional[torch.LongTensor] = None,
              encoder_outputs: Optional[Tuple] = None,
              past_key_values: Optional[Cache] = None,
              labels: Optional[torch.LongTensor] = None,
              use_cache: Optional[bool] = None,
              **kwargs) -> Seq2SeqLMOutput:
    """Logits of the decoder inputs (teacher forcing or a decoding step).

    Args:
      input_ids: the encoder inputs [batch, s].
      attention_mask: 1 at input tokens, 0 at padding; default: ids != 0.
      decoder_input_ids: [batch, t]; default: labels shifted right.
      encoder_outputs: the encoder's output, when already computed.
      past_key_values: the decoding cache.
      labels: targets for a cross-entropy loss (-100: ignored).
      use_cache: keep and return a cache.
      **kwargs: ignored (generation's bookkeeping).

    Returns:
      Seq2SeqLMOutput.
    """
    for key in ("decoder_attention_mask", "cache_position", "return_dict",
                "output_attentions", "output_hidden_states"):
      kwargs.pop(key, None)
    if encoder_outputs is None:
      encoder_outputs = self.get_encoder()(input_ids, attention_mask)
    elif not isinstance(encoder_outputs, BaseModelOutput):
      encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs[0])
    memory = encoder_outputs.last_hidden_state
    if attention_mask is None and input_ids is not None:
      attention_mask = _segments(input_ids, None, self.config.pad_token_id)
    if attention_mask is None:
      attention_mask = torch.ones(memory.shape[:2], dtype=torch.long,
                                  device=memory.device)
    if decoder_input_ids is None:
      if labels is None:
        raise ValueError("give decoder_input_ids or labels")
      decoder_input_ids = self._shift_right(labels)
    use_cache = self.config.use_cache if use_cache is None else use_cache
    if use_cache and past_key_values is None:
      past_key_values = EncoderDecoderCache(DynamicCache(), DynamicCache())
    if not use_cache:
      past_key_values = None
    hidden = self.decoder(decoder_input_ids, None, memory,
                          _segments(memory, attention_mask, -1),
                          cache=past_key_values,
                          shared=self.shared_embedding())
    logits = self.decoder.to_logits(hidden, self.shared_embedding())
    loss = None
    if labels is not None:
      loss = nn.functional.cross_entropy(
          logits.float().view(-1, logits.shape[-1]), labels.view(-1),
          ignore_index=-100)
    return Seq2SeqLMOutput(loss=loss, logits=logits,
                           past_key_values=past_key_values,
                           encoder_last_hidden_state=memory)

  def _shift_right(self, labels: torch.Tensor) -> torch.Tensor:
    start = torch.full_like(labels[:, :1], self.config.decoder_start_token_id)
    shifted = torch.cat([start, labels[:, :-1]], dim=1)
    return shifted.masked_fill(shifted == -100, self.config.pad_token_id)


class _Encoder(nn.Module):
  """The encoder as generate() calls it: (input_ids, attention_mask)."""

  def __init__(self, model: MtfSynthesizerForConditionalGeneration):
    super().__init__()
    self.model = model
    self.main_input_name = "input_ids"

  def forward(self, input_ids=None, attention_mask=None, **kwargs):
    del kwargs
    segments = _segments(input_ids, attention_mask,
                         self.model.config.pad_token_id)
    hidden = self.model.encoder(input_ids, segments,
                                shared=self.model.shared_embedding())
    return BaseModelOutput(last_hidden_state=hidden)


class MtfSynthesizerForCausalLM(MtfSynthesizerPreTrainedModel,
                               GenerationMixin):
  """A decoder-only language model (mesh's Unitransformer, model_type lm).

  As in mesh, the sequence starts with id 0: give [0] + prompt ids.
  """

  def __init__(self, config: MtfSynthesizerConfig):
    super().__init__(config)
    self.transformer = Stack(config, "transformer", True)
    self.post_init()

  def forward(self,
              input_ids: Optional[torch.LongTensor] = None,
              attention_mask: Optional[torch.Tensor] = None,
              past_key_values: Optional[Cache] = None,
              labels: Optional[torch.LongTensor] = None,
              use_cache: Optional[bool] = None,
              **kwargs) -> CausalLMOutputWithPast:
    """Logits of every position (or of the new ones, with a cache).

    Args:
      input_ids: [batch, t] (the new tokens, when decoding with a cache).
      attention_mask: unused beyond causality (left padding is not
        supported).
      past_key_values: the decoding cache.
      labels: targets aligned with input_ids (shifted inside, as in
        transformers' causal LMs); -100 ignored.
      use_cache: keep and return a cache.
      **kwargs: ignored.

    Returns:
      CausalLMOutputWithPast.
    """
    del attention_mask, kwargs
    use_cache = self.config.use_cache if use_cache is None else use_cache
    if use_cache and past_key_values is None:
      past_key_values = DynamicCache()
    if not use_cache:
      past_key_values = None
    hidden = self.transformer(input_ids, cache=past_key_values)
    logits = self.transformer.to_logits(hidden)
    loss = None
    if labels is not None:
      loss = nn.functional.cross_entropy(
          logits[:, :-1].float().reshape(-1, logits.shape[-1]),
          labels[:, 1:].reshape(-1), ignore_index=-100)
    return CausalLMOutputWithPast(loss=loss, logits=logits,
                                  past_key_values=past_key_values)
