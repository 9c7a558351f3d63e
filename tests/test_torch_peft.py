# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""PEFT's LoRA adapts the PyTorch model (issue 39), for every variant.

For every variant of the table (`attentions.VARIANTS`, the tiny models of
test_torch_training: the seq2seq model, each row's components in both
stacks, and the causal LM), LoRA on the attention projections `q` and `v`
(a decoder's cross-attention too; `q` where a layer has queries: the dot
product, D's shared query projection, cross-attention) and, where the
variant has one, D's and FD's first layer `w1`:

  * every such module of the model is adapted;
  * one optimizer step changes adapter weights (those of every `v` and `w1`)
    and nothing else;
  * `merge_and_unload()` gives the model's own class with the adapted
    model's logits (within 1e-5), which are not the base model's;
  * the adapter saved (`save_pretrained`) and loaded onto a new copy of the
    base model (`PeftModel.from_pretrained`) gives the adapted logits.

And where a mixture's fused path scales the query kernel's rows rather
than the queries (batch x length >= d_model), an adapted `q` is still
called: its delta is in the logits (those of the eager reference and of
the merged model) and its adapter gets gradients.
"""

import peft
import pytest
import torch

import tiny_models
from mtf_synthesizer import attentions

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
pytestmark = pytest.mark.usefixtures("one_thread")

# pylint: disable=protected-access

# LoRA's targets, by module name: the query and value projections, and D's
# and FD's first layer where the variant has one.
TARGETS = ("q", "v", "w1")
TOLERANCE = 1e-5
# Each head: its builder, its PEFT task and its class.
HEADS = {
    "seq2seq": (tiny_models.seq2seq, peft.TaskType.SEQ_2_SEQ_LM,
                "MtfSynthesizerForConditionalGeneration"),
    "causal_lm": (tiny_models.causal_lm, peft.TaskType.CAUSAL_LM,
                  "MtfSynthesizerForCausalLM"),
}


def _base(head, components):
  """A tiny model of `components` (the same weights at every call)."""
  return tiny_models.perturb(HEADS[head][0](components))


def _adapted(head, components):
  """The base model, its TARGETS adapted by LoRA of rank 4."""
  model = _base(head, components)
  names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
  config = peft.LoraConfig(
      task_type=HEADS[head][1], r=4, lora_alpha=8, lora_dropout=0.0,
      target_modules=[t for t in TARGETS if t in names])
  return peft.get_peft_model(model, config)


def _inputs(head):
  """A padded batch: a seq2seq model's inputs and labels, or a causal LM's."""
  input_ids, mask, labels = tiny_models.padded_inputs()
  if head == "causal_lm":
    labels = input_ids.masked_fill(mask == 0, -100)
  return dict(input_ids=input_ids, attention_mask=mask, labels=labels)


def _logits(model, inputs):
  with torch.no_grad():
    return model(**inputs).logits


@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_lora_trains_merges_and_reloads(variant, head, tmp_path):
  model = _adapted(head, variant.components)
  adapted = {name.split(".lora_B.")[0]
             for name, _ in model.get_base_model().named_parameters()
             if ".lora_B." in name}
  # Every target of the base model (q only where a layer has queries).
  base = _base(head, variant.components)
  assert adapted == {name for name, _ in base.named_modules()
                     if name.rsplit(".", 1)[-1] in TARGETS}
  assert any(name.endswith(".v") for name in adapted)
  has_w1 = any(name.endswith(".w1") for name in adapted)
  assert has_w1 == any("dense" in c for c in variant.components)
  inputs = _inputs(head)
  before = {n: p.detach().clone() for n, p in model.named_parameters()}
  optimizer = torch.optim.Adam(
      [p for p in model.parameters() if p.requires_grad], lr=1e-2)
  model.train()
  model(**inputs).loss.backward()
  optimizer.step()
  changed = {n for n, p in model.named_parameters()
             if not torch.equal(p, before[n])}
  assert changed and all(".lora_" in n for n in changed), sorted(changed)
  for name in adapted:
    if name.endswith((".v", ".w1")):
      assert any(n.endswith(name + ".lora_B.default.weight")
                 for n in changed), name

  model.eval()
  logits = _logits(model, inputs)
  with model.disable_adapter():
    unadapted = _logits(model, inputs)
  assert float((logits - unadapted).abs().max()) > 1e-3

  model.save_pretrained(str(tmp_path / "adapter"))
  reloaded = peft.PeftModel.from_pretrained(
      _base(head, variant.components), str(tmp_path / "adapter"))
  reloaded.eval()
  assert float((_logits(reloaded, inputs) - logits).abs().max()) <= TOLERANCE

  merged = model.merge_and_unload()
  assert type(merged).__name__ == HEADS[head][2]
  assert not any("lora_" in n for n, _ in merged.named_parameters())
  assert float((_logits(merged, inputs) - logits).abs().max()) <= TOLERANCE


def _mixture_inputs(head):
  """A batch whose rows (batch x length: 48, 40) outnumber d_model (32)."""
  input_ids = tiny_models.ids((4, 12), seed=5)
  if head == "causal_lm":
    return dict(input_ids=input_ids, labels=input_ids)
  return dict(input_ids=input_ids, labels=tiny_models.ids((4, 10), seed=6))


@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize(
    "variant", [v for v in VARIANTS
                if "dot_product" in v.components and len(v.components) > 1],
    ids=lambda v: v.label)
def test_adapted_queries_count_where_a_mixture_scales_the_query_kernel(
    variant, head):
  base = _base(head, variant.components)
  config = peft.LoraConfig(task_type=HEADS[head][1], r=4, lora_alpha=8,
                           lora_dropout=0.0, target_modules=["q"])
  model = peft.get_peft_model(base, config)
  generator = torch.Generator().manual_seed(7)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if ".lora_B." in name:  # LoRA starts as the identity: made a delta
        p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
  inputs = _mixture_inputs(head)
  model.train()
  loss = model(**inputs).loss
  loss.backward()
  self_attention = [(n, p) for n, p in model.named_parameters()
                    if "SelfAttention.q.lora_A" in n]
  assert self_attention
  for name, p in self_attention:
    assert p.grad is not None and float(p.grad.abs().max()) > 0, name
  model.eval()
  logits = _logits(model, inputs)
  base_model = model.get_base_model()
  base_model.config._attn_implementation = "eager"
  try:
    eager = _logits(model, inputs)
  finally:
    base_model.config._attn_implementation = "sdpa"
  with model.disable_adapter():
    unadapted = _logits(model, inputs)
  assert float((logits - unadapted).abs().max()) > 1e-3
  assert float((logits - eager).abs().max()) <= TOLERANCE
  merged = model.merge_and_unload()
  assert float((_logits(merged, inputs) - logits).abs().max()) <= TOLERANCE
