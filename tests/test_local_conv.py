# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""DecodableLocalConvAttnBlock: mesh's convolution block, decoding as it
trains; and the convolution baseline files' decoders.

Small mesh graphs built in process (decode_harness.py): a two-block language
model with random weights, and the tiny T5 of each baseline file.
"""

import os

import gin
import mesh_tensorflow.transformer
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers
import numpy as np
import pytest

import decode_harness as dh
from mtf_synthesizer.baselines import local_conv
import t5.models

# Builds and decodes many small models (about a minute): `make test-fast`
# skips it.
pytestmark = pytest.mark.slow

for _module in (mesh_tensorflow.transformer, t5.models):
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(_module.__file__), "gin"))

KINDS = ("lightweight_conv", "dynamic_conv")


def _language_model(block_class, kind):
  return dh.run_language_model([
      block_class(-6, 0, dh.D_MODEL, attention_type=kind),
      transformer_layers.DenseReluDense(hidden_size=2 * dh.D_MODEL)])


@pytest.fixture(scope="module", params=KINDS)
def runs(request):
  """kind, (this block's run, mesh's block's run): same variable values."""
  kind = request.param
  return kind, (_language_model(local_conv.DecodableLocalConvAttnBlock, kind),
                _language_model(transformer_layers.LocalConvAttnBlock, kind))


def test_decoder_is_causal(runs):
  _, (ours, _) = runs
  dh.check_causal(ours)


def test_step_by_step_decoding_computes_the_full_pass(runs):
  # From an empty prefix and after a prefix (mesh's "first_part" mode).
  _, (ours, _) = runs
  dh.check_decodes_are_the_full_pass(ours)


def test_full_pass_is_mesh_blocks(runs):
  _, (ours, mesh) = runs
  np.testing.assert_allclose(ours.logits_a, mesh.logits_a, rtol=1e-6,
                             atol=1e-6)


def test_mesh_block_decodes_differently(runs):
  # What the block fixes: mesh-tensorflow 0.1.21's block decodes step by
  # step differently from its full pass, from the first position on. (If
  # this fails, mesh changed: docs/baselines.md says what it fixes.)
  _, (_, mesh) = runs
  for prefix_length, stepped in mesh.stepped.items():
    first = np.abs(stepped[:, 0] - mesh.logits_a[:, prefix_length])
    assert first.max() > 1e-2, prefix_length


def test_block_refuses_what_it_cannot_build():
  with pytest.raises(ValueError, match="attention_type"):
    local_conv.DecodableLocalConvAttnBlock(-6, 0, 8, attention_type="conv")
  with pytest.raises(ValueError, match="max_relative_pos"):
    local_conv.DecodableLocalConvAttnBlock(0, -1, 8)
  with pytest.raises(ValueError, match="output_size"):
    local_conv.DecodableLocalConvAttnBlock(kernel_width=7)
  with pytest.raises(ValueError, match="either kernel_width"):
    local_conv.DecodableLocalConvAttnBlock(-6, None, 8)
  with pytest.raises(ValueError, match="not both"):
    local_conv.DecodableLocalConvAttnBlock(-6, 0, 8, kernel_width=7)
  with pytest.raises(ValueError, match="positive"):
    local_conv.DecodableLocalConvAttnBlock(output_size=8, kernel_width=0)


@pytest.mark.parametrize("name", KINDS)
def test_encoder_classifier_reads_both_sides(name):
  # Table 7's encoder-only classifier, as the reproduction builds it: its
  # label is read at the first positions, so the kernel must be centred
  # there. Width 7 in two blocks: position 0 reads positions 0..6, and a
  # position p reads p - 6..p + 6.
  logits = dh.run_aligned_model(
      ["defaults.gin", "models/t5.1.1.tiny.gin",
       "experiments/_encoder_classifier.gin", "baselines/%s.gin" % name])
  base = logits.pop(-1)
  reach = {p: [q for q in range(dh.LENGTH)
               if not np.allclose(logits[p][:, q], base[:, q], atol=1e-5)]
           for p in logits}
  assert reach[0] == list(range(0, 7)), reach
  assert reach[dh.LENGTH - 1] == list(range(1, dh.LENGTH)), reach


def test_mesh_convolution_bindings_still_apply():
  # docs/baselines.md: kernels shared across channels are bound on mesh's
  # convolution classes, not on the block.
  gin.clear_config()
  try:
    gin.parse_config(
        "LightweightConv1DLocalAttn.num_unique_depth_filters = 4\n"
        "DynamicConv1DLocalAttn.num_unique_depth_filters = 2")
    for kind, unique in (("lightweight_conv", 4), ("dynamic_conv", 2)):
      conv = local_conv.DecodableLocalConvAttnBlock(
          -6, 0, 8, attention_type=kind).conv_local_attn_layer
      # pylint: disable-next=protected-access
      assert conv._num_unique_depth_filters == unique
  finally:
    gin.clear_config()


@pytest.mark.parametrize("name", KINDS)
def test_baseline_file_decoder_decodes_its_full_pass(name):
  # The tiny T5 of the file: causal decoder; a greedy decode through mesh's
  # own loop (Bitransformer.decode) is the argmax of the full pass over it.
  run = dh.run_bitransformer(
      ["defaults.gin", "models/t5.1.1.tiny.gin", "baselines/%s.gin" % name])
  dh.check_causal(run)
  dh.check_decodes_are_the_full_pass(run)


def test_baseline_files_use_the_block_everywhere():
  for name in KINDS:
    gin.clear_config()
    try:
      gin.parse_config_files_and_bindings(
          ["defaults.gin", "models/t5.1.1.tiny.gin",
           "baselines/%s.gin" % name], [])
      for scope in ("encoder", "decoder", None):
        with gin.config_scope(scope):
          first = transformer.make_layer_stack().layers[0]
        assert type(first) is local_conv.DecodableLocalConvAttnBlock, scope
        # pylint: disable-next=protected-access
        convolution = local_conv._CONVOLUTIONS[name]
        assert type(first.conv_local_attn_layer) is convolution, scope
    finally:
      gin.clear_config()
