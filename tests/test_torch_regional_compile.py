# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Compiled block by block, the blocks compile once whatever the depth.

`compile_blocks` (workbench/pytorch/measure.py, the benchmark's
`--compile --compile_scope blocks`) compiles each repeated block in place.
For every variant of the table:

- a training step of a seq2seq model with labels, as the benchmark runs
  it (`use_cache=False`), traces one graph for its encoder blocks and one
  for its decoder blocks, however many blocks each stack has, with
  `fullgraph=True` (no graph break);
- greedy static-cache `generate()` traces as many graphs two blocks deep
  as one block deep, and decodes the tokens of the model uncompiled: the
  cache, reached by each layer's own index (which dynamo would specialize
  on, one graph per layer), is read and written outside the graphs.
"""

import pytest
import torch
from torch import _dynamo

import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling
from workbench.pytorch import measure

VARIANTS = attentions.VARIANTS
IDS = [v.label for v in VARIANTS]

pytestmark = pytest.mark.usefixtures("one_thread")


def _recording_backend(graphs):
  """A torch.compile backend that keeps each graph and runs it as is."""

  def backend(graph_module, example_inputs):
    del example_inputs
    graphs.append(graph_module)
    return graph_module.forward

  return backend


def _training_graphs(components, depth):
  """Graphs dynamo traces for one training step, blocks compiled."""
  graphs = []
  model = tiny_models.random_model(modeling, components, num_layers=depth,
                                   num_decoder_layers=depth).train()
  _dynamo.reset()
  compiled = measure.compile_blocks(model, backend=_recording_backend(graphs),
                                    fullgraph=True)
  assert compiled == 2 * depth
  generator = torch.Generator().manual_seed(0)
  vocab = tiny_models.RANDOM_MODEL_VOCAB
  input_ids = torch.randint(2, vocab, (2, 7), generator=generator)
  labels = torch.randint(2, vocab, (2, 5), generator=generator)
  out = model(input_ids=input_ids, labels=labels, use_cache=False)
  out.loss.backward()
  _dynamo.reset()
  assert torch.isfinite(out.loss)
  return len(graphs)


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_training_step_traces_one_graph_per_stack_at_any_depth(variant):
  assert _training_graphs(variant.components, 1) == 2
  assert _training_graphs(variant.components, 2) == 2


def _decoding(components, depth):
  """(graphs traced, tokens compiled, tokens uncompiled) of generate()."""
  model = tiny_models.random_model(modeling, components, num_layers=depth,
                                   num_decoder_layers=depth)
  generator = torch.Generator().manual_seed(1)
  input_ids = torch.randint(2, tiny_models.RANDOM_MODEL_VOCAB, (2, 7),
                            generator=generator)
  mask = torch.ones_like(input_ids)
  mask[1, -2:] = 0
  settings = dict(input_ids=input_ids, attention_mask=mask, max_new_tokens=4,
                  do_sample=False, eos_token_id=None,
                  cache_implementation="static", disable_compile=True)
  with torch.no_grad():
    want = model.generate(**settings)
    graphs = []
    _dynamo.reset()
    measure.compile_blocks(model, backend=_recording_backend(graphs))
    got = model.generate(**settings)
  _dynamo.reset()
  return len(graphs), got, want


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_static_cache_decoding_traces_as_many_graphs_at_any_depth(variant):
  shallow, got, want = _decoding(variant.components, 1)
  assert torch.equal(got, want)
  deep, got, want = _decoding(variant.components, 2)
  assert torch.equal(got, want)
  assert deep == shallow
