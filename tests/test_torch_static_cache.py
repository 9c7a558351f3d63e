# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""transformers' static cache and the compiled generate that goes with it.

`generate(..., cache_implementation="static")` gives each self-attention
layer a cache of fixed length (the seq2seq's cross-attention one of the
encoder's length, `EncoderDecoderCache(StaticCache, StaticCache)` as T5
has): every step reads all of it, so the positions not yet written must be
masked and the tables read at the positions in use. For every variant of
the table and both heads, greedy decoding with it gives the default
DynamicCache's tokens and logits (a padded seq2seq batch, a left-padded
causal batch and one without padding), also from a static cache longer
than the tables; what the cache holds past the written positions (filled
with large random keys and values) changes no logit, masked by causality
alone where no attention mask is given; with `generation_config.compile_config` each step runs
the forward compiled with `fullgraph=True` (no graph break), as
transformers compiles it for static caches.
"""

import pytest
import torch
import transformers
from torch._dynamo import utils as dynamo_utils
from transformers import cache_utils

import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
HEADS = ("seq2seq", "causal_lm")
VOCAB, N = tiny_models.RANDOM_MODEL_VOCAB, tiny_models.N
NEW_TOKENS = 6
TOLERANCE = 1e-5


pytestmark = pytest.mark.usefixtures("one_thread")


def _model(variant, head, seed=0, **fields):
  """A tiny model of the variant, every weight random (biases included)."""
  return tiny_models.random_model(modeling, variant.components,
                                  head == "causal_lm", seed, **fields)


def _batches(head):
  """Prompts: a padded seq2seq batch; causal batches left-padded or not."""
  generator = torch.Generator().manual_seed(3)
  ids = torch.randint(2, VOCAB, (2, 7), generator=generator)
  mask = torch.ones_like(ids)
  if head == "seq2seq":
    ids[1, -2:] = 0
    mask[1, -2:] = 0
    return [{"input_ids": ids, "attention_mask": mask}]
  padded = ids.clone()
  padded[1, :3] = 0
  left = mask.clone()
  left[1, :3] = 0
  return [{"input_ids": ids, "attention_mask": mask},
          {"input_ids": padded, "attention_mask": left}]


def _generate(model, batch, **settings):
  return model.generate(**batch, max_new_tokens=NEW_TOKENS, do_sample=False,
                        eos_token_id=None, output_logits=True,
                        return_dict_in_generate=True, **settings)


def _assert_same_decoding(got, want):
  assert torch.equal(got.sequences, want.sequences)
  assert len(got.logits) == len(want.logits) == NEW_TOKENS
  for a, b in zip(got.logits, want.logits):
    torch.testing.assert_close(a, b, rtol=TOLERANCE, atol=TOLERANCE)


def _long_static_cache(model, batch):
  """A static cache longer than the tables (the seq2seq's cross one too)."""
  cache = cache_utils.StaticCache(model.config, max_cache_len=N + 4)
  if model.config.is_encoder_decoder:
    cache = cache_utils.EncoderDecoderCache(
        cache, cache_utils.StaticCache(
            model.config, max_cache_len=batch["input_ids"].shape[1]))
  return cache


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_static_cache_generates_what_the_dynamic_cache_does(
    variant, head, implementation):
  model = _model(variant, head)
  model.set_attn_implementation(implementation)
  for batch in _batches(head):
    dynamic = _generate(model, batch)
    static = _generate(model, batch, cache_implementation="static")
    cache = static.past_key_values
    if head == "seq2seq":
      assert isinstance(cache, cache_utils.EncoderDecoderCache)
      assert isinstance(cache.cross_attention_cache, cache_utils.StaticCache)
      cache = cache.self_attention_cache
    assert isinstance(cache, cache_utils.StaticCache)
    _assert_same_decoding(static, dynamic)
    longer = _generate(model, batch,
                       past_key_values=_long_static_cache(model, batch))
    _assert_same_decoding(longer, dynamic)


@pytest.mark.parametrize("settings", [{}, {"cache_implementation": "static"}],
                         ids=["dynamic", "static"])
@pytest.mark.parametrize("decoder_blocks", [1, 3])
def test_a_decoder_with_its_own_number_of_blocks_generates(decoder_blocks,
                                                           settings):
  """The cache has the decoder's blocks, not the encoder's (two here)."""
  model = _model(attentions.get("D+V"), "seq2seq",
                 num_decoder_layers=decoder_blocks)
  batch = _batches("seq2seq")[0]
  got = _generate(model, batch, **settings)
  cache = got.past_key_values
  for part in (cache.self_attention_cache, cache.cross_attention_cache):
    assert len(part.layers) == decoder_blocks
  _assert_same_decoding(got, _generate(model, batch, use_cache=False))


@pytest.mark.parametrize("decoder_blocks", [1, 3])
def test_a_setting_made_on_the_decoder_config_reaches_the_model(
    decoder_blocks):
  """generate() sets eos_token_id on get_text_config(decoder=True)."""
  model = _model(attentions.get("D+V"), "seq2seq",
                 num_decoder_layers=decoder_blocks)
  decoder_config = model.config.get_text_config(decoder=True)
  assert decoder_config.num_hidden_layers == decoder_blocks
  decoder_config.eos_token_id = 7
  assert model.config.eos_token_id == 7
  encoder_config = model.config.get_text_config(encoder=True)
  assert encoder_config.num_hidden_layers == model.config.num_layers


def _fill_unwritten(cache, written, seed=5):
  """Large random keys and values past the written positions of each layer.
  """
  generator = torch.Generator().manual_seed(seed)
  for layer in cache.layers:
    for table in (layer.keys, layer.values):
      rest = table[:, :, written:]
      rest.copy_(100 * torch.randn(rest.shape, generator=generator))


def _seq2seq_step(model, batch, written=3):
  """(the full pass's logits at `written`, a cached step's logits there)."""
  generator = torch.Generator().manual_seed(4)
  tokens = torch.randint(2, VOCAB, (2, written + 2), generator=generator)
  cache = cache_utils.EncoderDecoderCache(
      cache_utils.StaticCache(model.config, max_cache_len=N),
      cache_utils.StaticCache(model.config,
                              max_cache_len=batch["input_ids"].shape[1]))
  full = model(**batch, decoder_input_ids=tokens, use_cache=False).logits
  with torch.no_grad():
    model(**batch, decoder_input_ids=tokens[:, :written],
          past_key_values=cache)
    _fill_unwritten(cache.self_attention_cache, written)
    step = model(**batch, decoder_input_ids=tokens[:, written:written + 1],
                 past_key_values=cache).logits
  return full[:, written], step[:, 0]


def _causal_step(model, batch, with_mask):
  """(the full pass's last logits, a cached step's), with or without the
  attention mask and positions (without: only causality hides the rest).
  """
  generator = torch.Generator().manual_seed(4)
  tokens = torch.cat([batch["input_ids"], torch.randint(
      2, VOCAB, (2, 1), generator=generator)], dim=1)
  mask = torch.cat([batch["attention_mask"],
                    torch.ones(2, 1, dtype=torch.long)], dim=1)
  positions = (mask.cumsum(-1) - 1).clamp(min=0)
  if not with_mask:
    mask = positions = None
  def cut(x, part):
    return None if x is None else x[:, part]
  cache = cache_utils.StaticCache(model.config, max_cache_len=N)
  full = model(input_ids=tokens, attention_mask=mask, position_ids=positions,
               use_cache=False).logits
  with torch.no_grad():
    model(input_ids=tokens[:, :-1], attention_mask=cut(mask, slice(0, -1)),
          position_ids=cut(positions, slice(0, -1)), past_key_values=cache)
    _fill_unwritten(cache, tokens.shape[1] - 1)
    step = model(input_ids=tokens[:, -1:], attention_mask=mask,
                 position_ids=cut(positions, slice(-1, None)),
                 past_key_values=cache).logits
  return full[:, -1], step[:, 0]


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_what_the_cache_holds_past_the_written_positions_is_masked(
    variant, head):
  """A step reads the whole static cache: only the written part counts."""
  model = _model(variant, head)
  if head == "seq2seq":
    pairs = [_seq2seq_step(model, _batches(head)[0])]
  else:
    pairs = [_causal_step(model, _batches(head)[1], True),
             _causal_step(model, _batches(head)[0], False)]
  for full, step in pairs:
    torch.testing.assert_close(step, full, rtol=TOLERANCE, atol=TOLERANCE)


def _compiled_generate(model, batch, backend):
  """Greedy static-cache generate with each step compiled (fullgraph)."""
  config = transformers.CompileConfig(fullgraph=True, backend=backend,
                                      mode="default")
  config._compile_all_devices = True  # pylint: disable=protected-access
  model.generation_config.compile_config = config
  return _generate(model, batch, cache_implementation="static")


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("label", ["R+V", "D", "FD"])
def test_compiled_static_generate_equals_dynamic(label, head):
  torch._dynamo.reset()  # pylint: disable=protected-access
  model = _model(attentions.get(label), head)
  for batch in _batches(head):
    dynamic = _generate(model, batch)
    dynamo_utils.counters.clear()
    compiled = _compiled_generate(model, batch, "aot_eager")
    # The decoding steps ran compiled (generate copies the compile config,
    # so the count is dynamo's own).
    assert dynamo_utils.counters["stats"]["unique_graphs"] >= 1
    _assert_same_decoding(compiled, dynamic)


@pytest.mark.slow
def test_inductor_compiled_static_generate_equals_dynamic():
  torch._dynamo.reset()  # pylint: disable=protected-access
  model = _model(attentions.get("R+V"), "causal_lm")
  batch = _batches("causal_lm")[1]
  dynamic = _generate(model, batch)
  _assert_same_decoding(_compiled_generate(model, batch, "inductor"),
                        dynamic)
