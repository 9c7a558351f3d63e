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
import dataclasses
import difflib
import functools
import importlib.util
import inspect
import numbers
import os
import shutil
import sys
import types
from typing import (Any, Callable, Dict, Mapping, NamedTuple, Optional,
                    Sequence, Tuple)

from transformers import PretrainedConfig

RELATIVE_ATTENTION_TYPES = (None, "bias", "bias_shared")
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


# The synthesizing functions (mesh's names, `mtf_synthesizer.synthesizers`)
# and their settings: the table that the configuration checks names against
# without torch, that the export reads mesh's settings into fields by, and
# that functions_mtf_synthesizer.py implements (one class per name; the dot
# product is the kernel's Q K^T).
FUNCTION_SETTINGS = {
    "dot_product": FunctionSettings(reads_max_length=False),
    "random": FunctionSettings(),
    "fixed_random": FunctionSettings(),
    "factorized_random": FunctionSettings({
        "k": SettingField("factorized_random_k")}),
    "dense": FunctionSettings({
        "hidden_size": SettingField("dense_hidden_size"),
        "use_bias": SettingField("synthesizer_use_bias"),
        "share_query_projection": SettingField(
            "dense_share_query_projection")}),
    "factorized_dense": FunctionSettings({
        "a": SettingField("factorized_dense_factors", 0),
        "b": SettingField("factorized_dense_factors", 1),
        "hidden_size": SettingField("dense_hidden_size"),
        "use_bias": SettingField("synthesizer_use_bias")}),
}


# The source file of each function defined outside this package
# (`register_function`), which a saved model carries (`write_extensions`).
EXTENSION_FILES: Dict[str, str] = {}
EXTENSIONS_FILE = "extensions_mtf_synthesizer.py"


def register_function(name: str, settings: FunctionSettings,
                      source_file: str) -> None:
  """Declares a synthesizing function defined outside this package.

  Its module calls this before it defines its class (a subclass of
  `functions_mtf_synthesizer.MtfSynthesizerFunction` named `name`), and
  imports the model code relatively (`from .functions_mtf_synthesizer
  import ...`), so that it runs beside a saved model's code too. See
  docs/architecture.md, "How to add a synthesizing function".

  Args:
    name: the function's name (mesh's, `synthesizers.BY_NAME`).
    settings: its FunctionSettings row.
    source_file: the module's file (its `__file__`), which
      `write_extensions` copies beside a saved model.

  Raises:
    ValueError: the name is one of this package's functions, or is
      declared already with other settings.
  """
  known = FUNCTION_SETTINGS.get(name)
  if known is not None and (name not in EXTENSION_FILES or
                            known != settings):
    raise ValueError(
        "synthesizing function %r is declared already (%s): an extension "
        "needs a name of its own" % (name, known))
  FUNCTION_SETTINGS[name] = settings
  EXTENSION_FILES[name] = os.path.abspath(source_file)


def load_extension(path: str) -> types.ModuleType:
  """Imports a synthesizing function's module as a module of the model code.

  The file's relative imports (`from .functions_mtf_synthesizer import
  MtfSynthesizerFunction`) then name this package's modules, and defining
  its class registers it: configurations and models built afterwards may
  name the function.

  Args:
    path: the module's file, named `<something>_mtf_synthesizer.py` by
      convention.

  Returns:
    The module (the one imported before, on a second call).
  """
  stem = os.path.splitext(os.path.basename(path))[0]
  name = "%s.%s" % (__package__, stem)
  if name in sys.modules:
    return sys.modules[name]
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  try:
    spec.loader.exec_module(module)
  except BaseException:
    del sys.modules[name]
    raise
  return module


def write_extensions(directory: str, names: Sequence[str]) -> Tuple[str, ...]:
  """Copies the modules of the extensions among `names` beside a model.

  Writes `directory`'s extensions_mtf_synthesizer.py with a relative import
  of each, so that the configuration imports them where the model loads.
  Nothing is written when `names` has none.

  Args:
    directory: a saved or exported model's folder (its model code there).
    names: the synthesizing functions the model uses.

  Returns:
    The modules written, file names without ".py".
  """
  files = sorted({EXTENSION_FILES[n] for n in names if n in EXTENSION_FILES})
  modules = tuple(os.path.splitext(os.path.basename(f))[0] for f in files)
  if not files:
    return modules
  for path in files:
    shutil.copyfile(path, os.path.join(directory, os.path.basename(path)))
  lines = ['"""This model\'s synthesizing functions from outside the '
           'package."""', ""]
  lines += ["from .%s import *  # pylint: disable=wildcard-import" % m
            for m in modules]
  lines += ["", "EXTENSIONS = %r" % (modules,), ""]
  with open(os.path.join(directory, EXTENSIONS_FILE), "w") as f:
    f.write("\n".join(lines))
  return modules


def function_names() -> Tuple[str, ...]:
  """The synthesizing functions the model code implements.

  The names of the mesh package (`mtf_synthesizer.synthesizers.BY_NAME`).

  Returns:
    The names.
  """
  return tuple(FUNCTION_SETTINGS)


# The activations of the feed-forward layer, alone or after "gated-": mesh's
# names and transformers' (ACT2FN) for the same function (mesh's gelu is
# the tanh approximation).
ACTIVATIONS = {"relu": "relu", "gelu": "gelu_pytorch_tanh",
               "gelu_new": "gelu_pytorch_tanh", "silu": "silu",
               "swish": "silu", "linear": "linear"}


def _invalid(field: str, value: Any, valid: str) -> ValueError:
  """The error for a field's value: the field, the value, what is valid."""
  return ValueError("MtfSynthesizerConfig.%s must be %s, got %r" %
                    (field, valid, value))


def _integer(value: Any) -> bool:
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _real(value: Any) -> bool:
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _positive_int(field: str, value: Any) -> int:
  if not _integer(value) or value < 1:
    raise _invalid(field, value, "a positive integer")
  return int(value)


def _optional_positive_int(field: str, value: Any) -> Optional[int]:
  if value is None:
    return None
  if not _integer(value) or value < 1:
    raise _invalid(field, value, "a positive integer or None")
  return int(value)


def _non_negative_int(field: str, value: Any) -> int:
  if not _integer(value) or value < 0:
    raise _invalid(field, value, "an integer >= 0")
  return int(value)


def _boolean(field: str, value: Any) -> bool:
  if not isinstance(value, bool):
    raise _invalid(field, value, "True or False")
  return value


def _positive_float(field: str, value: Any) -> float:
  if not _real(value) or not value > 0:
    raise _invalid(field, value, "a number > 0")
  return float(value)


def _non_negative_float(field: str, value: Any) -> float:
  if not _real(value) or not value >= 0:
    raise _invalid(field, value, "a number >= 0")
  return float(value)


def _probability(field: str, value: Any) -> float:
  if not _real(value) or not 0 <= value < 1:
    raise _invalid(field, value, "a number in [0, 1)")
  return float(value)


def _one_of(*choices: Any) -> Callable[[str, Any], Any]:
  def check(field: str, value: Any) -> Any:
    if not any(value == c and type(value) is type(c) for c in choices):
      raise _invalid(field, value, "one of %r" % (choices,))
    return value
  return check


def _feed_forward(field: str, value: Any) -> str:
  parts = value.split("-") if isinstance(value, str) else []
  if not (len(parts) == 1 or (len(parts) == 2 and parts[0] == "gated")) or (
      parts[-1] not in ACTIVATIONS):
    raise _invalid(field, value, "an activation of %s, or 'gated-' and one" %
                   (tuple(ACTIVATIONS),))
  return value


def _function_names(field: str, value: Any) -> Tuple[str, ...]:
  """A stack's synthesizing functions: a tuple, or a "+"-joined string."""
  names = value.split("+") if isinstance(value, str) else value
  valid = ("distinct names of synthesizing functions among %s (a tuple, or "
           "joined by '+')" % (list(FUNCTION_SETTINGS),))
  try:
    names = tuple(names)
  except TypeError:
    raise _invalid(field, value, valid) from None
  if (not names or len(set(names)) != len(names) or
      any(name not in FUNCTION_SETTINGS for name in names)):
    raise _invalid(field, value, valid)
  return names


def _factors(field: str, value: Any) -> Optional[Tuple[int, int]]:
  """FD's (a, b), or None for the default."""
  if value is None:
    return None
  if (isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or
      len(value) != 2 or not all(_integer(v) and v >= 1 for v in value)):
    raise _invalid(field, value, "two positive integers (a, b) with a * b "
                   "== synthesizer_max_length, or None")
  return tuple(int(v) for v in value)


# Each field's check: it returns the value as stored (a "+"-joined string of
# functions as a tuple) or raises a ValueError naming the field, the value
# and what would be valid. The same rules as mesh's layer for the settings
# the two share (tests/test_config_validation.py compares them).
FIELD_RULES: Dict[str, Callable[[str, Any], Any]] = {
    "vocab_size": _positive_int,
    "d_model": _positive_int,
    "d_kv": _positive_int,
    "d_ff": _positive_int,
    "num_layers": _positive_int,
    "num_decoder_layers": _optional_positive_int,
    "num_heads": _positive_int,
    "relative_attention_num_buckets": _positive_int,
    "relative_attention_max_distance": _positive_int,
    "dropout_rate": _probability,
    "layer_norm_epsilon": _positive_float,
    "initializer_factor": _positive_float,
    "feed_forward_proj": _feed_forward,
    "is_encoder_decoder": _boolean,
    "use_cache": _boolean,
    "tie_word_embeddings": _boolean,
    "encoder_synthesizers": _function_names,
    "decoder_synthesizers": _function_names,
    "synthesizer_max_length": _positive_int,
    "learned_mixture_weights": _boolean,
    "factorized_random_k": _positive_int,
    "factorized_dense_factors": _factors,
    "dense_hidden_size": _optional_positive_int,
    "dense_share_query_projection": _boolean,
    "synthesizer_use_bias": _boolean,
    "relative_attention_type": _one_of(*RELATIVE_ATTENTION_TYPES),
    "num_memory_heads": _non_negative_int,
    "scale_queries": _boolean,
    "shared_embedding": _boolean,
    "max_position_embeddings": _optional_positive_int,
    "z_loss": _non_negative_float,
    "loss_denominator": _one_of("tokens", "positions"),
}


def default_factors(n: int) -> Tuple[int, int]:
  """FD's default (a, b): a the largest divisor of n with a <= sqrt(n).

  mesh's `synthesizers.default_factors`.

  Args:
    n: N, synthesizer_max_length.

  Returns:
    (a, n // a).
  """
  a = max(d for d in range(1, int(n**0.5) + 1) if n % d == 0)
  return a, n // a


@functools.lru_cache(maxsize=None)
def _base_fields() -> frozenset:
  """The fields of transformers' PretrainedConfig (a keyword it knows)."""
  return frozenset(PretrainedConfig().to_dict()) | {
      "architectures", "auto_map", "transformers_version", "model_type",
      "name_or_path", "_name_or_path", "dtype", "torch_dtype",
      "attn_implementation", "_attn_implementation"}


# Fields whose value another field's setting changes (kept together when a
# setting fails).
_DERIVED_FROM = {
    "feed_forward_proj": ("dense_act_fn", "is_gated_act"),
    "synthesizer_max_length": ("factorized_dense_factors",),
}


def _check_keywords(kwargs: Dict[str, Any]) -> None:
  """Raises on a keyword that is no field but close to one (a misspelling).

  Other keywords are transformers' own or a user's extra attribute, which
  PretrainedConfig keeps, as transformers' configurations do.

  Args:
    kwargs: the keywords past MtfSynthesizerConfig's own.

  Raises:
    TypeError: naming the keyword and the closest field.
  """
  fields = list(inspect.signature(MtfSynthesizerConfig.__init__).parameters)
  known = _base_fields() | set(MtfSynthesizerConfig.attribute_map) | {
      "dense_act_fn", "is_gated_act", "num_hidden_layers"}
  for key in kwargs:
    if key in known:
      continue
    close = difflib.get_close_matches(key, fields, n=1, cutoff=0.8)
    if close:
      raise TypeError("MtfSynthesizerConfig got an unknown field %r: did you "
                      "mean %r?" % (key, close[0]))


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
    if "max_length" in kwargs:
      raise ValueError(
          "max_length is generate()'s setting (set it on generation_config); "
          "the size of the synthesizing functions' tables is "
          "synthesizer_max_length")
    _check_keywords(kwargs)
    # Each field through __setattr__, which checks it (FIELD_RULES); the
    # fields that depend on others are checked once all are set.
    self.vocab_size = vocab_size
    self.d_model = d_model
    self.d_kv = d_kv
    self.d_ff = d_ff
    self.num_layers = num_layers
    self.num_decoder_layers = num_decoder_layers
    self.num_heads = num_heads
    self.relative_attention_num_buckets = relative_attention_num_buckets
    self.relative_attention_max_distance = relative_attention_max_distance
    self.dropout_rate = dropout_rate
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_factor = initializer_factor
    self.feed_forward_proj = feed_forward_proj
    self.use_cache = use_cache
    self.encoder_synthesizers = encoder_synthesizers
    self.decoder_synthesizers = decoder_synthesizers
    self.synthesizer_max_length = synthesizer_max_length
    self.learned_mixture_weights = learned_mixture_weights
    self.factorized_random_k = factorized_random_k
    self.factorized_dense_factors = factorized_dense_factors
    self.dense_hidden_size = dense_hidden_size
    self.dense_share_query_projection = dense_share_query_projection
    self.synthesizer_use_bias = synthesizer_use_bias
    self.relative_attention_type = relative_attention_type
    self.num_memory_heads = num_memory_heads
    self.scale_queries = scale_queries
    self.shared_embedding = shared_embedding
    self.max_position_embeddings = max_position_embeddings
    self.z_loss = z_loss
    self.loss_denominator = loss_denominator
    super().__init__(pad_token_id=pad_token_id, eos_token_id=eos_token_id,
                     decoder_start_token_id=decoder_start_token_id,
                     is_encoder_decoder=is_encoder_decoder,
                     tie_word_embeddings=tie_word_embeddings, **kwargs)
    self._check_combination()

  def __setattr__(self, key: str, value: Any) -> None:
    """Sets a field, checked; derived fields follow the field they derive from.

    A field of FIELD_RULES is checked as it is set, on construction and
    afterwards (a loaded config's fields are set this way); the rules
    across fields (FD's factors against N, num_memory_heads against
    num_heads, the relative buckets against their distance) run once every
    field has a value. A value that fails leaves the config as it was.

    Args:
      key: the field (or an alias of `attribute_map`).
      value: its value.

    Raises:
      ValueError: naming the field, the value and what would be valid.
    """
    key = type(self).attribute_map.get(key, key)
    rule = FIELD_RULES.get(key)
    if rule is None:
      super().__setattr__(key, value)
      return
    value = rule(key, value)
    fields = self.__dict__
    previous = {k: fields[k] for k in _DERIVED_FROM.get(key, ()) + (key,)
                if k in fields}
    derived = False
    try:
      if key == "feed_forward_proj":
        parts = value.split("-")
        super().__setattr__("dense_act_fn", parts[-1])
        super().__setattr__("is_gated_act", len(parts) == 2)
      elif key == "num_decoder_layers" and value is None:
        value = fields.get("num_layers")  # the decoder as deep as the encoder
      elif key == "factorized_dense_factors" and value is None:
        value = default_factors(fields.get("synthesizer_max_length", 1))
        derived = True
      elif key == "synthesizer_max_length" and "synthesizer_max_length" in (
          fields):
        # FD's default factors follow N; factors chosen by hand are checked.
        factors = fields.get("factorized_dense_factors")
        if factors == default_factors(fields["synthesizer_max_length"]):
          super().__setattr__("factorized_dense_factors",
                              default_factors(value))
          derived = True
      super().__setattr__(key, value)
      if derived:
        self._check_default_split()
      if all(k in fields for k in FIELD_RULES):
        self._check_combination()
    except ValueError:
      for k in _DERIVED_FROM.get(key, ()) + (key,):
        if k in previous:
          super().__setattr__(k, previous[k])
        else:
          fields.pop(k, None)
      raise

  def _check_default_split(self) -> None:
    """FD's default factors of a prime N would make it Dense: raises.

    mesh's rule (`FactorizedDense.factor_sizes`): the default split needs
    a composite N; factors (1, N) given explicitly are allowed.
    """
    functions = (self.__dict__.get("encoder_synthesizers", ()) +
                 self.__dict__.get("decoder_synthesizers", ()))
    n = self.synthesizer_max_length
    if ("factorized_dense" in functions and
        self.factorized_dense_factors[0] == 1):
      raise ValueError(
          "MtfSynthesizerConfig.synthesizer_max_length=%d has no split a * b "
          "with a, b > 1 (%s), so factorized_dense (FD) would be Dense: "
          "choose a composite synthesizer_max_length, or give "
          "factorized_dense_factors=(1, %d) explicitly" % (
              n, "it is prime" if n > 1 else "it is 1", n))

  def _check_combination(self) -> None:
    """The rules across fields; raises ValueError naming the fields."""
    n = self.synthesizer_max_length
    functions = self.encoder_synthesizers + self.decoder_synthesizers
    if "factorized_dense" in functions:
      a, b = self.factorized_dense_factors
      if a * b != n:
        raise ValueError(
            "MtfSynthesizerConfig.factorized_dense_factors (a, b) need a * b "
            "== synthesizer_max_length (%d), got %r: set both in one call "
            "(MtfSynthesizerConfig(..., synthesizer_max_length=N, "
            "factorized_dense_factors=(a, b))), or set the factors to None "
            "for the default split of N" % (n, (a, b)))
    if self.num_memory_heads not in (0, 1, self.num_heads):
      raise ValueError(
          "MtfSynthesizerConfig.num_memory_heads must be 0, 1 or num_heads "
          "(%d), got %r" % (self.num_heads, self.num_memory_heads))
    if self.relative_attention_type is not None:
      buckets = self.relative_attention_num_buckets
      distance = self.relative_attention_max_distance
      if buckets < 4 or distance <= buckets // 2:
        raise ValueError(
            "MtfSynthesizerConfig.relative_attention_num_buckets must be >= 4 "
            "and relative_attention_max_distance > num_buckets // 2 (T5's "
            "buckets: half of them exact distances), got %d and %d" % (
                buckets, distance))

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
      **kwargs: PretrainedConfig.get_config_dict's.

    Returns:
      (the fields, the unused keywords).

    Raises:
      ValueError: config.json names another model_type.
    """
    config_dict, kwargs = super().get_config_dict(
        pretrained_model_name_or_path, **kwargs)
    model_type = config_dict.get("model_type")
    if model_type is not None and model_type != cls.model_type:
      hint = ("; convert a T5 with MtfSynthesizerForConditionalGeneration."
              "from_t5(%r) or the mtf-synthesizer-from-t5 command" %
              str(pretrained_model_name_or_path)
              if model_type in T5_MODEL_TYPES else "")
      raise ValueError("%s holds a model of type %r, not %r%s" % (
          pretrained_model_name_or_path, model_type, cls.model_type, hint))
    return config_dict, kwargs

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

  @property
  def num_hidden_layers(self) -> int:
    """The blocks of the stack that decodes: what transformers' caches hold.

    An encoder-decoder's decoder has `num_decoder_layers`; a causal LM's
    one stack `num_layers`. Setting it sets `num_layers` (T5Config's
    alias).
    """
    if self.is_encoder_decoder:
      return self.num_decoder_layers
    return self.num_layers

  @num_hidden_layers.setter
  def num_hidden_layers(self, value: int) -> None:
    self.num_layers = value

  def get_text_config(self, decoder: Optional[bool] = None,
                      encoder: Optional[bool] = None) -> PretrainedConfig:
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


# A model saved from Python carries its code beside its weights (config.json's
# auto_map names the classes), so that it loads with trust_remote_code=True
# where this package is not installed.
MtfSynthesizerConfig.register_for_auto_class()

# Functions from outside the package that this copy of the model code
# carries (none in the package itself): imported last, as they import this
# module's names; not where this file is loaded alone, without its folder.
if __package__:
  # pylint: disable-next=g-import-not-at-top,unused-import
  from .extensions_mtf_synthesizer import EXTENSIONS  # noqa: E402,F401
