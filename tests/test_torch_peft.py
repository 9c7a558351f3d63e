# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""PEFT's LoRA adapts the PyTorch model (issue 39), for every variant.

For every variant of the table (`attentions.VARIANTS`, each row's components
in both stacks, the seq2seq model as test_torch_training builds it), LoRA on
the attention projections `q` and `v` (self- and cross-attention) and, where
the variant has one, D's and FD's first layer `w1`:

  * one optimizer step changes adapter weights (those of every `v` and `w1`)
    and nothing else;
  * `merge_and_unload()` gives the model's own class with the adapted
    model's logits (within 1e-5), which are not the base model's;
  * the adapter saved (`save_pretrained`) and loaded onto a new copy of the
    base model (`PeftModel.from_pretrained`) gives the adapted logits.
"""

import peft
import pytest
import torch

import test_torch_training as training
from test_torch_training import _one_thread  # pylint: disable=unused-import

# LoRA's targets, by module name: the query and value projections, and D's
# and FD's first layer where the variant has one.
TARGETS = ("q", "v", "w1")
TOLERANCE = 1e-5


def _adapted(components):
  """The tiny seq2seq model of `components`, its TARGETS adapted (rank 4)."""
  model = training._perturb(training._seq2seq(components))  # pylint: disable=protected-access
  names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
  config = peft.LoraConfig(
      task_type=peft.TaskType.SEQ_2_SEQ_LM, r=4, lora_alpha=8,
      lora_dropout=0.0, target_modules=[t for t in TARGETS if t in names])
  return peft.get_peft_model(model, config)


def _logits(model, inputs):
  input_ids, mask, labels = inputs
  with torch.no_grad():
    return model(input_ids=input_ids, attention_mask=mask,
                 labels=labels).logits


@pytest.mark.parametrize("variant", training.VARIANTS, ids=training.IDS)
def test_lora_trains_merges_and_reloads(variant, tmp_path):
  model = _adapted(variant.components)
  adapted = {name.rsplit(".", 1)[0] for name, _ in model.named_parameters()
             if ".lora_B." in name}
  expected = {t for t in TARGETS if t != "w1" or "dense" in
              " ".join(variant.components)}
  assert {name.split(".lora_B")[0].rsplit(".", 1)[-1] for name in adapted
         } == expected
  inputs = training._padded_inputs()  # pylint: disable=protected-access
  before = {n: p.detach().clone() for n, p in model.named_parameters()}
  optimizer = torch.optim.Adam(
      [p for p in model.parameters() if p.requires_grad], lr=1e-2)
  model.train()
  input_ids, mask, labels = inputs
  model(input_ids=input_ids, attention_mask=mask, labels=labels).loss.backward()
  optimizer.step()
  changed = {n for n, p in model.named_parameters()
             if not torch.equal(p, before[n])}
  assert changed and all(".lora_" in n for n in changed), sorted(changed)
  for name in adapted:  # every v's and w1's B moved
    if name.split(".lora_B")[0].endswith((".v", ".w1")):
      assert name + ".weight" in changed, name

  model.eval()
  logits = _logits(model, inputs)
  with model.disable_adapter():
    base = _logits(model, inputs)
  assert float((logits - base).abs().max()) > 1e-3

  model.save_pretrained(str(tmp_path / "adapter"))
  reloaded = peft.PeftModel.from_pretrained(
      training._perturb(training._seq2seq(variant.components)),  # pylint: disable=protected-access
      str(tmp_path / "adapter"))
  reloaded.eval()
  assert float((_logits(reloaded, inputs) - logits).abs().max()) <= TOLERANCE

  merged = model.merge_and_unload()
  assert type(merged).__name__ == "MtfSynthesizerForConditionalGeneration"
  assert not any("lora_" in n for n, _ in merged.named_parameters())
  assert float((_logits(merged, inputs) - logits).abs().max()) <= TOLERANCE
