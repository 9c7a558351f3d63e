# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Bad input to the PyTorch model stops with an error that names it.

The configuration's fields come from its dataclass declarations, the
variants from the table: each bad value, set at construction or afterwards,
raises an error naming the field, or the model built from the configuration
runs (nothing fails deep inside torch). The same settings given to mesh's layer get the same
verdicts. The forward pass names the argument it cannot use, for both heads
and every variant.
"""

import dataclasses
import difflib
import logging
import os
import subprocess
import sys

from huggingface_hub.errors import StrictDataclassError
import pytest
import torch
import transformers

import model_code
import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer import layer as layer_lib
from mtf_synthesizer import synthesizers
from mtf_synthesizer.export import hf_export
from mtf_synthesizer.hf_tools import misspellings
from mtf_synthesizer.hf_tools import t5_conversion
from mtf_synthesizer.hf_tools import weight_files

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
HEADS = ("seq2seq", "causal_lm")
# Values of every kind a user may give by mistake (and some valid ones).
PROBES = (0, -4, 2.5, 1.5, 8, 1, True, None, "8", "dense", (), (-4, -4),
          (4, 4), (3, 5), ("dense",))


# What a bad field value raises: the strict dataclass's errors (a field's
# type or rule, a rule across fields), or a ValueError naming the field.
CONFIG_ERRORS = (ValueError, TypeError, StrictDataclassError)


def _configuration():
  return model_code.load("configuration")


def _declared():
  """The configuration class's own fields (not PreTrainedConfig's)."""
  config_class = _configuration().MtfSynthesizerConfig
  return {f.name: f for f in dataclasses.fields(config_class)
          if f.name in config_class.__annotations__}


def _fields():
  """The fields a user sets: every declared one but the token ids."""
  return sorted(f for f in _declared() if not f.endswith("_token_id"))


def _settings(**fields):
  settings = dict(
      vocab_size=16, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2,
      synthesizer_max_length=8, factorized_random_k=2,
      factorized_dense_factors=None, relative_attention_num_buckets=8,
      relative_attention_max_distance=16, dropout_rate=0.0,
      # Every function in play, so that every field reaches the model.
      encoder_synthesizers=tuple(_configuration().FUNCTION_SETTINGS),
      decoder_synthesizers=tuple(_configuration().FUNCTION_SETTINGS))
  settings.update(fields)
  return settings


def _runs(config, field: str = "") -> None:
  """Builds the model of a config and runs a training step's forward.

  Args:
    config: the configuration.
    field: a field whose value may refuse the inputs: the forward may
      raise a ValueError that names it.
  """
  try:
    _forward(config)
  except ValueError as error:
    if not field:
      raise
    _assert_names(error, field)


def _forward(config) -> None:
  modeling = model_code.load()
  torch.manual_seed(0)
  length = min(4, config.synthesizer_max_length)
  ids = torch.arange(2 * length).view(2, length) % config.vocab_size
  if config.is_encoder_decoder:
    model = modeling.MtfSynthesizerForConditionalGeneration(config)
    loss = model(input_ids=ids, labels=ids).loss
  else:
    model = modeling.MtfSynthesizerForCausalLM(config)
    loss = model(input_ids=ids, labels=ids).loss
  assert torch.isfinite(loss)


def _assert_names(error: Exception, field: str) -> None:
  assert field in str(error), (field, str(error))


def test_every_field_is_a_keyword_of_the_configuration():
  configuration = _configuration()
  config = configuration.MtfSynthesizerConfig(**_settings())
  for field in _fields():
    assert field in config.to_dict(), field


@pytest.mark.parametrize("field", _fields())
def test_a_bad_value_names_its_field_or_the_model_runs(field):
  """Each probe at construction: an error naming the field, or a model."""
  configuration = _configuration()
  accepted = 0
  for value in PROBES:
    try:
      config = configuration.MtfSynthesizerConfig(**_settings(**{field: value}))
    except CONFIG_ERRORS as error:
      _assert_names(error, field)
      continue
    _runs(config, field)
    accepted += 1
  assert accepted < len(PROBES), field  # some probe is bad for every field


@pytest.mark.parametrize("field", _fields())
def test_setting_a_bad_value_names_it_and_keeps_the_config(field):
  """Each probe set on a built config: the same verdict, nothing changed."""
  configuration = _configuration()
  for value in PROBES:
    config = configuration.MtfSynthesizerConfig(**_settings())
    before = config.to_dict()
    try:
      setattr(config, field, value)
    except CONFIG_ERRORS as error:
      _assert_names(error, field)
      assert config.to_dict() == before, (field, value)
      with pytest.raises(CONFIG_ERRORS):
        configuration.MtfSynthesizerConfig(**_settings(**{field: value}))
      continue
    _runs(config, field)


def _size_fields():
  """The fields whose rule is a size's (a positive integer, or None)."""
  configuration = _configuration()
  # pylint: disable=protected-access
  sizes = (configuration._positive, configuration._positive_or_none)
  return [f for f in _fields()
          if set(_declared()[f].metadata.get("validator", ())) & set(sizes)]


@pytest.mark.parametrize("field", _size_fields())
def test_zero_negative_and_fractional_sizes_are_refused(field):
  configuration = _configuration()
  for value in (0, -4, 2.5, "8", True):
    with pytest.raises(CONFIG_ERRORS) as error:
      configuration.MtfSynthesizerConfig(**_settings(**{field: value}))
    _assert_names(error.value, field)
    _assert_names(error.value, repr(value))


def _t5_fields():
  return {f.name for f in dataclasses.fields(transformers.T5Config)}


def _synthesizer_fields():
  """The fields T5Config lacks: the Synthesizer's own."""
  return sorted(set(_declared()) - _t5_fields())


@pytest.mark.parametrize("field", _synthesizer_fields())
def test_a_misspelled_synthesizer_field_is_named(field):
  """transformers keeps a keyword it does not know as an attribute, and so
  does the configuration, quietly (as T5Config does); the hint
  (`mtf_synthesizer/hf_tools/misspellings.py`) names the Synthesizer's own
  field a keyword misspells, for the tools that take fields from a user
  (from_t5's overrides)."""
  configuration = _configuration()
  for misspelled in (field[:-1], field.replace("_", "", 1)):
    config = configuration.MtfSynthesizerConfig(**{misspelled: 1})
    assert getattr(config, misspelled) == 1
    assert misspellings.misspelled_field(
        misspelled, configuration.MtfSynthesizerConfig) == field


def test_no_name_transformers_uses_is_taken_for_a_misspelling(caplog):
  """Every field and alias of transformers' configurations, and generation's
  settings, is kept quietly (as T5Config keeps it)."""
  from transformers import CONFIG_MAPPING  # pylint: disable=g-import-not-at-top
  configuration = _configuration()
  names = set(transformers.GenerationConfig().to_dict())
  for model_type in CONFIG_MAPPING.keys():
    try:
      config_class = CONFIG_MAPPING[model_type]
    except (ImportError, KeyError):
      continue
    names.update(f.name for f in dataclasses.fields(config_class))
    names.update(config_class.attribute_map)
  close = {n for n in names - set(_declared())
           if difflib.get_close_matches(
               n, _synthesizer_fields(), n=1, cutoff=0.8)}
  assert close  # transformers' names that resemble the Synthesizer's fields
  for name in sorted(close) + ["bos_token_id", "num_labels",
                               "layer_norm_eps"]:
    assert misspellings.misspelled_field(
        name, configuration.MtfSynthesizerConfig) is None, name


def test_the_misspelling_hint_imports_no_configuration_class():
  """The hint reads transformers' configuration files as text: building
  every configuration class (what CONFIG_MAPPING does) took seconds. In a
  fresh interpreter, so that no other test has imported them."""
  code = (
      "import sys\n"
      "from mtf_synthesizer.hf_tools import misspellings as c\n"
      "count = lambda: sum(m.startswith('transformers.models.') "
      "for m in sys.modules)\n"
      "before = count()\n"
      "hints = [c.misspelled_field(k) for k in "
      "('encoder_synthesizer', 'hidden_dropout_prob', 'layer_norm_eps')]\n"
      "print(hints, count() - before)\n")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=600,
                        cwd=os.path.dirname(os.path.dirname(__file__)))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.split("\n")[-2] == (
      "['encoder_synthesizers', None, None] 0"), proc.stdout


def test_a_config_takes_what_transformers_tests_give_it(caplog):
  """T5's tester's keywords, and the attribute transformers' test helper
  sets on every configuration (`set_config_for_less_flaky_test`)."""
  configuration = _configuration()
  with caplog.at_level(logging.WARNING):
    config = configuration.MtfSynthesizerConfig(
        **_settings(bos_token_id=0, num_labels=3, classifier_dropout=0.0))
  assert (config.bos_token_id, config.num_labels) == (0, 3)
  transformers.testing_utils.set_config_for_less_flaky_test(config)
  assert config.layer_norm_eps == 1.0
  assert "did you mean" not in caplog.text
  _runs(config)


def test_functions_as_a_string_set_after_construction():
  config = tiny_models.config(("dot_product",))
  config.encoder_synthesizers = "dense"
  config.decoder_synthesizers = "random+dot_product"
  assert config.encoder_synthesizers == ("dense",)
  assert config.decoder_synthesizers == ("random", "dot_product")
  _runs(config)


def test_fd_default_factors_follow_n():
  config = tiny_models.config(("factorized_dense",),
                              factorized_dense_factors=None)
  assert config.factorized_dense_factors == (4, 4)
  config.synthesizer_max_length = 32
  assert config.factorized_dense_factors == (4, 8)
  _runs(config)


def test_fd_factors_chosen_by_hand_refuse_another_n_at_once(tmp_path):
  config = tiny_models.config(("factorized_dense",),
                              factorized_dense_factors=(2, 8))
  with pytest.raises(CONFIG_ERRORS) as error:
    config.synthesizer_max_length = 32
  _assert_names(error.value, "factorized_dense_factors")
  assert (config.synthesizer_max_length,
          config.factorized_dense_factors) == (16, (2, 8))
  # The way the message gives: the factors to their default, then N.
  config.factorized_dense_factors = None
  config.synthesizer_max_length = 32
  config.save_pretrained(tmp_path)
  reloaded = type(config).from_pretrained(tmp_path)
  assert reloaded.factorized_dense_factors == (4, 8)


def test_fd_with_a_prime_n_is_refused():
  with pytest.raises(ValueError) as error:
    tiny_models.config(("factorized_dense",), synthesizer_max_length=17,
                       factorized_dense_factors=None)
  _assert_names(error.value, "synthesizer_max_length")


def test_every_mesh_setting_is_declared_with_a_field():
  """Each function's export settings are its row's of FUNCTION_SETTINGS,
  and each field a row names is a field of the configuration."""
  configuration = _configuration()
  table = configuration.FUNCTION_SETTINGS
  assert sorted(table) == sorted(synthesizers.BY_NAME)
  for name, function_class in synthesizers.BY_NAME.items():
    given = function_class().export_settings(16)
    assert set(table[name].mesh_settings) == set(given), name
  fields = _declared()
  for name, settings in table.items():
    assert set(settings.fields) <= set(fields), name
    items = {}
    for target in settings.mesh_settings.values():
      if target.item is not None:
        items.setdefault(target.field, []).append(target.item)
    for field, indexes in items.items():  # a field's items: 0, 1, ...
      assert sorted(indexes) == list(range(len(indexes))), (name, field)


def _exported_fields(functions):
  """The export's fields of a causal LM whose self-attention has functions.

  Args:
    functions: the functions' settings as mesh's layer gives them (each
      with its "name").

  Returns:
    `hf_export.flat_config`'s fields.
  """
  attention = {"type": "SynthesizerAttention", "num_heads": 2, "d_kv": 4,
               "num_memory_heads": 0, "scale_queries": False,
               "relative_attention": "bias_shared",
               "relative_attention_num_buckets": 8, "functions": functions,
               "max_length": 16, "learned_weights": True}
  stack = {"num_blocks": 1, "positional_embedding": None,
           "logits": "embedding",
           "layers": [attention, {"type": "DenseReluDense", "d_ff": 8,
                                  "activations": ["relu"]}]}
  return hf_export.flat_config({"transformer": stack}, d_model=8,
                               vocab_size=16, shared_embedding=True,
                               layer_norm_epsilon=1e-6)


def test_the_export_fills_the_fields_each_function_declares():
  """mesh's settings reach the fields of their function's row (FD's a and b
  as the items of its factors); a setting its row lacks is named."""
  functions = [dict(synthesizers.BY_NAME[name](**settings).export_settings(
      16), name=name) for name, settings in (
          ("factorized_dense", {"a": 2, "b": 8, "hidden_size": 3}),
          ("factorized_random", {"k": 5}))]
  fields = _exported_fields(functions)
  config = _configuration().MtfSynthesizerConfig(
      **dict(fields, relative_attention_max_distance=16))
  assert (config.factorized_dense_factors, config.dense_hidden_size,
          config.factorized_random_k) == ((2, 8), 3, 5)
  # A setting that is another function's: no field of this one.
  with pytest.raises(hf_export.ExportError) as error:
    _exported_fields([{"name": "dense", "k": 5}])
  assert "'k'" in str(error.value) and "dense" in str(error.value)


# mesh's settings of the same meaning (the configuration's table maps them).
def _mesh_function_settings():
  """(mesh class, its setting, the config's field) for the shared settings.

  The settings that fill a whole field: FD's a and b, items of
  factorized_dense_factors, are probed as a pair by
  test_mesh_and_pytorch_agree_on_n_and_fd_factors.
  """
  out = []
  table = _configuration().FUNCTION_SETTINGS
  for name, function_class in sorted(synthesizers.BY_NAME.items()):
    for setting, target in table[name].mesh_settings.items():
      if target.item is None:
        out.append((name, function_class, setting, target.field))
  return out


def _verdict(build) -> bool:
  try:
    build()
  except CONFIG_ERRORS:
    return False
  return True


@pytest.mark.parametrize("shared", _mesh_function_settings(),
                         ids=lambda s: "%s.%s" % (s[0], s[2]))
def test_mesh_and_pytorch_agree_on_a_function_setting(shared):
  name, function_class, setting, field = shared
  configuration = _configuration()
  assert field in _declared()
  for value in PROBES:
    mesh = _verdict(lambda: function_class(**{setting: value}))
    torch_side = _verdict(lambda: configuration.MtfSynthesizerConfig(
        **_settings(**{field: value, "encoder_synthesizers": (name,)})))
    assert mesh == torch_side, (name, setting, value, mesh, torch_side)


def test_mesh_and_pytorch_agree_on_n_and_fd_factors():
  configuration = _configuration()
  for n in (0, -4, 2.5, "8", None, 7, 8, 16):
    mesh = _verdict(lambda: layer_lib.SynthesizerAttention(
        synthesizers=[synthesizers.FactorizedDense()], max_length=n)
                    .synthesizer.factor_sizes(n))
    torch_side = _verdict(lambda: configuration.MtfSynthesizerConfig(
        **_settings(synthesizer_max_length=n,
                    encoder_synthesizers=("factorized_dense",))))
    assert mesh == torch_side, (n, mesh, torch_side)
  for factors in ((4, 4), (2, 8), (1, 16), (3, 5), (0, 16), (-4, -4),
                  (2.0, 8), (4, None), (None, 4)):
    a, b = factors
    mesh = _verdict(lambda: synthesizers.FactorizedDense(a=a, b=b)
                    .factor_sizes(16))
    torch_side = _verdict(lambda: configuration.MtfSynthesizerConfig(
        **_settings(synthesizer_max_length=16, factorized_dense_factors=(
            a, b), encoder_synthesizers=("factorized_dense",))))
    if None in factors:  # mesh derives the other one; the config needs both
      assert not torch_side
      continue
    assert mesh == torch_side, (factors, mesh, torch_side)
  for value in PROBES:
    mesh = _verdict(lambda: layer_lib.SynthesizerAttention(
        learned_mixture_weights=value))
    torch_side = _verdict(lambda: configuration.MtfSynthesizerConfig(
        **_settings(learned_mixture_weights=value)))
    assert mesh == torch_side, (value, mesh, torch_side)


# Class and config.


def _tiny_t5(tmp_path):
  config = transformers.T5Config(
      vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2,
      feed_forward_proj="gated-gelu", tie_word_embeddings=False)
  torch.manual_seed(0)
  transformers.T5ForConditionalGeneration(config).save_pretrained(tmp_path)
  return str(tmp_path)


def test_from_pretrained_refuses_a_t5_and_points_to_from_t5(tmp_path):
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling
  path = _tiny_t5(tmp_path)
  with pytest.raises(ValueError) as error:
    modeling.MtfSynthesizerForConditionalGeneration.from_pretrained(path)
  _assert_names(error.value, "'t5'")
  _assert_names(error.value, "from_t5")
  # from_t5 reads the same directory.
  model = t5_conversion.from_t5(path)
  assert model.config.model_type == "mtf_synthesizer"


def test_from_t5_names_the_field_an_override_misspells(tmp_path, caplog):
  path = _tiny_t5(tmp_path)
  with caplog.at_level(logging.WARNING):
    model = t5_conversion.from_t5(path, synthesizer_max_length=8,
                                  factorized_random=2)
  assert model.config.factorized_random == 2
  assert "'factorized_random'" in caplog.text
  assert "'factorized_random_k'" in caplog.text


@pytest.mark.parametrize("cut", ["half", "header"])
def test_a_broken_weights_file_of_a_saved_model_is_named(tmp_path, cut):
  """`check_weights` before `from_pretrained` (the model itself leaves the
  file to safetensors, whose error does not name it)."""
  model = tiny_models.seq2seq(("dense", "dot_product"))
  model.save_pretrained(tmp_path)
  path = tmp_path / "model.safetensors"
  raw = path.read_bytes()
  path.write_bytes(raw[:len(raw) // 2] if cut == "half" else
                   raw[:8] + b"\xff" + raw[9:])
  with pytest.raises(OSError) as error:
    weight_files.check_weights(str(tmp_path))
  _assert_names(error.value, str(path))


def test_a_seq2seq_class_refuses_a_decoder_only_config():
  modeling = model_code.load()
  config = tiny_models.config(("dense",), causal_lm=True)
  for model_class in (modeling.MtfSynthesizerForConditionalGeneration,
                      modeling.MtfSynthesizerModel):
    with pytest.raises(ValueError) as error:
      model_class(config)
    _assert_names(error.value, "is_encoder_decoder")
    _assert_names(error.value, "MtfSynthesizerForCausalLM")


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_the_causal_lm_takes_an_encoder_decoder_config_as_its_decoder(
    variant):
  modeling = model_code.load()
  config = tiny_models.config(variant.components, num_decoder_layers=2)
  torch.manual_seed(0)
  model = modeling.MtfSynthesizerForCausalLM(config)
  assert config.is_encoder_decoder  # the caller's config is not changed
  assert not model.config.is_encoder_decoder
  assert len(model.model.block) == 2
  assert not any("EncDecAttention" in n for n, _ in model.named_parameters())
  # The same model as one built from the decoder-only config.
  decoder_only = tiny_models.config(variant.components, causal_lm=True,
                                    num_layers=2)
  torch.manual_seed(0)
  reference = modeling.MtfSynthesizerForCausalLM(decoder_only)
  reference.load_state_dict(model.state_dict())
  ids = tiny_models.ids((2, 6), 0)
  model.eval()
  reference.eval()
  with torch.no_grad():
    torch.testing.assert_close(model(input_ids=ids).logits,
                               reference(input_ids=ids).logits)
    generated = model.generate(ids[:, :3], max_new_tokens=3, do_sample=False)
  assert generated.shape == (2, 6)


# The forward pass.


def _model(variant, head):
  build = tiny_models.causal_lm if head == "causal_lm" else (
      tiny_models.seq2seq)
  return build(variant.components).eval()


def _good(head):
  ids = tiny_models.ids((2, 6), 0)
  if head == "causal_lm":
    return {"input_ids": ids, "labels": ids}
  return {"input_ids": ids, "labels": tiny_models.ids((2, 4), 1)}


def _bad_inputs(head):
  """(argument named, the inputs) for each kind of bad input."""
  ids = tiny_models.ids((2, 6), 0)
  cases = [
      ("input_ids", {"input_ids": ids.float()}),
      ("input_ids", {"input_ids": ids[:0]}),
      ("input_ids", {"input_ids": ids[:, :0]}),
      ("input_ids", {"input_ids": ids[0]}),
      ("input_ids", {"input_ids": ids + tiny_models.VOCAB}),
      ("attention_mask", {"attention_mask": torch.ones(2, 6, 6)}),
      ("attention_mask", {"attention_mask": torch.ones(2, 5)}),
      ("attention_mask", {"attention_mask": torch.ones(3, 6)}),
      ("labels", {"labels": _good(head)["labels"].float()}),
      ("labels", {"labels": _good(head)["labels"] + tiny_models.VOCAB}),
      ("inputs_embeds", {"input_ids": None,
                         "inputs_embeds": torch.ones(2, 6, 32).long()}),
      ("num_items_in_batch", {"num_items_in_batch": 0}),
  ]
  if head == "causal_lm":
    cases += [
        ("position_ids", {"position_ids": torch.arange(5)[None]}),
        ("shift_labels", {"shift_labels": ids[:, :3]}),
        ("labels", {"labels": ids[:, :3]}),
    ]
  else:
    labels = _good(head)["labels"]
    cases += [
        ("decoder_input_ids", {"decoder_input_ids": labels.float()}),
        ("decoder_input_ids", {"decoder_input_ids": labels[:0]}),
        ("decoder_attention_mask",
         {"decoder_input_ids": labels,
          "decoder_attention_mask": torch.ones(2, 4, 4)}),
        ("labels", {"decoder_input_ids": labels, "labels": labels[:, :2]}),
    ]
  return cases


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_bad_forward_inputs_name_the_argument(variant, head):
  model = _model(variant, head)
  with torch.no_grad():
    model(**_good(head))  # the good inputs run
    for argument, bad in _bad_inputs(head):
      inputs = dict(_good(head), **bad)
      with pytest.raises(ValueError) as error:
        model(**inputs)
      _assert_names(error.value, argument)


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_shift_labels_take_precedence_over_labels(variant):
  model = _model(variant, "causal_lm")
  ids = tiny_models.ids((2, 6), 0)
  shift_labels = tiny_models.ids((2, 6), 3)
  with torch.no_grad():
    both = model(input_ids=ids, labels=ids, shift_labels=shift_labels).loss
    alone = model(input_ids=ids, shift_labels=shift_labels).loss
  torch.testing.assert_close(both, alone)


def test_the_configuration_imports_no_torch(tmp_path):
  """The configuration (and the declarations it imports), loaded as a copy
  of the model code, in an environment without torch."""
  # The environment's packages, torch's left out.
  site = os.path.dirname(os.path.dirname(transformers.__file__))
  packages = tmp_path / "site"
  packages.mkdir()
  for name in os.listdir(site):
    if not name.startswith(("torch", "functorch")):
      os.symlink(os.path.join(site, name), packages / name)
  code = (
      "import sys\n"
      "sys.path.insert(0, %r)\n"
      "import model_code\n"
      "module = model_code.load('configuration')\n"
      "config = module.MtfSynthesizerConfig(encoder_synthesizers='dense')\n"
      "print(config.encoder_synthesizers, 'torch' in sys.modules)\n" % (
          os.path.dirname(os.path.abspath(model_code.__file__))))
  out = subprocess.run(
      [sys.executable, "-S", "-c", code], capture_output=True, text=True,
      check=False, cwd=str(tmp_path),
      env=dict(os.environ, PYTHONPATH=str(packages)))
  assert out.returncode == 0, out.stderr[-2000:]
  assert "('dense',) False" in out.stdout
