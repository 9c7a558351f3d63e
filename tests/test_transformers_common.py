# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""transformers' own common model and configuration tests, on every variant.

transformers 5.23's `ModelTesterMixin` and `ConfigTester`
(`transformers_tests/`, unpacked unmodified by `make install`) run against
a tester modelled on transformers' T5 test, for each variant of the table
(`attentions.VARIANTS`) and each head: the encoder-decoder
(`MtfSynthesizerModel`, `MtfSynthesizerForConditionalGeneration`) and the
causal LM (`MtfSynthesizerForCausalLM`). The generation checks are this
suite's own, under transformers' test names
(`transformers_tests/generation/test_utils.py`).

Run alone: `cd tests && ../.venv/bin/python -m pytest -q -rs
test_transformers_common.py` (`-rs` lists the skipped tests with their
reasons, as `make test` does). Every test that does not run says why:
transformers' own skips (a GPU, `@slow`, the Hub, a feature the model does
not declare) with their reasons, and this module's (`RANDOM_BUFFER`) with
theirs.
"""

import unittest

import pytest
import torch
from transformers.models.auto import modeling_auto

from mtf_synthesizer import attentions
from mtf_synthesizer.hf_model import configuration_mtf_synthesizer
from mtf_synthesizer.hf_model import functions_mtf_synthesizer
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling
from transformers_tests.generation.test_utils import GenerationTesterMixin
from transformers_tests.test_configuration_common import ConfigTester
from transformers_tests.test_modeling_common import ids_tensor
from transformers_tests.test_modeling_common import ModelTesterMixin

Config = configuration_mtf_synthesizer.MtfSynthesizerConfig

# Many models: scheduled with the long modules (conftest.py).
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]

# The upstream tests that do not apply to a variant with a function whose
# table is not trained (Fix), each with its reason: that table is a buffer
# drawn at random by `_init_weights`, and transformers' check of buffers
# expects none. (transformers' own skips, `@slow` or a GPU, say theirs.)
RANDOM_BUFFER = {
    "test_init_weights_can_init_buffers":
        "the table of a function that is not trained is a random buffer "
        "(drawn by _init_weights), which this check takes for a constant",
}


# The model's rows of transformers' tables of model classes by task, which a
# model inside transformers has in `modeling_auto.py` (the common tests read
# them to choose each class's labels and checks).
for _table, _class in (
    (modeling_auto.MODEL_MAPPING_NAMES, modeling.MtfSynthesizerModel),
    (modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
     modeling.MtfSynthesizerForConditionalGeneration),
    (modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
     modeling.MtfSynthesizerForCausalLM)):
  _table.setdefault(Config.model_type, _class.__name__)


class MtfSynthesizerModelTester:
  """Tiny configurations and inputs, as transformers' T5ModelTester makes.

  Attributes:
    components: the variant's synthesizing functions.
    causal_lm: the causal LM's one stack, else the encoder-decoder.
  """

  def __init__(self, parent, components, causal_lm=False):
    self.parent = parent
    self.components = components
    self.causal_lm = causal_lm
    self.vocab_size = 99
    self.batch_size = 4
    # One length for both (transformers' SDPA check gives the decoder the
    # encoder's mask).
    self.encoder_seq_length = 7
    self.decoder_seq_length = 7
    self.seq_length = self.decoder_seq_length
    self.is_training = True
    self.hidden_size = 32
    self.num_hidden_layers = 2
    self.num_attention_heads = 4
    self.d_ff = 37
    self.relative_attention_num_buckets = 8
    self.dropout_rate = 0.1
    self.initializer_factor = 0.002
    self.eos_token_id = 1
    self.pad_token_id = 0
    self.decoder_start_token_id = 0
    # The tables' positions: past every length the common tests reach
    # (generation adds tokens); composite, for FD's default split.
    self.synthesizer_max_length = 32

  def get_config(self):
    return Config(
        vocab_size=self.vocab_size,
        d_model=self.hidden_size,
        d_ff=self.d_ff,
        d_kv=self.hidden_size // self.num_attention_heads,
        num_layers=self.num_hidden_layers,
        num_heads=self.num_attention_heads,
        relative_attention_num_buckets=self.relative_attention_num_buckets,
        dropout_rate=self.dropout_rate,
        initializer_factor=self.initializer_factor,
        eos_token_id=self.eos_token_id,
        bos_token_id=self.pad_token_id,
        pad_token_id=self.pad_token_id,
        decoder_start_token_id=self.decoder_start_token_id,
        is_encoder_decoder=not self.causal_lm,
        encoder_synthesizers=self.components,
        decoder_synthesizers=self.components,
        synthesizer_max_length=self.synthesizer_max_length)

  def prepare_config_and_inputs_for_common(self):
    """A config and the inputs of a forward pass, as transformers' testers.

    Returns:
      (config, inputs): the encoder-decoder's input, decoder input and
      masks; the causal LM's input and mask.
    """
    config = self.get_config()
    input_ids = ids_tensor([self.batch_size, self.encoder_seq_length],
                           self.vocab_size).clamp(2)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, -2:] = 0  # one example padded
    if self.causal_lm:
      return config, {"input_ids": input_ids,
                      "attention_mask": attention_mask}
    decoder_input_ids = ids_tensor([self.batch_size, self.decoder_seq_length],
                                   self.vocab_size).clamp(2)
    return config, {"input_ids": input_ids,
                    "attention_mask": attention_mask,
                    "decoder_input_ids": decoder_input_ids,
                    "decoder_attention_mask": torch.ones_like(
                        decoder_input_ids)}


class _CommonTests(ModelTesterMixin, GenerationTesterMixin):
  """transformers' common tests; a subclass sets the variant and head."""
  components = ()
  causal_lm = False

  def setUp(self):
    self.model_tester = MtfSynthesizerModelTester(self, self.components,
                                                  self.causal_lm)
    self.config_tester = ConfigTester(
        self, config_class=Config, d_model=37,
        encoder_synthesizers=list(self.components),
        decoder_synthesizers=list(self.components))

  @property
  def is_encoder_decoder(self):
    return not self.causal_lm

  def test_config(self):
    self.config_tester.run_common_tests()


def _not_applicable(reason):
  def skipped(self):
    self.skipTest(reason)
  return skipped


def _test_class(variant, causal_lm):
  """The unittest class of one variant and head."""
  head = "CausalLM" if causal_lm else "Seq2Seq"
  classes = ((modeling.MtfSynthesizerForCausalLM,) if causal_lm else
             (modeling.MtfSynthesizerModel,
              modeling.MtfSynthesizerForConditionalGeneration))
  members = dict(components=variant.components, causal_lm=causal_lm,
                 all_model_classes=classes,
                 __module__=__name__,
                 __qualname__="Test%s%s" % (_camel(variant.name), head))
  if any(not functions_mtf_synthesizer.FUNCTIONS[name].trainable
         for name in variant.components):
    for name, reason in RANDOM_BUFFER.items():
      members[name] = _not_applicable(reason)
  return type(members["__qualname__"], (_CommonTests, unittest.TestCase),
              members)


def _camel(name):
  return "".join(part.capitalize() for part in name.split("_"))


for _variant in attentions.VARIANTS:
  for _causal_lm in (False, True):
    _cls = _test_class(_variant, _causal_lm)
    globals()[_cls.__name__] = _cls
del _variant, _causal_lm, _cls
