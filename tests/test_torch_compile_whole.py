# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The whole model compiled by inductor trains on eager's gradients.

`torch.compile(model, fullgraph=True)` with inductor, as transformers'
`test_torch_compile_for_training` compiles a model (and the benchmark's
default `--compile_scope model`), for every variant of the table and both
heads: one training step of a tiny model (one block a stack, dropout 0)
on a padded batch whose padded queries see no key (left padding, their
labels kept), against the eager step: the same loss, and every parameter's
gradient within 1e-5 of the largest.

inductor's C++ compiler may reassociate here
(`cpp.enable_unsafe_math_opt_flag`): a gradient that depends on how a sum
rounds (a masked logit `floor + x` tying with the floor, under a clamp)
then differs from eager's on any host, not only on a host whose compiler
happens to round otherwise. The masks are selected after the sum
(`attention_mtf_synthesizer.masked_bias`), so nothing a masked position
computes reaches a gradient. Regional compilation (block by block) has its
own test (test_torch_regional_compile.py).
"""

import pytest
import torch
from torch import _dynamo
from torch._inductor import config as inductor_config

import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]
HEADS = ("seq2seq", "causal_lm")
TOLERANCE = 1e-5
# inductor's settings for the test: its C++ compiler may reassociate (see
# the module's docstring). The rest make compiling faster on a CPU (docs/
# pytorch.md gives the figures): one compiling thread (no pool of workers
# to start), each graph's kernels and wrapper in one C++ file
# (`cpp_wrapper`: one compiler call a graph instead of one a kernel), and
# scalar loops (`cpp.simdlen=1`: smaller kernels, generated and compiled
# faster).
INDUCTOR = {"cpp.enable_unsafe_math_opt_flag": True, "compile_threads": 1,
            "cpp_wrapper": True, "cpp.simdlen": 1}

# Twenty models compiled (minutes): scheduled with the long modules.
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]


def _batch(head):
  """Inputs and labels of two sequences, the second left-padded.

  The padded queries see no key (causal, or the decoder's own padding)
  and keep their labels, so that a row with every key masked carries a
  gradient.

  Args:
    head: "seq2seq" or "causal_lm".

  Returns:
    The model's keyword arguments.
  """
  generator = torch.Generator().manual_seed(0)
  vocab = tiny_models.RANDOM_MODEL_VOCAB
  ids = torch.randint(2, vocab, (2, 8), generator=generator)
  mask = torch.ones_like(ids)
  mask[1, :3] = 0
  ids[1, :3] = 0
  if head == "causal_lm":
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.clone()}
  labels = torch.randint(2, vocab, (2, 5), generator=generator)
  decoder_mask = torch.ones_like(labels)
  decoder_mask[1, :2] = 0
  return {"input_ids": ids, "attention_mask": mask, "labels": labels,
          "decoder_attention_mask": decoder_mask}


def _step(model, call, batch):
  """One training step's loss and gradients.

  Args:
    model: the model whose parameters' gradients are read.
    call: the model, or its compiled call.
    batch: `_batch`'s inputs and labels.

  Returns:
    (the loss, each parameter's gradient by name).
  """
  model.zero_grad(set_to_none=True)
  loss = call(**batch, use_cache=False).loss
  loss.backward()
  return float(loss.detach()), tiny_models.gradients(model)


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_compiled_training_step_equals_eager(variant, head):
  model = tiny_models.random_model(
      modeling, variant.components, head == "causal_lm", num_layers=1,
      num_decoder_layers=1).train()
  batch = _batch(head)
  expected_loss, expected = _step(model, model, batch)
  _dynamo.reset()
  with inductor_config.patch(INDUCTOR):
    compiled = torch.compile(model, backend="inductor", fullgraph=True)
    loss, gradients = _step(model, compiled, batch)
  _dynamo.reset()
  assert abs(loss - expected_loss) <= TOLERANCE * max(abs(expected_loss), 1)
  tiny_models.assert_close_gradients(gradients, expected, TOLERANCE)
