# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The configuration of a Synthesizer T5 in PyTorch.

Written as transformers 5 writes `T5Config`: a `@strict` dataclass whose
fields are typed class attributes, each declared once with its default and
a line saying what it is, checked at construction, on assignment and on
`from_pretrained`. Fields that mean what they mean in `T5Config` have its
names (`d_model`, `d_kv`, `num_heads`, `num_layers`, `feed_forward_proj`,
...), and it accepts every keyword and attribute a transformers
configuration takes. The Synthesizer's own fields say which synthesizing
functions each stack's self-attention composes (Tay et al., Table 1) and
their sizes; mesh's layout options (a relative position bias per layer,
multi-query attention, queries scaled at run time, learned absolute
positions) are fields too, so that `mtf_synthesizer.export` can describe any
model the stock CLI trains.
"""

import copy
import dataclasses
from typing import (Any, Callable, Dict, Literal, Mapping, NamedTuple,
                    Optional, Sequence, Tuple)

from huggingface_hub.dataclasses import strict
from huggingface_hub.dataclasses import validated_field
from transformers import PreTrainedConfig
from transformers.utils import logging

# The functions' declarations (the package's `synthesizing_functions`, of
# which this folder's file is a link, and a saved model's folder a copy).
# pylint: disable=relative-beyond-top-level
from .synthesizing_functions_mtf_synthesizer import default_factors
from .synthesizing_functions_mtf_synthesizer import field_defaults
from .synthesizing_functions_mtf_synthesizer import Function
from .synthesizing_functions_mtf_synthesizer import FUNCTIONS as DECLARED
from .synthesizing_functions_mtf_synthesizer import PACKAGE_FUNCTIONS
from .synthesizing_functions_mtf_synthesizer import register
from .synthesizing_functions_mtf_synthesizer import VANILLA
# pylint: enable=relative-beyond-top-level

logger = logging.get_logger(__name__)

# transformers' model types of T5's family and layout, which `from_t5`
# converts (ByT5 and FLAN-T5 are "t5").
T5_MODEL_TYPES = ("t5", "mt5")


class SettingField(NamedTuple):
  """The configuration field that a setting of mesh's export fills.

  Attributes:
    field: the field of MtfSynthesizerConfig.
    item: the item of the field the setting is (FD's a and b: items 0 and
      1 of `factorized_dense_factors`), or None: the whole field.
  """
  field: str
  item: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class FunctionSettings:
  """A synthesizing function's settings: mesh's and the configuration's.

  Attributes:
    mesh_settings: each setting of the function's `export_settings()` in
      mesh (`mtf_synthesizer.synthesizers`) -> the field it fills.
    reads_max_length: the function holds a table of
      `synthesizer_max_length` positions (all of them but the dot product).
  """
  mesh_settings: Mapping[str, SettingField] = dataclasses.field(
      default_factory=dict)
  reads_max_length: bool = True

  @property
  def fields(self) -> Tuple[str, ...]:
    """The configuration fields the function reads, each once."""
    fields = ("synthesizer_max_length",) if self.reads_max_length else ()
    for setting in self.mesh_settings.values():
      if setting.field not in fields:
        fields += (setting.field,)
    return fields


def function_settings(function: Function) -> FunctionSettings:
  """A function's row of FUNCTION_SETTINGS, from its declaration.

  Args:
    function: its declaration (`synthesizing_functions_mtf_synthesizer`).

  Returns:
    The field each of its settings fills (those of mesh's initializer fill
    none: the weights carry them), and whether it reads
    `synthesizer_max_length`.
  """
  return FunctionSettings(
      {s.name: SettingField(s.field, s.item) for s in function.settings
       if s.field is not None}, function.reads_max_length)


# The synthesizing functions (mesh's names, `mtf_synthesizer.synthesizers`)
# and their settings, read from their declarations: the table that the
# configuration checks names against without torch, that the export reads
# mesh's settings into fields by, and that functions_mtf_synthesizer.py
# implements (one class per name; the dot product is the kernel's Q K^T).
FUNCTION_SETTINGS = {name: function_settings(DECLARED[name])
                     for name in PACKAGE_FUNCTIONS}

# Each field's default, the declared default of the settings that fill it.
_DEFAULTS = field_defaults({name: DECLARED[name]
                            for name in PACKAGE_FUNCTIONS})


def register_function(function: Function) -> None:
  """Declares a synthesizing function defined outside this package.

  Its module calls this before it defines its class (a subclass of
  `functions_mtf_synthesizer.MtfSynthesizerFunction` named as the
  function), and imports the model code relatively (`from
  .functions_mtf_synthesizer import ...`), so that it runs beside a saved
  model's code too. See docs/architecture.md, "How to add a synthesizing
  function".

  Args:
    function: its declaration (a `synthesizing_functions.Function`, e.g.
      a function's of the package `renamed`), whose settings fill fields
      of the configuration.

  Raises:
    ValueError: the name is one of this package's functions, or is
      declared already otherwise; a setting fills no field there is.
  """
  for setting in function.settings:
    if setting.field is not None and (
        setting.field not in MtfSynthesizerConfig.__annotations__):
      raise ValueError("%s.%s fills %r, which is not a field of "
                       "MtfSynthesizerConfig" % (function.name, setting.name,
                                                 setting.field))
  known = FUNCTION_SETTINGS.get(function.name)
  if known is not None and function.name in PACKAGE_FUNCTIONS:
    raise ValueError(
        "synthesizing function %r is declared already (%s): an extension "
        "needs a name of its own" % (function.name, known))
  register(function)
  FUNCTION_SETTINGS[function.name] = function_settings(function)


# The activations of the feed-forward layer, alone or after "gated-": mesh's
# names and transformers' (ACT2FN) for the same function (mesh's gelu is
# the tanh approximation).
ACTIVATIONS = {"relu": "relu", "gelu": "gelu_pytorch_tanh",
               "gelu_new": "gelu_pytorch_tanh", "silu": "silu",
               "swish": "silu", "linear": "linear"}


# Each field's check beyond its type (the type annotation's check runs
# first): it raises a ValueError saying what is valid and the value; the
# strict dataclass names the field. The same rules as mesh's layer for the
# settings the two share (tests/test_bad_input.py compares them).


def _check(valid: str, holds: Callable[[Any], bool]) -> Callable[[Any], None]:
  def check(value: Any) -> None:
    if not holds(value):
      raise ValueError("must be %s, got %r" % (valid, value))
  return check


_positive = _check("a positive integer", lambda v: v >= 1)
_positive_or_none = _check("a positive integer or None",
                           lambda v: v is None or v >= 1)
_non_negative = _check("an integer >= 0", lambda v: v >= 0)
_positive_number = _check("a number > 0", lambda v: v > 0)
_non_negative_number = _check("a number >= 0", lambda v: v >= 0)
_probability = _check("a number in [0, 1)", lambda v: 0 <= v < 1)


def _split_functions(value: Any) -> Any:
  """A stack's functions as a tuple (from a "+"-joined string or a list)."""
  if isinstance(value, str):
    return tuple(value.split("+"))
  return tuple(value) if isinstance(value, list) else value


def _functions(value: Any) -> None:
  names = _split_functions(value)
  if (not names or len(set(names)) != len(names) or
      any(name not in FUNCTION_SETTINGS for name in names)):
    raise ValueError(
        "must be distinct names of synthesizing functions among %s (a "
        "tuple, or joined by '+'), got %r" % (list(FUNCTION_SETTINGS), value))


def _factors(value: Any) -> None:
  if value is not None and (len(value) != 2 or any(
      isinstance(v, bool) or v < 1 for v in value)):
    raise ValueError("must be two positive integers (a, b) with a * b == "
                     "synthesizer_max_length, or None, got %r" % (value,))


def _feed_forward(value: str) -> None:
  parts = value.split("-")
  if not (len(parts) == 1 or (len(parts) == 2 and parts[0] == "gated")) or (
      parts[-1] not in ACTIVATIONS):
    raise ValueError("must be an activation of %s, or 'gated-' and one, got "
                     "%r" % (tuple(ACTIVATIONS), value))


def _field(check: Callable[[Any], None], default: Any) -> Any:
  return validated_field(check, default=default)


@strict
class MtfSynthesizerConfig(PreTrainedConfig):
  """A T5 whose self-attention composes synthesizing functions.

  The defaults are T5.1.1-small's sizes with mesh's dot-product attention
  (V); `encoder_synthesizers=("random",)`, for example, makes the Random
  Synthesizer (R) and `("dense", "dot_product")` the mixture D+V. Each
  field's line below says what it is.
  """
  model_type = "mtf_synthesizer"
  keys_to_ignore_at_inference = ["past_key_values"]
  attribute_map = {"hidden_size": "d_model",
                   "num_attention_heads": "num_heads",
                   "head_dim": "d_kv"}

  # T5Config's fields (T5.1.1-small's sizes, mesh's defaults).
  vocab_size: int = _field(_positive, 32128)
  """Rows of the (padded) vocabulary."""
  d_model: int = _field(_positive, 512)
  """The model width."""
  d_kv: int = _field(_positive, 64)
  """Width of a head's queries, keys and values."""
  d_ff: int = _field(_positive, 1024)
  """Width of the feed-forward layers."""
  num_layers: int = _field(_positive, 8)
  """Blocks of the encoder (of a causal LM's one stack)."""
  num_decoder_layers: int | None = _field(_positive_or_none, None)
  """Blocks of the decoder; None: num_layers."""
  num_heads: int = _field(_positive, 6)
  """Attention heads."""
  relative_attention_num_buckets: int = _field(_positive, 32)
  """T5's relative position buckets."""
  relative_attention_max_distance: int = _field(_positive, 128)
  """Distances from here on share a bucket."""
  dropout_rate: float | int = _field(_probability, 0.1)
  """mesh's dropout: embeddings, layer outputs, attention weights, the
  feed-forward hidden layer, the stack's output."""
  layer_norm_epsilon: float | int = _field(_positive_number, 1e-6)
  """Epsilon of the RMS norm."""
  initializer_factor: float | int = _field(_positive_number, 1.0)
  """Multiplies every initializer's scale (T5's)."""
  feed_forward_proj: str = _field(_feed_forward, "gated-gelu")
  """An activation ("relu": T5.1.0), "gated-" for mesh's two input kernels
  ("gated-gelu": T5.1.1)."""
  is_encoder_decoder: bool = True
  """An encoder-decoder, else a causal LM of one stack."""
  use_cache: bool = True
  """Keep keys and values while decoding."""
  pad_token_id: int | None = 0
  """Padding id (marks the inputs' padding when no mask is given)."""
  eos_token_id: int | list[int] | None = 1
  """End of sequence."""
  decoder_start_token_id: int | None = 0
  """The first decoder input."""
  tie_word_embeddings: bool = False
  """The output layer is the embedding, scaled by d_model**-0.5 (mesh,
  T5.1.0); else its own weights."""

  # The Synthesizer's own fields.
  encoder_synthesizers: str | Sequence[str] = _field(
      _functions, (VANILLA,))
  """The encoder's synthesizing functions (the causal LM reads
  decoder_synthesizers), a tuple or "+"-joined; several make a mixture
  (eq. 8)."""
  decoder_synthesizers: str | Sequence[str] = _field(
      _functions, (VANILLA,))
  """The decoder's synthesizing functions."""
  synthesizer_max_length: int = _field(_positive, 512)
  """N, the positions of R, FR, D and FD's tables: the longest sequence a
  stack with them reads (mesh's SynthesizerAttention.max_length)."""
  learned_mixture_weights: bool = True
  """A mixture learns its weights alpha (softmax over functions, per head);
  else each function weighs 1."""
  # The functions' settings: their defaults are the declarations'.
  factorized_random_k: int = _field(_positive,
                                    _DEFAULTS["factorized_random_k"])
  """FR's rank k (eq. 7)."""
  factorized_dense_factors: Sequence[int] | None = _field(
      _factors, _DEFAULTS["factorized_dense_factors"])
  """FD's (a, b), a * b = N; None: the largest divisor a <= sqrt(N)."""
  dense_hidden_size: int | None = _field(_positive_or_none,
                                         _DEFAULTS["dense_hidden_size"])
  """Per-head hidden width of D's and FD's first layer; None: d_kv."""
  dense_share_query_projection: bool = _DEFAULTS[
      "dense_share_query_projection"]
  """D's first layer is the query projection (the original release's dense
  modes)."""
  synthesizer_use_bias: bool = _DEFAULTS["synthesizer_use_bias"]
  """D and FD have biases b1, b2."""
  relative_attention_type: Literal["bias", "bias_shared"] | None = (
      "bias_shared")
  """"bias_shared" (one table per stack, T5), "bias" (one per layer) or
  None."""
  num_memory_heads: int = _field(_non_negative, 0)
  """Heads of keys and values: 0 as many as num_heads, 1 multi-query."""
  scale_queries: bool = False
  """Scale queries by d_kv**-0.5 at run time (mesh's
  fold_scaling_into_initializer=False); else in the query initializer."""
  shared_embedding: bool = True
  """The encoder and decoder read one embedding."""
  max_position_embeddings: int | None = _field(_positive_or_none, None)
  """Rows of a learned absolute position table added to the embeddings
  (mesh's positional_embedding), or None."""
  z_loss: float | int = _field(_non_negative_number, 1e-4)
  """mesh's auxiliary loss z_loss * log(Z)^2 per token, in training only."""
  loss_denominator: Literal["tokens", "positions"] = "tokens"
  """"tokens": the mean over target tokens (transformers'); "positions":
  their sum over batch x target length (mesh's)."""

  def __post_init__(self, **kwargs):
    if "max_length" in kwargs:
      logger.warning(
          "max_length is generate()'s setting (set it on generation_config) "
          "and is dropped here; the size of the synthesizing functions' "
          "tables is synthesizer_max_length")
    if "num_hidden_layers" in kwargs:  # T5Config's alias of num_layers
      self.num_layers = kwargs.pop("num_hidden_layers")
    if self.num_decoder_layers is None:
      self.num_decoder_layers = self.num_layers
    if self.factorized_dense_factors is None:
      self._set_default_factors(self.synthesizer_max_length)
    self._set_activation()
    super().__post_init__(**kwargs)

  def __setattr__(self, key: str, value: Any) -> None:
    """Sets a field (checked by its type and rule), then the rules across
    fields; derived fields follow the field they derive from. A value that
    fails leaves the config as it was."""
    key = self.attribute_map.get(key, key)
    if key in ("encoder_synthesizers", "decoder_synthesizers"):
      value = _split_functions(value)
    elif key == "factorized_dense_factors" and value is not None:
      value = tuple(value)
    fields = self.__dict__
    # The rules across fields read this class's fields only: transformers'
    # own are set as PreTrainedConfig sets them.
    if not fields.get("_post_init_done") or (
        key not in MtfSynthesizerConfig.__annotations__):
      super().__setattr__(key, value)
      return
    before = dict(fields)
    try:
      if key == "synthesizer_max_length" and (
          self.factorized_dense_factors == default_factors(
              self.synthesizer_max_length)):
        self._set_default_factors(value)  # default factors follow N
      super().__setattr__(key, value)
      if key == "num_decoder_layers" and value is None:
        super().__setattr__(key, self.num_layers)
      elif key == "factorized_dense_factors" and value is None:
        self._set_default_factors(self.synthesizer_max_length)
      elif key == "feed_forward_proj":
        self._set_activation()
      self.validate()
    except BaseException:
      fields.clear()
      fields.update(before)
      raise

  def _set_activation(self) -> None:
    parts = self.feed_forward_proj.split("-")
    super().__setattr__("dense_act_fn", parts[-1])
    super().__setattr__("is_gated_act", len(parts) == 2)

  def _set_default_factors(self, n: int) -> None:
    """FD's default split of N; a prime N (a split 1 x N) raises.

    mesh's rule (`FactorizedDense.factor_sizes`): the default split needs
    a composite N; factors (1, N) given explicitly are allowed.
    """
    factors = default_factors(n)
    if factors[0] == 1 and self._reads_factors():
      raise ValueError(
          "MtfSynthesizerConfig.synthesizer_max_length=%d has no split a * b "
          "with a, b > 1 (%s), so factorized_dense (FD) would be Dense: "
          "choose a composite synthesizer_max_length, or give "
          "factorized_dense_factors=(1, %d) explicitly" % (
              n, "it is prime" if n > 1 else "it is 1", n))
    super().__setattr__("factorized_dense_factors", factors)

  def _reads_factors(self) -> bool:
    """A function of the stacks reads `factorized_dense_factors` (FD)."""
    return any(s.field == "factorized_dense_factors"
               for name in self.encoder_synthesizers + self.decoder_synthesizers
               for s in DECLARED[name].settings)

  def validate_factorized_dense(self) -> None:
    """FD's factors multiply to N."""
    if self._reads_factors():
      a, b = self.factorized_dense_factors
      if a * b != self.synthesizer_max_length:
        raise ValueError(
            "MtfSynthesizerConfig.factorized_dense_factors (a, b) need a * b "
            "== synthesizer_max_length (%d), got %r: set both in one call "
            "(MtfSynthesizerConfig(..., synthesizer_max_length=N, "
            "factorized_dense_factors=(a, b))), or set the factors to None "
            "for the default split of N" % (
                self.synthesizer_max_length, (a, b)))

  def validate_memory_heads(self) -> None:
    """Keys and values have as many heads as queries, or one."""
    if self.num_memory_heads not in (0, 1, self.num_heads):
      raise ValueError(
          "MtfSynthesizerConfig.num_memory_heads must be 0, 1 or num_heads "
          "(%d), got %r" % (self.num_heads, self.num_memory_heads))

  def validate_relative_buckets(self) -> None:
    """T5's buckets: half of them exact distances."""
    buckets = self.relative_attention_num_buckets
    distance = self.relative_attention_max_distance
    if self.relative_attention_type is not None and (
        buckets < 4 or distance <= buckets // 2):
      raise ValueError(
          "MtfSynthesizerConfig.relative_attention_num_buckets must be >= 4 "
          "and relative_attention_max_distance > num_buckets // 2, got %d "
          "and %d" % (buckets, distance))

  @classmethod
  def get_config_dict(cls, pretrained_model_name_or_path: Any,
                      **kwargs) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """config.json's fields; a directory of another model type raises.

    transformers would read a T5's config.json as this class's with a
    warning, keep the fields the two share and drop the rest (its
    activation, its untied output layer...): a model that loads without a
    missing weight and computes something else.

    Args:
      pretrained_model_name_or_path: a directory or Hub name.
      **kwargs: PreTrainedConfig.get_config_dict's.

    Returns:
      (the fields, the unused keywords).

    Raises:
      ValueError: config.json names another model_type.
    """
    config_dict, kwargs = super().get_config_dict(
        pretrained_model_name_or_path, **kwargs)
    model_type = config_dict.get("model_type")
    if model_type is not None and model_type != cls.model_type:
      hint = ("; convert a T5 with mtf_synthesizer.hf_tools.t5_conversion."
              "from_t5(%r) or the mtf-synthesizer-from-t5 command" %
              str(pretrained_model_name_or_path)
              if model_type in T5_MODEL_TYPES else "")
      raise ValueError("%s holds a model of type %r, not %r%s" % (
          pretrained_model_name_or_path, model_type, cls.model_type, hint))
    return config_dict, kwargs

  @property
  def num_hidden_layers(self) -> int:
    """The blocks of the stack that decodes: what transformers' caches hold.

    An encoder-decoder's decoder has `num_decoder_layers`; a causal LM's
    one stack `num_layers`. Given to the constructor it is T5Config's
    alias of `num_layers` (the decoder has as many unless
    `num_decoder_layers` is given); set afterwards, every stack gets that
    many blocks. Either way it reads back what was given, and
    `get_text_config(encoder=True)` reads the encoder's blocks.
    """
    if self.is_encoder_decoder:
      return self.num_decoder_layers
    return self.num_layers

  @num_hidden_layers.setter
  def num_hidden_layers(self, value: int) -> None:
    self.num_layers = value
    if self.is_encoder_decoder:
      self.num_decoder_layers = value

  def get_text_config(self, decoder: Optional[bool] = None,
                      encoder: Optional[bool] = None) -> PreTrainedConfig:
    """The config of one end of the model: this config, not a copy.

    transformers copies a flat encoder-decoder's config for one end;
    settings made through the decoder's (generation sets `eos_token_id`
    there) would then not reach the model. Its caches are sized by the
    decoder's blocks (`num_hidden_layers`). The encoder's end alone is a
    copy whose `num_hidden_layers` are the encoder's blocks.

    Args:
      decoder: the decoder's end.
      encoder: the encoder's end.

    Returns:
      This config (a copy for the encoder's end alone).
    """
    if encoder and not decoder and self.is_encoder_decoder:
      config = copy.deepcopy(self)
      config.num_decoder_layers = config.num_layers
      return config
    return self


# Functions from outside the package that this copy of the model code
# carries (none in the package itself): imported last, as they import this
# module's names; not where this file is loaded alone, without its folder.
if __package__:
  # pylint: disable-next=g-import-not-at-top,unused-import
  from .extensions_mtf_synthesizer import EXTENSIONS  # noqa: E402,F401
