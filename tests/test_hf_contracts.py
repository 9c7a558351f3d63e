# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The contracts every transformers model keeps, for every variant.

Written from transformers' documented behaviour (the checklist its
model-testing mixins apply to a new model), at tiny sizes, for every row of
the paper's table (`attentions.VARIANTS`) and both heads:

  * `save_pretrained` / `from_pretrained` give the same model (every config
    field written; safetensors; `dtype` on load), through the Auto classes
    without `trust_remote_code` once `mtf_synthesizer.hf_model` is imported,
    and, where the package is absent, with it, saved by
    `mtf_synthesizer.hf_tools.saving.save_pretrained` (the code travels
    with the weights);
  * `output_attentions`, `output_hidden_states`, `return_dict` and
    `use_cache` from the call or from the config; the returned tensors are
    the ones the graph used (gradients reach them);
  * transformers 5's loss arguments: `shift_labels` and
    `num_items_in_batch`, or a clear error where one cannot apply;
  * `generate()`'s modes equal their definitions: greedy and sampling as
    step-by-step loops over the model's logits, beam search's best
    sequence and score, assisted and prompt-lookup decoding as greedy;
    generation from `inputs_embeds`.
"""

import inspect
import json
import os
import re
import subprocess

import pytest
import torch
import transformers

import conftest
import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling
from mtf_synthesizer.hf_tools import saving

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
VOCAB, N = tiny_models.RANDOM_MODEL_VOCAB, tiny_models.N
HEADS = ("seq2seq", "causal_lm")
pytestmark = pytest.mark.usefixtures("one_thread")


def _model(variant, head, seed=0, **fields):
  """A tiny model of the variant, every weight random (biases included)."""
  return tiny_models.random_model(modeling, variant.components,
                                  head == "causal_lm", seed, **fields)


def _ids(shape, seed, low=2):
  return tiny_models.ids(shape, seed, low, VOCAB)


def _inputs(head, seed=0):
  """A batch of 2 (the seq2seq's encoder inputs padded in row 1)."""
  if head == "causal_lm":
    ids = _ids((2, 7), seed)
    ids[:, 0] = 0
    return {"input_ids": ids}
  input_ids = _ids((2, 7), seed)
  input_ids[1, -2:] = 0
  return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long(),
          "decoder_input_ids": _ids((2, 5), seed + 1)}


def _fields(config):
  """A config's fields but where it was loaded from."""
  fields = config.to_dict()
  fields.pop("_name_or_path", None)
  return fields


def _max_difference(a, b):
  return float((a - b).abs().max())


# ---------------------------------------------------------------------------
# Save and reload.


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_save_and_reload_is_the_same_model(variant, head, tmp_path):
  model = _model(variant, head)
  inputs = _inputs(head)
  with torch.no_grad():
    expected = model(**inputs).logits
  model.save_pretrained(tmp_path)
  assert os.path.exists(tmp_path / "model.safetensors")
  auto = (transformers.AutoModelForCausalLM if head == "causal_lm"
          else transformers.AutoModelForSeq2SeqLM)
  reloaded, info = auto.from_pretrained(tmp_path, output_loading_info=True)
  assert type(reloaded) is type(model)
  assert not any(info.values()), info
  assert _fields(reloaded.config) == _fields(model.config)
  with torch.no_grad():
    assert torch.equal(reloaded.eval()(**inputs).logits, expected)
  for argument in ("dtype", "torch_dtype"):
    half = auto.from_pretrained(tmp_path, **{argument: torch.bfloat16})
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
    with torch.no_grad():
      logits = half.eval()(**inputs).logits.float()
    assert _max_difference(logits, expected) < 0.1 * float(
        expected.abs().max())


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_base_model_saves_and_reloads_through_auto_model(variant, tmp_path):
  """MtfSynthesizerModel (no output layer) through AutoModel."""
  seq2seq = _model(variant, "seq2seq")
  base = seq2seq.model
  inputs = _inputs("seq2seq")
  with torch.no_grad():
    expected = base(**inputs).last_hidden_state
  base.save_pretrained(tmp_path)
  reloaded = transformers.AutoModel.from_pretrained(tmp_path).eval()
  assert type(reloaded) is type(base)
  with torch.no_grad():
    assert torch.equal(reloaded(**inputs).last_hidden_state, expected)


def test_every_config_field_is_written(tmp_path):
  """A field is written even where it equals PretrainedConfig's default."""
  config = tiny_models.config(("dot_product",), True, modeling,
                              tie_word_embeddings=True)
  config.save_pretrained(tmp_path)
  with open(tmp_path / "config.json") as f:
    written = json.load(f)
  assert written["is_encoder_decoder"] is False
  assert written["tie_word_embeddings"] is True
  reloaded = transformers.AutoConfig.from_pretrained(tmp_path)
  assert type(reloaded) is type(config)
  assert _fields(reloaded) == _fields(config)


_LOAD_WITHOUT_PACKAGE = """
import json, sys
import torch, transformers
directory, head = sys.argv[1:3]
auto = (transformers.AutoModelForCausalLM if head == "causal_lm"
        else transformers.AutoModelForSeq2SeqLM)
model = auto.from_pretrained(directory, trust_remote_code=True).eval()
inputs = {k: torch.tensor(v) for k, v in json.loads(sys.argv[3]).items()}
with torch.no_grad():
  logits = model(**inputs).logits
torch.save(logits, directory + "/side_logits.pt")
print(type(model).__module__,
      any(m.startswith(("mtf_synthesizer", "tensorflow")) for m in sys.modules))
"""


@pytest.mark.parametrize("head", HEADS)
def test_saved_model_loads_without_the_package(head, tmp_path):
  """The saved directory carries its code: trust_remote_code loads it."""
  variant = attentions.get("D+V")
  model = _model(variant, head)
  inputs = _inputs(head)
  with torch.no_grad():
    expected = model(**inputs).logits
  saving.save_pretrained(model, tmp_path / "model")
  with open(tmp_path / "model" / "config.json") as f:
    assert json.load(f)["auto_map"]["AutoConfig"] == (
        "configuration_mtf_synthesizer.MtfSynthesizerConfig")
  for code in os.listdir(os.path.join(conftest.REPO, "mtf_synthesizer",
                                      "hf_model")):
    if code.endswith(".py") and code != "__init__.py":
      assert os.path.exists(tmp_path / "model" / code), code
  script = tmp_path / "load.py"
  script.write_text(_LOAD_WITHOUT_PACKAGE)
  proc = subprocess.run(
      conftest.pytorch_python(tmp_path) + [
          str(script), str(tmp_path / "model"), head,
          json.dumps({k: v.tolist() for k, v in inputs.items()})],
      capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  module, imported_package = proc.stdout.split()[-2:]
  assert module.startswith("transformers_modules"), module
  assert imported_package == "False"
  logits = torch.load(tmp_path / "model" / "side_logits.pt")
  # Another process (other thread counts): the same within float rounding.
  assert _max_difference(logits, expected) <= 1e-5 * float(
      expected.abs().max())


# ---------------------------------------------------------------------------
# Outputs: flags from the call or the config, tuples, the graph's tensors.


def _outputs(model, head, **flags):
  return model(**_inputs(head), **flags)


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_output_flags_from_the_call_or_the_config(variant, head):
  model = _model(variant, head)
  attention_fields = (("attentions",) if head == "causal_lm" else
                      ("encoder_attentions", "decoder_attentions",
                       "cross_attentions"))
  hidden_fields = (("hidden_states",) if head == "causal_lm" else
                   ("encoder_hidden_states", "decoder_hidden_states"))
  with torch.no_grad():
    plain = _outputs(model, head)
    for field in attention_fields + hidden_fields:
      assert getattr(plain, field) is None, field
    by_call = _outputs(model, head, output_attentions=True,
                       output_hidden_states=True)
    # transformers allows config.output_attentions with eager attention only
    # (a call's output_attentions runs the eager kernel for that call).
    model.set_attn_implementation("eager")
    model.config.output_hidden_states = True
    model.config.output_attentions = True
    by_config = _outputs(model, head)
    off_by_call = _outputs(model, head, output_attentions=False,
                           output_hidden_states=False)
  for field in attention_fields:
    assert len(getattr(by_call, field)) == 2, field
    for a, b in zip(getattr(by_call, field), getattr(by_config, field)):
      assert torch.equal(a, b)
  for field in hidden_fields:
    assert len(getattr(by_call, field)) == 3, field  # 2 blocks + output
    for a, b in zip(getattr(by_call, field), getattr(by_config, field)):
      assert torch.equal(a, b)
  for field in attention_fields + hidden_fields:
    assert getattr(off_by_call, field) is None, field


def test_selected_hidden_states_count_from_each_stacks_own_end():
  """Indices select each stack's hidden states, negative from its end.

  An encoder of 2 blocks and a decoder of 3: transformers would resolve -1
  against num_hidden_layers (the decoder's) for both.
  """
  model = _model(VARIANTS[0], "seq2seq", num_decoder_layers=3)
  with torch.no_grad():
    every = _outputs(model, "seq2seq", output_hidden_states=True)
    selected = _outputs(model, "seq2seq", output_hidden_states=[0, -1])
  for field, count in (("encoder_hidden_states", 3),
                       ("decoder_hidden_states", 4)):
    kept, full = getattr(selected, field), getattr(every, field)
    assert len(kept) == len(full) == count, field
    assert torch.equal(kept[0], full[0]) and torch.equal(kept[-1], full[-1])
    assert all(h is None for h in kept[1:-1]), field


@pytest.mark.parametrize("head", HEADS)
def test_keyword_arguments_the_model_cannot_honour_raise(head):
  """transformers' keyword arguments: the ones a head honours pass, the
  others (and unknown names) raise rather than being dropped."""
  model = _model(VARIANTS[0], head)
  honoured = set(inspect.signature(model.forward).parameters)
  with torch.no_grad():
    _outputs(model, head, cache_position=None, output_attentions=False)
    for name in transformers.utils.TransformersKwargs.__annotations__:
      if name in honoured:
        continue
      with pytest.raises(TypeError, match=name):
        _outputs(model, head, **{name: 1})
    with pytest.raises(TypeError, match="not_an_argument"):
      _outputs(model, head, not_an_argument=1)


@pytest.mark.parametrize("shared_embedding", [True, False])
@pytest.mark.parametrize("tie_word_embeddings", [True, False])
def test_ties_are_the_configs(tie_word_embeddings, shared_embedding,
                              tmp_path):
  """Each tie's source exists, tied weights are one tensor, and stay so.

  Tied: the output layer with the input embedding (tie_word_embeddings);
  the encoder's and decoder's embeddings with the shared one
  (shared_embedding with tie_word_embeddings, as transformers ties).
  """
  for head in HEADS:
    model = _model(VARIANTS[0], head, tie_word_embeddings=tie_word_embeddings,
                   shared_embedding=shared_embedding)
    params = dict(model.named_parameters(remove_duplicate=False))
    ties = model.all_tied_weights_keys
    expected = set()
    if tie_word_embeddings and (shared_embedding or head == "causal_lm"):
      expected.add("lm_head.weight")
      if head == "seq2seq":
        expected |= {"model.encoder.embed_tokens.weight",
                     "model.decoder.embed_tokens.weight"}
    assert set(ties) == expected, (head, ties)
    for target, source in ties.items():
      assert params[target] is params[source], (target, source)
    model.save_pretrained(tmp_path / head)
    loaded = type(model).from_pretrained(tmp_path / head).eval()
    with torch.no_grad():
      assert torch.equal(_outputs(model, head).logits,
                         _outputs(loaded, head).logits)
    assert ((loaded.lm_head.weight is loaded.get_input_embeddings().weight)
            == ("lm_head.weight" in expected))


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_return_dict_false_gives_the_tuple(variant, head):
  model = _model(variant, head)
  inputs = _inputs(head)
  labels = _ids(inputs["input_ids"].shape if head == "causal_lm"
                else inputs["decoder_input_ids"].shape, 9)
  with torch.no_grad():
    as_dict = model(**inputs, labels=labels, output_attentions=True)
    as_tuple = model(**inputs, labels=labels, output_attentions=True,
                     return_dict=False)
    model.config.return_dict = False
    by_config = model(**inputs, labels=labels, output_attentions=True)
  for out in (as_tuple, by_config):
    assert isinstance(out, tuple)
    assert torch.equal(out[0], as_dict.loss)
    assert torch.equal(out[1], as_dict.logits)
    # The cache, then each output tuple, in the ModelOutput's order.
    expected = [v for v in as_dict.values()]
    assert len(out) == len(expected)
  # The base model too.
  if head == "seq2seq":
    with torch.no_grad():
      base = model.model(**inputs, return_dict=False)
    assert isinstance(base, tuple)
    assert torch.equal(base[0], as_dict.logits.new_tensor(base[0]))


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_use_cache_from_the_call_or_the_config(variant, head):
  model = _model(variant, head)
  inputs = _inputs(head)
  with torch.no_grad():
    assert model(**inputs).past_key_values is not None  # config default
    assert model(**inputs, use_cache=False).past_key_values is None
    model.config.use_cache = False
    assert model(**inputs).past_key_values is None
    assert model(**inputs, use_cache=True).past_key_values is not None


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_returned_tensors_are_the_graphs_own(variant, head):
  """retain_grad() on a returned hidden state or weight gets a gradient."""
  model = _model(variant, head)
  out = _outputs(model, head, output_attentions=True,
                 output_hidden_states=True)
  if head == "causal_lm":
    kept = {"hidden_states": out.hidden_states[0],
            "attentions": out.attentions[0]}
  else:
    kept = {"encoder_hidden_states": out.encoder_hidden_states[0],
            "encoder_attentions": out.encoder_attentions[0],
            "decoder_hidden_states": out.decoder_hidden_states[0],
            "decoder_attentions": out.decoder_attentions[0],
            "cross_attentions": out.cross_attentions[0]}
  for tensor in kept.values():
    tensor.retain_grad()
  out.logits.square().sum().backward()
  for name, tensor in kept.items():
    assert tensor.grad is not None, name
    assert float(tensor.grad.abs().sum()) > 0, name


# ---------------------------------------------------------------------------
# Loss arguments.


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_causal_lm_shift_labels_and_num_items(variant):
  model = _model(variant, "causal_lm")
  ids = _inputs("causal_lm")["input_ids"]
  labels = ids.clone()
  labels[0, 3] = -100
  with torch.no_grad():
    by_labels = model(input_ids=ids, labels=labels)
    shifted = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], -100)],
                        dim=1)
    by_shift = model(input_ids=ids, shift_labels=shifted)
    # The independent sum: cross entropy of each kept target.
    log_p = torch.log_softmax(by_labels.logits[:, :-1].double(), -1)
    targets = labels[:, 1:]
    keep = targets != -100
    picked = log_p.gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    total = float(-(picked * keep).sum())
    count = int(keep.sum())
    by_count = model(input_ids=ids, labels=labels, num_items_in_batch=3 * count)
  assert abs(float(by_labels.loss) - total / count) < 1e-5
  assert abs(float(by_shift.loss) - total / count) < 1e-5
  assert abs(float(by_count.loss) - total / (3 * count)) < 1e-5
  # Given both, the loss is shift_labels' (transformers' causal LMs: its
  # Trainer passes both where the sequence is split across devices).
  with torch.no_grad():
    by_both = model(input_ids=ids, labels=ids, shift_labels=shifted)
  assert abs(float(by_both.loss) - total / count) < 1e-5


def test_seq2seq_num_items_and_what_cannot_apply():
  model = _model(attentions.get("D+V"), "seq2seq")
  inputs = _inputs("seq2seq")
  del inputs["decoder_input_ids"]
  labels = _ids((2, 5), 4)
  labels[1, -2:] = -100
  with torch.no_grad():
    mean = model(**inputs, labels=labels).loss
    by_count = model(**inputs, labels=labels, num_items_in_batch=16)
  assert abs(float(by_count.loss) - float(mean) * 8 / 16) < 1e-5
  with pytest.raises(TypeError, match="shift_labels"):
    model(**inputs, labels=labels, shift_labels=labels)
  model.config.loss_denominator = "positions"
  assert not model.accepts_loss_kwargs
  with pytest.raises(ValueError, match="num_items_in_batch"):
    model(**inputs, labels=labels, num_items_in_batch=16)
  model.config.loss_denominator = "tokens"
  assert model.accepts_loss_kwargs


# ---------------------------------------------------------------------------
# generate(): each mode equals its definition.


def _prompt(head):
  if head == "causal_lm":
    ids = _ids((1, 4), 3)
    ids[:, 0] = 0
    return {"input_ids": ids}
  return {"input_ids": _ids((1, 6), 3)}


def _step_logits(model, head, prompt, sequence):
  """The next-token logits after `sequence` (full pass, no cache)."""
  if head == "causal_lm":
    return model(input_ids=sequence, use_cache=False).logits[:, -1]
  return model(**prompt, decoder_input_ids=sequence,
               use_cache=False).logits[:, -1]


def _start(model, head, prompt):
  if head == "causal_lm":
    return prompt["input_ids"]
  return torch.full((1, 1), model.config.decoder_start_token_id)


def _new_tokens(head, sequence, prompt):
  width = prompt["input_ids"].shape[1] if head == "causal_lm" else 1
  return sequence[:, width:]


NEW = 5


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_greedy_and_sampling_equal_their_loops(variant, head):
  model = _model(variant, head)
  model.generation_config.eos_token_id = None  # always NEW tokens
  prompt = _prompt(head)
  with torch.no_grad():
    greedy = model.generate(**prompt, do_sample=False, max_new_tokens=NEW)
    torch.manual_seed(7)
    sampled = model.generate(**prompt, do_sample=True, top_k=0, top_p=1.0,
                             temperature=0.7, max_new_tokens=NEW)
    # The definitions, step by step over full passes.
    argmax = sample = _start(model, head, prompt)
    for _ in range(NEW):
      argmax = torch.cat([argmax, _step_logits(
          model, head, prompt, argmax).argmax(-1, keepdim=True)], dim=1)
    torch.manual_seed(7)
    for _ in range(NEW):
      probs = torch.softmax(
          _step_logits(model, head, prompt, sample).float() / 0.7, -1)
      sample = torch.cat([sample, torch.multinomial(probs, 1)], dim=1)
  assert torch.equal(greedy, argmax)
  assert torch.equal(sampled, sample)


def _log_prob(model, head, prompt, new_tokens):
  """log p(new_tokens | prompt), summed, by one full pass."""
  sequence = torch.cat([_start(model, head, prompt), new_tokens], dim=1)
  if head == "causal_lm":
    logits = model(input_ids=sequence, use_cache=False).logits
  else:
    logits = model(**prompt, decoder_input_ids=sequence,
                   use_cache=False).logits
  width = sequence.shape[1] - new_tokens.shape[1]
  log_p = torch.log_softmax(logits[:, width - 1:-1].float(), -1)
  return float(log_p.gather(-1, new_tokens[..., None]).sum())


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_beam_search_finds_the_likeliest_sequence(variant, head):
  """With as many beams as tokens, 2 steps are searched exhaustively."""
  model = _model(variant, head)
  model.generation_config.eos_token_id = None
  prompt = _prompt(head)
  with torch.no_grad():
    beams = model.generate(**prompt, num_beams=VOCAB, max_new_tokens=2,
                           length_penalty=0.0, early_stopping=True,
                           output_scores=True, return_dict_in_generate=True)
    found = _new_tokens(head, beams.sequences, prompt)
    best = _log_prob(model, head, prompt, found)
    # Every two-token continuation, scored by full passes.
    start = _start(model, head, prompt)
    first = torch.log_softmax(
        _step_logits(model, head, prompt, start).float(), -1)[0]
    top = max(float(first[a]) + float(torch.log_softmax(_step_logits(
        model, head, prompt, torch.cat([start, torch.tensor([[a]])], 1)
    ).float(), -1).max()) for a in range(VOCAB))
  assert abs(float(beams.sequences_scores[0]) - best) < 1e-4
  assert abs(best - top) < 1e-4


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_assisted_and_prompt_lookup_decoding_equal_greedy(variant, head):
  model = _model(variant, head)
  assistant = _model(attentions.get("V"), head, seed=5, num_layers=1)
  for m in (model, assistant):
    m.generation_config.eos_token_id = None
  prompt = _prompt(head)
  with torch.no_grad():
    greedy = model.generate(**prompt, do_sample=False, max_new_tokens=NEW)
    assisted = model.generate(**prompt, do_sample=False, max_new_tokens=NEW,
                              assistant_model=assistant)
    lookup = model.generate(**prompt, do_sample=False, max_new_tokens=NEW,
                            prompt_lookup_num_tokens=2)
  assert torch.equal(assisted, greedy)
  assert torch.equal(lookup, greedy)


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_generate_from_inputs_embeds(variant, head):
  model = _model(variant, head)
  model.generation_config.eos_token_id = None
  prompt = _prompt(head)
  embeds = model.get_input_embeddings()(prompt["input_ids"])
  with torch.no_grad():
    by_ids = model.generate(**prompt, do_sample=False, max_new_tokens=NEW)
    by_embeds = model.generate(inputs_embeds=embeds, do_sample=False,
                               max_new_tokens=NEW)
  # A causal LM returns only the new tokens when given embeddings.
  assert torch.equal(by_embeds, _new_tokens(head, by_ids, prompt)
                     if head == "causal_lm" else by_ids)


def test_docs_name_tests_that_exist():
  """docs/pytorch.md's table of features names tests that are defined."""
  with open(os.path.join(conftest.REPO, "docs", "pytorch.md")) as f:
    text = f.read()
  section = text[text.index("## What transformers expects of a model"):]
  section = section[:section.index("\n## ", 1)]
  module = None
  named = []
  for reference in re.findall(r"`((?:tests/)?test_\w+\.py)?(::\w+)`",
                              section):
    module = os.path.basename(reference[0]) if reference[0] else module
    named.append((module, reference[1][2:]))
  assert len(named) >= 20, named
  for module, name in named:
    with open(os.path.join(conftest.REPO, "tests", module)) as f:
      assert re.search(r"^def %s\(" % name, f.read(), re.M), (module, name)
