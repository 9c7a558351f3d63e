# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A Synthesizer from a transformers T5 checkpoint (`from_t5`), no download.

(`mtf_synthesizer/hf_tools/t5_conversion.py`, building the export's copy
of the model code, as a PyTorch-only user loads it.)

Tiny T5s of four layouts are built locally with random weights: T5.1.0
(relu, tied and scaled output), T5 v1.1 (gated-gelu, an output layer of its
own), mT5 (transformers' MT5 class, a vocabulary large for its width) and
ByT5 (vocabulary 384, an encoder deeper than the decoder). For V the
Synthesizer computes T5's logits (a padded batch) and greedy decodes; for
every variant of the table every T5 weight is found, by name, in the result
or is reported as left out by the variant's design (a query or key kernel
the layer has no place for), and the functions' own weights are those a
model from the config draws; a weight with no place raises, naming it.
"""

import pytest
import torch
from transformers import MT5Config
from transformers import MT5ForConditionalGeneration
from transformers import T5Config
from transformers import T5ForConditionalGeneration

import model_code
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_tools import t5_conversion as conversion

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
N = 16  # synthesizer_max_length
SIZES = dict(d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
             relative_attention_num_buckets=8,
             relative_attention_max_distance=16, dropout_rate=0.0,
             decoder_start_token_id=0)
LAYOUTS = {
    "t5.1.0": (T5Config, dict(SIZES, vocab_size=64, feed_forward_proj="relu",
                              tie_word_embeddings=True)),
    "t5.1.1": (T5Config, dict(SIZES, vocab_size=64,
                              feed_forward_proj="gated-gelu",
                              tie_word_embeddings=False)),
    "mt5": (MT5Config, dict(SIZES, vocab_size=1024, d_model=16, d_kv=8,
                            num_heads=2, feed_forward_proj="gated-gelu",
                            tie_word_embeddings=False)),
    "byt5": (T5Config, dict(SIZES, vocab_size=384, num_layers=3,
                            num_decoder_layers=1,
                            feed_forward_proj="gated-gelu",
                            tie_word_embeddings=False)),
}
TOLERANCE = 1e-5
pytestmark = pytest.mark.usefixtures("one_thread")
# Inputs with padding (0) at the end; the decoder's too.
INPUTS = torch.tensor([[5, 6, 7, 8, 9, 1, 0], [10, 11, 12, 1, 0, 0, 0]])
DECODER_INPUTS = torch.tensor([[0, 4, 5, 6, 7], [0, 8, 9, 0, 0]])




def _t5(layout, seed=0):
  """A T5 of the layout with random weights (an own output layer if untied).

  transformers 5 ties T5's output layer to the embedding even for v1.1's
  config; a v1.1 or ByT5 checkpoint has its own, as it is given here.
  """
  torch.manual_seed(seed)
  config_class, fields = LAYOUTS[layout]
  model_class = (MT5ForConditionalGeneration if config_class is MT5Config
                 else T5ForConditionalGeneration)
  t5 = model_class(config_class(**fields)).eval()
  with torch.no_grad():
    for parameter in t5.parameters():  # norms away from 1
      parameter.add_(0.1 * torch.randn_like(parameter))
  if not fields.get("tie_word_embeddings", True):
    t5.lm_head.weight = torch.nn.Parameter(  # logits of a few units
        torch.randn_like(t5.lm_head.weight) * fields["d_model"]**-0.5)
  return t5


def _from_t5(t5, components, **kwargs):
  modeling = model_code.load()
  return conversion.from_t5(
      t5, encoder_synthesizers=components, decoder_synthesizers=components,
      synthesizer_max_length=N, output_loading_info=True,
      model_class=modeling.MtfSynthesizerForConditionalGeneration, **kwargs)


def _logits(model):
  with torch.no_grad():
    return model(input_ids=INPUTS, attention_mask=(INPUTS != 0).long(),
                 decoder_input_ids=DECODER_INPUTS).logits


def _greedy(t5, steps):
  """Greedy decoding by T5's full forward pass at each step (no cache).

  After its end of sequence (1) an example gets padding (0); the decoding
  stops when every example has ended.
  """
  decoded = torch.zeros((INPUTS.shape[0], 1), dtype=torch.long)
  ended = torch.zeros(INPUTS.shape[0], dtype=torch.bool)
  with torch.no_grad():
    for _ in range(steps):
      logits = t5(input_ids=INPUTS, attention_mask=(INPUTS != 0).long(),
                  decoder_input_ids=decoded).logits
      token = logits[:, -1].argmax(-1).masked_fill(ended, 0)
      decoded = torch.cat([decoded, token[:, None]], 1)
      ended |= token == 1
      if ended.all():
        break
  return decoded


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_v_computes_t5s_logits(layout):
  t5 = _t5(layout)
  model, info = _from_t5(t5, ("dot_product",))
  assert info.unused_t5_weights == [] and info.initialized_weights == []
  expected = _logits(t5)
  assert expected.abs().max() > 1.0  # not a trivial comparison
  assert torch.allclose(_logits(model), expected, atol=TOLERANCE, rtol=0)
  assert model.config.tie_word_embeddings == (layout == "t5.1.0")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_v_greedy_generate_is_t5s(layout):
  t5 = _t5(layout)
  model, _ = _from_t5(t5, ("dot_product",))
  with torch.no_grad():
    generated = model.generate(input_ids=INPUTS,
                               attention_mask=(INPUTS != 0).long(),
                               max_new_tokens=6, do_sample=False)
  expected = _greedy(t5, 6)
  assert expected.shape[1] > 3  # more than one step decoded
  assert generated.tolist() == expected.tolist()


def test_the_comparison_can_fail():
  """Without T5's output scaling (T5.1.0), the logits are not T5's."""
  t5 = _t5("t5.1.0")
  model, _ = _from_t5(t5, ("dot_product",))
  model.config.tie_word_embeddings = False
  assert not torch.allclose(_logits(model), _logits(t5), atol=1e-2)


def _expected_unused(components, t5):
  """The self-attention kernels a variant has no place for, by design."""
  kernels = [] if "dot_product" in components else ["q", "k"]
  return sorted("%s.block.%d.layer.0.SelfAttention.%s.weight" % (s, i, k)
                for s, stack in (("encoder", t5.encoder),
                                 ("decoder", t5.decoder))
                for i in range(len(stack.block)) for k in kernels)


@pytest.mark.parametrize("layout", ["t5.1.0", "byt5"])
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_every_t5_weight_is_found_or_reported(variant, layout):
  t5 = _t5(layout)
  torch.manual_seed(7)
  model, info = _from_t5(t5, "+".join(variant.components))
  assert sorted(info.unused_t5_weights) == _expected_unused(
      variant.components, t5)
  state = model.state_dict()
  for name, value in t5.state_dict().items():
    if name in info.unused_t5_weights:
      continue
    target = name if name.startswith("lm_head.") else "model." + name
    assert torch.equal(state[target], value), name
  # The functions' own weights: those a model from the config draws.
  torch.manual_seed(7)
  reference = type(model)(model.config).state_dict()
  own = [n for n in state if ".SelfAttention." in n and not n.endswith(
      ("q.weight", "k.weight", "v.weight", "o.weight",
       "relative_attention_bias.weight"))]
  assert sorted(info.initialized_weights) == sorted(own)
  assert bool(own) == (variant.components != ("dot_product",))
  for name in own:
    assert torch.equal(state[name], reference[name]), name


def test_a_weight_with_no_place_raises_naming_it():
  error = conversion.T5ConversionError
  t5 = _t5("t5.1.1")
  t5.encoder.block[1].layer[0].SelfAttention.register_parameter(
      "gate", torch.nn.Parameter(torch.ones(3)))
  with pytest.raises(error, match=r"encoder\.block\.1\.layer\.0\."
                     r"SelfAttention\.gate"):
    _from_t5(t5, ("random",))


def test_an_extra_key_in_the_state_raises_naming_it():
  t5 = _t5("t5.1.1")
  model, _ = _from_t5(t5, ("dense", "dot_product"))
  state = dict(t5.state_dict())
  state["decoder.block.0.layer.1.EncDecAttention.extra.weight"] = (
      torch.ones(2))
  with pytest.raises(conversion.T5ConversionError,
                     match=r"decoder\.block\.0\.layer\.1\.EncDecAttention"
                     r"\.extra\.weight"):
    conversion.copy_t5_weights(model, state)
  # A query kernel where the layer has one is not "by design" unused.
  state = dict(t5.state_dict())
  state["encoder.block.0.layer.0.SelfAttention.q.weight"] = torch.ones(3, 3)
  with pytest.raises(conversion.T5ConversionError, match="shape"):
    conversion.copy_t5_weights(model, state)
  # Two values for one tied weight.
  state = dict(t5.state_dict())
  state["encoder.embed_tokens.weight"] = state["shared.weight"] + 1
  with pytest.raises(conversion.T5ConversionError,
                     match=r"encoder\.embed_tokens\.weight"):
    conversion.copy_t5_weights(model, state)


def test_an_override_of_a_size_the_t5_fixes_raises():
  t5 = _t5("t5.1.0")
  with pytest.raises(conversion.T5ConversionError, match="d_model"):
    _from_t5(t5, ("dense",), d_model=64)
  model, _ = _from_t5(t5, ("dense",), dropout_rate=0.2, z_loss=0.0,
                      dense_hidden_size=4)
  assert (model.config.dropout_rate, model.config.z_loss,
          model.config.dense_hidden_size) == (0.2, 0.0, 4)


def test_an_activation_it_does_not_compute_raises():
  """T5's "gelu" is the exact gelu; the model's gelus are tanh's."""
  config_class, fields = LAYOUTS["t5.1.0"]
  t5 = T5ForConditionalGeneration(config_class(
      **dict(fields, feed_forward_proj="gelu")))
  with pytest.raises(conversion.T5ConversionError, match="'gelu'"):
    _from_t5(t5, ("dot_product",))
  t5 = T5ForConditionalGeneration(config_class(
      **dict(fields, feed_forward_proj="gated-silu"))).eval()
  model, _ = _from_t5(t5, ("dot_product",))
  assert model.config.feed_forward_proj == "gated-silu"
  assert torch.allclose(_logits(model), _logits(t5), atol=TOLERANCE, rtol=0)


def test_a_scaled_untied_output_layer_raises():
  t5 = _t5("t5.1.0")
  t5.lm_head.weight = torch.nn.Parameter(t5.lm_head.weight.detach().clone())
  with pytest.raises(conversion.T5ConversionError, match="lm_head"):
    _from_t5(t5, ("dot_product",))


def test_a_path_loads_and_the_dtype_is_kept(tmp_path):
  t5 = _t5("mt5")
  t5.save_pretrained(tmp_path / "mt5")
  model, _ = _from_t5(str(tmp_path / "mt5"), ("dot_product",))
  assert torch.allclose(_logits(model), _logits(t5), atol=TOLERANCE, rtol=0)
  t5.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
  model, _ = _from_t5(str(tmp_path / "bf16"), ("random", "dot_product"))
  assert next(model.parameters()).dtype == torch.bfloat16
  assert not model.training


def test_another_model_type_is_refused_by_name():
  # pylint: disable-next=g-import-not-at-top
  from transformers import BartConfig, BartForConditionalGeneration
  bart = BartForConditionalGeneration(BartConfig(
      vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1,
      encoder_attention_heads=2, decoder_attention_heads=2,
      encoder_ffn_dim=32, decoder_ffn_dim=32))
  with pytest.raises(conversion.T5ConversionError, match="'bart'"):
    _from_t5(bart, ("dot_product",))
