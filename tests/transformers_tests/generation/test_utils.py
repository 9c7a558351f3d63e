# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Generation checks under transformers' test names (`GenerationTesterMixin`).

transformers' own `tests/generation/test_utils.py` is not in its source
distribution; these are this suite's checks of what it checks, named as
its tests are: greedy, sampling and beam search, their dictionary outputs
with and without the cache, the dynamic cache against the static one,
continuing from `past_key_values`, left padding, `inputs_embeds`, and
assisted and prompt-lookup decoding equal to greedy search. Greedy search
is held against a loop of full forward passes (no cache), so the checks do
not rest on `generate()` alone.

A test class mixes this in beside `ModelTesterMixin`; its
`model_tester.prepare_config_and_inputs_for_common()` gives the inputs.
"""

import copy

import torch
from transformers.generation import GenerateBeamEncoderDecoderOutput
from transformers.generation import GenerateBeamDecoderOnlyOutput
from transformers.generation import GenerateDecoderOnlyOutput
from transformers.generation import GenerateEncoderDecoderOutput

NEW_TOKENS = 4


class GenerationTesterMixin:
  """transformers' generation checks, for `all_generative_model_classes`."""

  def _generation_setup(self, model_class):
    """A model of the class in eval mode, and its prompt's inputs.

    Returns:
      (model, inputs): `input_ids` and `attention_mask` (no padding).
    """
    config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
    config.dropout_rate = 0.0
    torch.manual_seed(0)
    model = model_class(config).eval()
    input_ids = inputs["input_ids"]
    return model, {"input_ids": input_ids,
                   "attention_mask": torch.ones_like(input_ids)}

  def _generate(self, model, inputs, **kwargs):
    settings = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                    do_sample=False, num_beams=1)
    settings.update(kwargs)
    with torch.no_grad():
      return model.generate(**inputs, **settings)

  def _prompt_length(self, model, inputs):
    """The tokens generate() returns before the new ones."""
    if model.config.is_encoder_decoder:
      return 1  # the decoder's start token
    return inputs["input_ids"].shape[1]

  def _greedy_by_forward(self, model, inputs):
    """Greedy search by full forward passes, without generate()."""
    batch = inputs["input_ids"].shape[0]
    with torch.no_grad():
      if model.config.is_encoder_decoder:
        sequence = torch.full((batch, 1), model.config.decoder_start_token_id)
        for _ in range(NEW_TOKENS):
          logits = model(**inputs, decoder_input_ids=sequence,
                         use_cache=False).logits
          sequence = torch.cat([sequence, self._best(logits, model.config.eos_token_id)], dim=1)
        return sequence
      sequence = inputs["input_ids"]
      for _ in range(NEW_TOKENS):
        logits = model(input_ids=sequence, use_cache=False).logits
        sequence = torch.cat([sequence, self._best(logits, model.config.eos_token_id)], dim=1)
      return sequence

  @staticmethod
  def _best(logits, eos_token_id):
    """The next token, the end of sequence excluded (min_new_tokens)."""
    logits = logits[:, -1].clone()
    logits[:, eos_token_id] = -float("inf")
    return logits.argmax(-1, keepdim=True)

  def _check_dict_output(self, model, output, inputs, beams=1):
    config = model.config
    if config.is_encoder_decoder:
      expected = (GenerateBeamEncoderDecoderOutput if beams > 1 else
                  GenerateEncoderDecoderOutput)
    else:
      expected = (GenerateBeamDecoderOnlyOutput if beams > 1 else
                  GenerateDecoderOnlyOutput)
    self.assertIsInstance(output, expected)
    self.assertEqual(output.sequences.shape,
                     (inputs["input_ids"].shape[0],
                      self._prompt_length(model, inputs) + NEW_TOKENS))
    batch = inputs["input_ids"].shape[0] * beams  # a row per beam
    self.assertEqual(len(output.scores), NEW_TOKENS)
    self.assertEqual(len(output.logits), NEW_TOKENS)
    for scores in output.scores:
      self.assertEqual(scores.shape, (batch, config.vocab_size))
    attentions = (output.decoder_attentions if config.is_encoder_decoder
                  else output.attentions)
    hidden_states = (output.decoder_hidden_states
                     if config.is_encoder_decoder else output.hidden_states)
    self.assertEqual(len(attentions), NEW_TOKENS)
    self.assertEqual(len(hidden_states), NEW_TOKENS)
    for step in attentions:
      self.assertEqual(len(step), config.num_hidden_layers)
      self.assertEqual(step[0].shape[:2], (batch, config.num_heads))
    for step in hidden_states:
      self.assertEqual(len(step), config.num_hidden_layers + 1)
      self.assertEqual(step[0].shape[-1], config.d_model)
    if config.is_encoder_decoder:
      self.assertEqual(len(output.encoder_attentions), config.num_layers)
      self.assertEqual(len(output.encoder_hidden_states),
                       config.num_layers + 1)

  def _dict_generate(self, model, inputs, use_cache, **kwargs):
    return self._generate(
        model, inputs, return_dict_in_generate=True, output_scores=True,
        output_logits=True, output_attentions=True,
        output_hidden_states=True, use_cache=use_cache, **kwargs)

  def test_greedy_generate(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      output = self._generate(model, inputs)
      torch.testing.assert_close(output,
                                 self._greedy_by_forward(model, inputs))

  def test_greedy_generate_dict_outputs(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      output = self._dict_generate(model, inputs, use_cache=False)
      self._check_dict_output(model, output, inputs)
      torch.testing.assert_close(output.sequences,
                                 self._greedy_by_forward(model, inputs))

  def test_greedy_generate_dict_outputs_use_cache(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      cached = self._dict_generate(model, inputs, use_cache=True)
      self._check_dict_output(model, cached, inputs)
      self.assertIsNotNone(cached.past_key_values)
      uncached = self._dict_generate(model, inputs, use_cache=False)
      torch.testing.assert_close(cached.sequences, uncached.sequences)
      for with_cache, without in zip(cached.scores, uncached.scores):
        torch.testing.assert_close(with_cache, without, rtol=1e-4,
                                   atol=1e-4)

  def test_sample_generate(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      torch.manual_seed(1)
      first = self._generate(model, inputs, do_sample=True)
      torch.manual_seed(1)
      again = self._generate(model, inputs, do_sample=True)
      torch.testing.assert_close(first, again)
      self.assertTrue(((first >= 0) &
                       (first < model.config.vocab_size)).all())
      # Sampling from the best token alone is greedy search.
      top_1 = self._generate(model, inputs, do_sample=True, top_k=1)
      torch.testing.assert_close(top_1,
                                 self._greedy_by_forward(model, inputs))

  def test_sample_generate_dict_output(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      torch.manual_seed(1)
      output = self._dict_generate(model, inputs, use_cache=True,
                                   do_sample=True)
      self._check_dict_output(model, output, inputs)

  def test_beam_search_generate(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      output = self._generate(model, inputs, num_beams=3,
                              num_return_sequences=2)
      batch = inputs["input_ids"].shape[0]
      self.assertEqual(
          output.shape,
          (2 * batch, self._prompt_length(model, inputs) + NEW_TOKENS))
      # One beam is greedy search.
      torch.testing.assert_close(self._generate(model, inputs, num_beams=1),
                                 self._greedy_by_forward(model, inputs))

  def test_beam_search_generate_dict_output(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      output = self._dict_generate(model, inputs, use_cache=False,
                                   num_beams=2)
      self._check_dict_output(model, output, inputs, beams=2)
      self.assertEqual(output.sequences_scores.shape,
                       (inputs["input_ids"].shape[0],))

  def test_beam_search_generate_dict_outputs_use_cache(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      cached = self._dict_generate(model, inputs, use_cache=True,
                                   num_beams=2)
      self._check_dict_output(model, cached, inputs, beams=2)
      uncached = self._dict_generate(model, inputs, use_cache=False,
                                     num_beams=2)
      torch.testing.assert_close(cached.sequences, uncached.sequences)
      torch.testing.assert_close(cached.sequences_scores,
                                 uncached.sequences_scores, rtol=1e-4,
                                 atol=1e-4)

  def test_generate_with_static_cache(self):
    """The static cache decodes what the dynamic one does."""
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      dynamic = self._dict_generate(model, inputs, use_cache=True)
      static = self._dict_generate(model, inputs, use_cache=True,
                                   cache_implementation="static")
      torch.testing.assert_close(static.sequences, dynamic.sequences)
      for a, b in zip(static.scores, dynamic.scores):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)

  def test_past_key_values_format(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      output = self._generate(model, inputs, return_dict_in_generate=True,
                              use_cache=True)
      config = model.config
      cache = output.past_key_values
      if config.is_encoder_decoder:
        self_cache = cache.self_attention_cache
        self.assertEqual(len(cache.cross_attention_cache.layers),
                         config.num_decoder_layers)
      else:
        self_cache = cache
      self.assertEqual(len(self_cache.layers), config.num_hidden_layers)
      heads = config.num_memory_heads or config.num_heads
      layer = self_cache.layers[0]
      cached = output.sequences.shape[1] - 1  # the last token is not fed
      self.assertEqual(tuple(layer.values.shape),
                       (inputs["input_ids"].shape[0], heads, cached,
                        config.d_kv))
      # Keys of that shape where the dot product reads them.
      self.assertEqual(layer.keys.shape[:3], layer.values.shape[:3])

  def test_generate_continue_from_past_key_values(self):
    """Generating on from a returned cache is generating in one go."""
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      whole = self._generate(model, inputs, max_new_tokens=2 * NEW_TOKENS,
                             min_new_tokens=2 * NEW_TOKENS)
      first = self._generate(model, inputs, return_dict_in_generate=True,
                             use_cache=True)
      sequence = first.sequences
      more = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                  past_key_values=first.past_key_values)
      if model.config.is_encoder_decoder:
        second = self._generate(model, inputs, decoder_input_ids=sequence,
                                **more)
      else:
        second = self._generate(
            model, {"input_ids": sequence,
                    "attention_mask": torch.ones_like(sequence)}, **more)
      torch.testing.assert_close(second, whole)

  def test_left_padding_compatibility(self):
    """A left-padded prompt's next-token scores are the unpadded ones'."""
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      input_ids = inputs["input_ids"]
      pad = torch.full((input_ids.shape[0], 3), model.config.pad_token_id)
      padded = {"input_ids": torch.cat([pad, input_ids], dim=1),
                "attention_mask": torch.cat(
                    [torch.zeros_like(pad), inputs["attention_mask"]], dim=1)}
      plain = self._generate(model, inputs, return_dict_in_generate=True,
                             output_scores=True)
      shifted = self._generate(model, padded, return_dict_in_generate=True,
                               output_scores=True)
      for a, b in zip(plain.scores, shifted.scores):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)

  def test_generate_from_inputs_embeds(self):
    """inputs_embeds in place of input_ids generate the same tokens."""
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      embeds = model.get_input_embeddings()(inputs["input_ids"])
      from_ids = self._generate(model, inputs)
      from_embeds = self._generate(
          model, {"inputs_embeds": embeds,
                  "attention_mask": inputs["attention_mask"]})
      if not model.config.is_encoder_decoder:  # only the new tokens
        from_ids = from_ids[:, inputs["input_ids"].shape[1]:]
      torch.testing.assert_close(from_embeds, from_ids)

  def test_assisted_decoding_matches_greedy_search(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      # One example: transformers' assisted decoding takes one.
      inputs = {k: v[:1] for k, v in inputs.items()}
      assistant = copy.deepcopy(model)
      assistant.generation_config.num_assistant_tokens = 2
      assisted = self._generate(model, inputs, assistant_model=assistant)
      torch.testing.assert_close(assisted,
                                 self._greedy_by_forward(model, inputs))

  def test_prompt_lookup_decoding_matches_greedy_search(self):
    for model_class in self.all_generative_model_classes:
      model, inputs = self._generation_setup(model_class)
      inputs = {k: v[:1] for k, v in inputs.items()}
      looked_up = self._generate(model, inputs, prompt_lookup_num_tokens=2)
      torch.testing.assert_close(looked_up,
                                 self._greedy_by_forward(model, inputs))
