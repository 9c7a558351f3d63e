# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every variant gin file trains a tiny bitransformer through the stock CLI.

Checks that the checkpoint holds exactly the variables Table 1 implies, in
every self-attention layer of the encoder and the decoder, and that Fixed
Random has no optimizer slot.
"""

import os

import pytest
import tensorflow.compat.v1 as tf

import conftest
import mtf_synthesizer
from mtf_synthesizer import attentions
from mtf_synthesizer.core import reference as ref
from mtf_synthesizer.core import synthesizers

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

N = conftest.LENGTH  # SynthesizerAttention.max_length = sequence length
H, D_KV, D_MODEL = 2, 64, 32   # models/t5.1.1.tiny.gin

_PROJECTION = [D_MODEL, H * D_KV]


def _expected(kinds):
  """The layer's variables: Table 1's per function (from the reference),
  the layer's query and key projections where a function reads them, the
  value projection (v beside k, else the shared kv), o and the mixture's
  weights."""
  out = {"o": [H * D_KV, D_MODEL]}
  for kind in kinds:
    # The declared defaults: the variant files set no setting.
    out.update(ref.variable_shapes(kind, D_MODEL, H, D_KV, N))
  # As the variant files build them (default arguments).
  functions = [synthesizers.BY_NAME[kind]() for kind in kinds]
  if any(f.needs_queries for f in functions):
    out["q"] = _PROJECTION
  if any(f.needs_keys for f in functions):
    out["k"] = out["v"] = _PROJECTION
  else:
    out["kv"] = _PROJECTION
  if len(kinds) > 1:
    out["mixture/alpha_logits"] = [len(kinds), H]
  return out


VARIANTS = {v.name: _expected(v.components) for v in attentions.VARIANTS}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_trains_with_table_1_variables(trained_models, variant):
  model_dir, proc = trained_models[variant]
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Loss for final step" in proc.stderr
  names = dict(tf.train.list_variables(model_dir))
  for layer in ("encoder/block_000/layer_000", "decoder/block_000/layer_000",
                "encoder/block_001/layer_000", "decoder/block_001/layer_000"):
    scope = layer + "/SynthesizerAttention/"
    got = {n[len(scope):]: s for n, s in names.items()
           if n.startswith(scope) and "_slot_" not in n}
    expected = dict(VARIANTS[variant])
    if "block_000" in layer:  # T5's bias_shared: held by the first layer
      expected["relative_attention_bias"] = [H, 32]
    assert got == expected, layer
    assert not any(n.startswith(layer + "/SelfAttention/") for n in names)
  slots = [n for n in names if "_slot_" in n]
  assert any("SynthesizerAttention/o_slot" in n for n in slots)
  for component in attentions.get(variant).components:
    if not synthesizers.BY_NAME[component].trainable:  # no update, no slot
      assert not any("SynthesizerAttention/%s/" % component in n
                     for n in slots), component


def test_every_variant_gin_file_is_tested():
  gin_dir = os.path.join(mtf_synthesizer.GIN_DIR, "synthesizer")
  files = {f[:-4] for f in os.listdir(gin_dir)
           if f.endswith(".gin") and not f.startswith("_")
           } - set(attentions.EXTRA_GIN_FILES)
  assert files == set(VARIANTS) == set(conftest.VARIANTS)


def test_runs_without_graph_files_have_none(trained_models):
  """MTF_SYNTH_GRAPH_FILES=0 (conftest.py): variables and state file only."""
  for name, (model_dir, result) in sorted(trained_models.items()):
    assert result.returncode == 0, (name, result.output[-2000:])
    files = os.listdir(model_dir)
    assert "checkpoint" in files and "graph.pbtxt" not in files, (name, files)
    assert not [f for f in files if f.endswith(".meta")], (name, files)
