# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every name the PyTorch model's configuration accepts reads back its value.

The names are enumerated from the classes, not listed by hand: the
dataclass fields of `MtfSynthesizerConfig` and of transformers' `T5Config`
(whatever T5Config accepts, this configuration accepts), the aliases of
both `attribute_map`s (`hidden_size`, `num_hidden_layers`, ...) and every
property with a setter (transformers' own, `torch_dtype`, `num_labels`,
..., and the configuration's). A value of each name's type that differs
from the defaults is given four ways: to the constructor, by `setattr`,
through `to_dict`/`from_dict` and through `save_pretrained`/
`from_pretrained`; each must read back what was given. For a name that
transformers' configurations share, transformers' `T5Config` is the
reference: wherever it reads a value back, this configuration must too
(transformers keeps some of its own names out of `to_dict` by design:
the attention kernel, the output flags' private copies).

`num_hidden_layers` means two things for an encoder-decoder: the blocks
of a stack, and what transformers' caches read (the decoder's blocks).
Set, it reads back, with the encoder's and decoder's depths different
too, and caches and `generate()` follow the decoder's depth.
"""

import dataclasses
import inspect
import json
import typing
from typing import Any, Dict, List, Optional, Tuple

import pytest
import torch
import transformers

import tiny_models
from mtf_synthesizer.hf_model import configuration_mtf_synthesizer
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling

Config = configuration_mtf_synthesizer.MtfSynthesizerConfig
T5Config = transformers.T5Config
ROUTES = ("constructor", "setattr", "from_dict", "from_pretrained")
# Attributes the configuration derives from a field (T5Config's too), as a
# field's setter keeps them: they follow feed_forward_proj
# (`test_derived_attributes_follow_their_field`).
DERIVED = {"dense_act_fn": "feed_forward_proj",
           "is_gated_act": "feed_forward_proj"}
pytestmark = pytest.mark.usefixtures("one_thread")


def _settable_properties(config_class: type) -> List[str]:
  """The properties of a configuration class (and its bases) with a setter."""
  return sorted(name for name, value in inspect.getmembers(config_class)
                if isinstance(value, property) and value.fset is not None)


def _field_types(config_class: type) -> Dict[str, Any]:
  """Each dataclass field's type annotation, resolved."""
  hints = {}
  for klass in reversed(config_class.__mro__):
    try:  # transformers names torch in its annotations
      hints.update(typing.get_type_hints(klass, localns={"torch": torch}))
    except (NameError, TypeError):
      continue
  return {f.name: hints.get(f.name, f.type)
          for f in dataclasses.fields(config_class)}


def names() -> List[str]:
  """Every name the configuration accepts, from the classes themselves."""
  found = set(_field_types(Config)) | set(_field_types(T5Config))
  found |= set(Config.attribute_map) | set(T5Config.attribute_map)
  found |= set(_settable_properties(Config))
  found |= set(_settable_properties(T5Config))
  return sorted(found)


def _default(config_class: type, name: str) -> Any:
  try:
    return getattr(config_class(), name)
  except AttributeError:
    return None


def _kinds(annotation: Any) -> Tuple[Any, ...]:
  """The alternatives of a type annotation (a Union's members, or itself)."""
  origin = typing.get_origin(annotation)
  if origin is typing.Union or type(annotation).__name__ == "UnionType":
    kinds = [a for arg in typing.get_args(annotation) for a in _kinds(arg)]
    # A string last: where a sequence is also valid, it is the plain form.
    return tuple(sorted(kinds, key=lambda kind: kind is str))
  return (annotation,)


def _candidates(annotation: Any, default: Any) -> List[Any]:
  """Values of a type, the more ordinary first (the caller keeps the first
  that both configurations' rules accept and that differs from defaults)."""
  if annotation is None:  # a setter without annotations: plain values,
    # and a dict of the one such setter that takes one (rope_scaling)
    return [True, 2, 0.5, "a name", torch.bfloat16,
            {"rope_type": "default", "rope_theta": 10000.0}]
  values = []
  for kind in _kinds(annotation):
    origin = typing.get_origin(kind)
    if kind is bool:
      values += [not default if isinstance(default, bool) else True, False]
    elif kind is int:
      base = default if isinstance(default, int) and not isinstance(
          default, bool) else 1
      values += [base + 1, 2 * base, 1, 3]
    elif kind is float:
      base = default if isinstance(default, (int, float)) and not isinstance(
          default, bool) else 0.5
      values += [base / 2, 0.25, 0.05]
    elif kind is str:
      values += ["relu", "eager", "a name"]
    elif origin is typing.Literal:
      values += [v for v in typing.get_args(kind) if v != default]
    elif origin in (list, typing.List) or (
        origin is not None and origin.__name__ == "Sequence"):
      (item,) = typing.get_args(kind) or (int,)
      values += [("random", "dot_product"), ["random"]] if item is str else [
          (32, 16), [4, 128]]
    elif origin is dict:
      key, item = typing.get_args(kind)
      values.append({(i if key is int else str(i)):
                     (i if item is int else "LABEL_%d" % i)
                     for i in range(3)})
    elif kind is torch.dtype:
      values.append(torch.bfloat16)
    elif kind is type(None):
      values.append(None)
  return values


def _annotation(name: str) -> Any:
  """The type of a name: its field's, or the field its alias names."""
  for config_class in (Config, T5Config):
    types = _field_types(config_class)
    target = config_class.attribute_map.get(name, name)
    if target in types:
      return types[target]
  for config_class in (Config, T5Config):
    setter = getattr(getattr(config_class, name, None), "fset", None)
    if setter is not None:
      hints = typing.get_type_hints(setter)
      hints.pop("return", None)
      if hints:
        return next(iter(hints.values()))
  return None


def _same(read: Any, given: Any) -> bool:
  if isinstance(given, (list, tuple)) and isinstance(read, (list, tuple)):
    return list(read) == list(given)
  return read == given and type(read) is type(given) or (
      isinstance(given, float) and read == given)


def _route(config_class: type, route: str, name: str, value: Any,
           tmp_path) -> Any:
  """What `name` reads after being given `value` by one route."""
  if route == "setattr":
    config = config_class()
    setattr(config, name, value)
    return getattr(config, name)
  config = config_class(**{name: value})
  if route == "constructor":
    return getattr(config, name)
  if route == "from_dict":
    return getattr(config_class.from_dict(
        json.loads(json.dumps(config.to_dict(), default=str))), name)
  directory = tmp_path / ("%s_%s" % (config_class.__name__, name))
  config.save_pretrained(directory)
  return getattr(config_class.from_pretrained(directory), name)


def _reads_back(config_class: type, route: str, name: str, value: Any,
                tmp_path) -> Optional[bool]:
  """Whether the route reads back `value`; None where the value is refused."""
  try:
    return _same(_route(config_class, route, name, value, tmp_path), value)
  except (ValueError, TypeError, AttributeError, KeyError):
    return None


def _value(name: str) -> Any:
  """A value of the name's type that differs from the configuration's
  default and that the configuration accepts."""
  default = _default(Config, name)
  for value in _candidates(_annotation(name), default):
    if _same(default, value):
      continue
    try:
      Config(**{name: value})
    except Exception:  # pylint: disable=broad-except
      continue
    return value
  raise AssertionError("no value found for %r" % name)


def _is_transformers_name(name: str) -> bool:
  """A name of transformers' T5Config or base configuration."""
  return name in set(_field_types(T5Config)) | set(
      T5Config.attribute_map) | set(_settable_properties(T5Config))


NAMES = [n for n in names() if n not in DERIVED]


def test_the_enumeration_finds_each_kind_of_name():
  """The enumeration is not empty where it reads the classes."""
  found = set(names())
  for name in ("synthesizer_max_length", "d_model", "num_hidden_layers",
               "hidden_size", "torch_dtype", "classifier_dropout",
               "num_labels"):
    assert name in found, name
  assert set(DERIVED) <= set(Config().to_dict())


@pytest.mark.parametrize("name", NAMES)
def test_a_name_reads_back_what_was_given(name, tmp_path):
  value = _value(name)
  failures = []
  for route in ROUTES:
    ours = _reads_back(Config, route, name, value, tmp_path)
    if _is_transformers_name(name):
      t5 = _reads_back(T5Config, route, name, value, tmp_path)
      if t5 is not None and ours is None:
        failures.append("%s refuses what T5Config accepts" % route)
      elif t5 and not ours:
        failures.append("%s does not read back (T5Config does)" % route)
    elif not ours:
      failures.append("%s %s" % (route, "refuses it" if ours is None
                                 else "does not read it back"))
  assert not failures, (name, value, failures)


def test_derived_attributes_follow_their_field():
  config = Config(feed_forward_proj="relu")
  assert (config.dense_act_fn, config.is_gated_act) == ("relu", False)
  config.feed_forward_proj = "gated-silu"
  assert (config.dense_act_fn, config.is_gated_act) == ("silu", True)
  reloaded = Config.from_dict(config.to_dict())
  assert (reloaded.dense_act_fn, reloaded.is_gated_act) == ("silu", True)


# ---------------------------------------------------------------------------
# num_hidden_layers: a stack's blocks, and the decoder's for the caches.


def test_num_hidden_layers_gives_every_stack_its_depth():
  config = Config(num_hidden_layers=3)
  assert (config.num_layers, config.num_decoder_layers,
          config.num_hidden_layers) == (3, 3, 3)
  config.num_hidden_layers = 4
  assert (config.num_layers, config.num_decoder_layers,
          config.num_hidden_layers) == (4, 4, 4)
  causal = Config(is_encoder_decoder=False, num_hidden_layers=5)
  assert (causal.num_layers, causal.num_hidden_layers) == (5, 5)


@pytest.mark.parametrize("depths", [(2, 3), (3, 1)], ids=["deeper_decoder",
                                                          "deeper_encoder"])
def test_the_caches_read_the_decoders_depth(depths):
  encoder, decoder = depths
  config = tiny_models.config(("dense", "dot_product"), modeling=modeling,
                              num_layers=encoder, num_decoder_layers=decoder)
  assert config.num_hidden_layers == decoder
  assert config.get_text_config(decoder=True).num_hidden_layers == decoder
  assert config.get_text_config(encoder=True).num_hidden_layers == encoder
  # Given with num_decoder_layers, num_hidden_layers is the encoder's
  # depth (T5Config's alias of num_layers) and the decoder keeps its own.
  both = Config(num_hidden_layers=encoder, num_decoder_layers=decoder)
  assert (both.num_layers, both.num_decoder_layers) == (encoder, decoder)
  torch.manual_seed(0)
  model = modeling.MtfSynthesizerForConditionalGeneration(config).eval()
  assert len(model.model.encoder.block) == encoder
  assert len(model.model.decoder.block) == decoder
  ids = torch.tensor([[5, 9, 3, 7, 1], [4, 4, 8, 1, 0]])
  for implementation in ("dynamic", "static"):
    out = model.generate(input_ids=ids, attention_mask=(ids != 0).long(),
                         max_new_tokens=4, do_sample=False,
                         cache_implementation=(None if implementation ==
                                               "dynamic" else "static"),
                         return_dict_in_generate=True)
    cache = out.past_key_values.self_attention_cache
    assert len(cache.layers) == decoder, implementation
    assert out.sequences.shape[0] == 2 and out.sequences.shape[1] <= 5
  # The same sequences as decoding without a cache.
  plain = model.generate(input_ids=ids, attention_mask=(ids != 0).long(),
                         max_new_tokens=4, do_sample=False, use_cache=False)
  assert torch.equal(plain, out.sequences)
