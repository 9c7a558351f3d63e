# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The masks: selected after the sum, as transformers' sdpa integration does.

The stack builds one boolean mask (causal and padding) and the relative
bias apart; the attention sums the bias and the synthesized logits and
masks the sum last (`attention_mtf_synthesizer.masked_bias`), or hands the
mask and the bias to transformers' sdpa integration, which joins them the
same way (`create_position_bias_mask`). Checked here: what a masked
position computes reaches no gradient and no dtype's infinity; the model's
join equals transformers'; and what transformers' mask helpers give each
kernel, which is why the model builds its own boolean mask
(docs/pytorch.md, "What stays the Synthesizer's own").
"""

import pytest
import torch
from transformers import masking_utils
from transformers.integrations import sdpa_attention

import tiny_models
from mtf_synthesizer.hf_model import attention_mtf_synthesizer as attention
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

pytestmark = pytest.mark.usefixtures("one_thread")


def _mask():
  """[2, 1, 4, 4]: causal, the second example's first two keys padded."""
  mask = torch.ones(2, 1, 4, 4, dtype=torch.bool).tril()
  mask[1, ..., :2] = False
  return mask


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_masked_logit_reaches_no_gradient_and_no_infinity(dtype):
  mask = _mask()
  # A row of logits sitting at -40 (a shifted R table, D's output).
  logits = (torch.randn(1, 2, 4, 4, generator=torch.Generator().manual_seed(0))
            - 40).to(dtype).requires_grad_()
  masked = attention.masked_bias(logits, mask, dtype)
  assert masked.dtype == dtype and torch.isfinite(masked).all()
  assert (masked[~mask.expand_as(masked)] == torch.finfo(dtype).min).all()
  weights = torch.softmax(masked.float(), dim=-1)
  # The padded queries of the second example see no key: uniform.
  assert torch.equal(weights[1, :, :2], torch.full_like(weights[1, :, :2],
                                                        0.25))
  weights.square().sum().backward()
  keys_seen = mask.expand(2, 2, 4, 4).sum(0) > 0
  assert (logits.grad[0][~keys_seen] == 0).all()
  assert (logits.grad[0][keys_seen] != 0).any()
  # Added instead, the same row leaves float16: the mask of c1fc995.
  if dtype == torch.float16:
    added = logits.detach().float() + torch.where(
        mask, 0.0, torch.finfo(dtype).min)
    assert torch.isinf(added.to(dtype)).any()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_join_is_transformers_sdpa_join(dtype):
  mask = _mask()
  bias = torch.randn(1, 2, 4, 4).to(dtype)
  keys = torch.zeros(2, 2, 4, 8, dtype=dtype)
  theirs = sdpa_attention.create_position_bias_mask(bias, mask, False, keys,
                                                    keys)
  assert torch.equal(attention.masked_bias(bias, mask, dtype), theirs)


def test_transformers_mask_helpers_give_each_kernel_its_own_kind():
  """What `create_causal_mask` gives, by the config's implementation.

  sdpa: a boolean mask, or none where nothing is padded (causality is
  left to sdpa's `is_causal`); eager: an additive mask in the hidden
  states' dtype. One call of the model may run either kernel or none (a
  call with `output_attentions` runs the eager kernel under an sdpa
  config; R's, Fix's and FD's layers take the bias's softmax, no kernel),
  and an additive float16 mask is the sum that leaves the dtype: the
  model builds its boolean mask itself.
  """
  config = tiny_models.config(("random",), True, modeling)
  embeds = torch.zeros(2, 4, config.d_model, dtype=torch.float16)
  padded = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
  kinds = {}
  for implementation in ("sdpa", "eager"):
    config._attn_implementation = implementation
    for name, mask in (("unpadded", torch.ones_like(padded)),
                       ("padded", padded)):
      made = masking_utils.create_causal_mask(config, embeds, mask, None)
      kinds[implementation, name] = None if made is None else made.dtype
  assert kinds == {("sdpa", "unpadded"): None,
                   ("sdpa", "padded"): torch.bool,
                   ("eager", "unpadded"): torch.float16,
                   ("eager", "padded"): torch.float16}


def test_the_stacks_mask_is_boolean_and_the_bias_unmasked():
  model = tiny_models.random_model(modeling, ("random",), True)
  stack = model.model
  query = torch.arange(4)
  padded = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
  # pylint: disable-next=protected-access
  mask, biases = stack._self_attention_biases(query, 4, padded)
  assert torch.equal(mask, _mask())
  for bias in biases:
    assert bias.dtype == torch.float32 and torch.isfinite(bias).all()
