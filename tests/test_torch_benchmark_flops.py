# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The benchmark's FLOP count and matmul peak, the two halves of its MFU.

`training_flops` counts a training step's matmuls from the dims; here it is
checked against torch's own count of the same step
(`torch.utils.flop_counter.FlopCounterMode`, which counts every matmul
dispatched, the backward's too, from the shapes it sees) for T5 and every
variant of the attention table, with and without T5's relative bias (Fix's
weights then need no gradient), and for the config fields the count reads.
The models run the eager attention (matmuls torch's counter knows; on a CPU
sdpa's kernel is not among them). The counts agree exactly but for FD's
outer product, an elementwise product the counter does not count (it
counts no elementwise operator); that term is left out of the comparison.
"""

import pytest
import torch
from torch.utils import flop_counter

from workbench.pytorch import benchmark
from workbench.pytorch import flops

# Inner width (heads x d_kv = 16) apart from d_model (32), the stacks of
# different depths and lengths (the decoder's shorter than N = 16): a term
# that confuses two of them is off.
DIMS = benchmark.Dims(
    d_model=32, num_heads=2, d_kv=8, d_ff=64, num_layers=1,
    num_decoder_layers=2, vocab_size=64, batch=2, input_length=16,
    target_length=8, new_tokens=4)
# Not a matmul: torch's counter does not see it.
ELEMENTWISE = ("factorized_dense_product",)


def _batch():
  generator = torch.Generator().manual_seed(0)
  return {"input_ids": torch.randint(2, 64, (2, 16), generator=generator),
          "attention_mask": torch.ones(2, 16, dtype=torch.long),
          "labels": torch.randint(2, 64, (2, 8), generator=generator)}


def _counted(model: torch.nn.Module) -> int:
  """torch's count of one training forward and backward."""
  with flop_counter.FlopCounterMode(display=False) as counter:
    model(**_batch(), use_cache=False).loss.backward()
  return counter.get_total_flops()


def _matmuls(terms):
  return sum(v for k, v in terms.items() if k not in ELEMENTWISE)


@pytest.mark.parametrize("relative_bias", [True, False])
@pytest.mark.parametrize("label", benchmark.model_labels())
def test_training_flops_agree_with_torch_flop_counter(label, relative_bias):
  components = dict(benchmark.variants()).get(label, ())
  model = benchmark.build_model(label, DIMS, "eager",
                                relative_bias=relative_bias)
  terms = flops.training_flops(DIMS, components, model.config)
  assert _matmuls(terms) == _counted(model), terms
  # The elementwise term is FD's alone, and small at these dims.
  has_product = "factorized_dense" in components
  product = terms.get("factorized_dense_product", 0)
  assert (product > 0) == has_product
  assert product < 0.01 * sum(terms.values())


def test_t5_and_v_have_the_same_count():
  """The same math: transformers' T5 and the Synthesizer's dot product."""
  counts = []
  for label in (benchmark.T5, benchmark.V):
    model = benchmark.build_model(label, DIMS, "eager")
    counts.append(flops.training_flops(
        DIMS, dict(benchmark.variants()).get(label, ()),
        model.config))
  assert counts[0] == counts[1]


# Fields of the config that the count reads, away from the benchmark's
# defaults: (functions, fields).
OPTIONS = [
    (("dot_product",), {"num_memory_heads": 1,
                        "feed_forward_proj": "gated-gelu"}),
    (("dense", "dot_product"), {"dense_share_query_projection": True}),
    (("dense",), {"dense_hidden_size": 5}),
    (("factorized_dense",), {"dense_hidden_size": 5,
                             "factorized_dense_factors": (2, 8)}),
    (("factorized_random",), {"factorized_random_k": 3}),
]


@pytest.mark.parametrize("functions,fields", OPTIONS)
def test_training_flops_follow_the_config(functions, fields):
  modeling = benchmark.load_model_code()
  settings = dict(
      vocab_size=DIMS.vocab_size, d_model=DIMS.d_model, d_kv=DIMS.d_kv,
      d_ff=DIMS.d_ff, num_layers=DIMS.num_layers,
      num_decoder_layers=DIMS.num_decoder_layers, num_heads=DIMS.num_heads,
      synthesizer_max_length=DIMS.max_length, feed_forward_proj="relu",
      pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
  settings.update(fields)
  config = modeling.MtfSynthesizerConfig(encoder_synthesizers=functions,
                                         decoder_synthesizers=functions,
                                         **settings)
  torch.manual_seed(0)
  # pylint: disable-next=protected-access
  model = modeling.MtfSynthesizerForConditionalGeneration._from_config(
      config, attn_implementation="eager").train()
  terms = flops.training_flops(DIMS, functions, model.config)
  assert _matmuls(terms) == _counted(model), terms


def test_an_unknown_function_is_refused():
  with pytest.raises(ValueError, match="no FLOP count"):
    flops.training_flops(DIMS, ("nope",), None)


def test_matmul_peak_times_a_square_matmul():
  peak = benchmark.matmul_peak(torch.device("cpu"), size=64, repeats=2)
  assert peak["size"] == 64 and peak["dtype"] == "float32"
  assert peak["seconds"] > 0
  assert peak["flops_per_s"] == pytest.approx(2 * 64**3 / peak["seconds"])
