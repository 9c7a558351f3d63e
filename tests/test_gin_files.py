# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The gin files: the layer swap, encoder/decoder only, inherited bindings."""

import os
import re

import gin
import mesh_tensorflow as mtf
import mesh_tensorflow.transformer
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers
from mesh_tensorflow.transformer import utils as mtf_utils
import pytest

import mtf_synthesizer as ms
from mtf_synthesizer import attentions
from mtf_synthesizer.baselines import local_conv
from mtf_synthesizer.stock_cli import gin_path
import t5.models

# The stock CLI's search path: mesh's and t5's gin folders.
for _module in (mesh_tensorflow.transformer, t5.models):
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(_module.__file__), "gin"))


def _stacks(*gin_files, params=()):
  """Parses gin files after T5's tiny model; returns the stacks' layers."""
  gin.clear_config()
  gin.parse_config_files_and_bindings(
      ["defaults.gin", "models/t5.1.1.tiny.gin"] + list(gin_files),
      ["SelfAttention.dropout_rate = 0.25"] + list(params))
  out = {}
  for scope in ("encoder", "decoder", ""):
    with gin.config_scope(scope or None):
      stack = transformer.make_layer_stack()
    out[scope or "lm"] = stack.layers
  gin.clear_config()
  return out


@pytest.fixture(autouse=True)
def _clean_gin():
  yield
  gin.clear_config()


def test_variant_swaps_every_stack_and_inherits_self_attention_bindings():
  stacks = _stacks("synthesizer/random_vanilla.gin")
  for name, layers in stacks.items():
    attention = layers[0]
    assert type(attention) is ms.SynthesizerAttention, name
    # T5's SelfAttention bindings reach the subclass (the release's layer
    # re-declared these arguments and lost them).
    assert attention.dropout_rate == 0.25
    assert attention.relative_attention_type == "bias_shared"
    assert attention.num_heads == 2 and attention.key_value_size == 64
    kinds = [c.name for c in attention.synthesizer.components]
    assert kinds == ["random", "dot_product"]
  assert isinstance(stacks["decoder"][1], transformer_layers.EncDecAttention)


@pytest.mark.parametrize("keep,t5_attention_stack,synth_stacks", [
    ("synthesizer/keep_decoder_self_attention.gin", "decoder",
     ("encoder", "lm")),
    ("synthesizer/keep_encoder_self_attention.gin", "encoder",
     ("decoder", "lm")),
])
def test_encoder_or_decoder_only(keep, t5_attention_stack, synth_stacks):
  stacks = _stacks("synthesizer/dense.gin", keep)
  assert type(stacks[t5_attention_stack][0]) is transformer_layers.SelfAttention
  for name in synth_stacks:
    assert type(stacks[name][0]) is ms.SynthesizerAttention, name


def test_release_mode_through_gin():
  stacks = _stacks(
      "synthesizer/random.gin",
      params=["SynthesizerAttention.synthesizers = None",
              "SynthesizerAttention.synthesize_mode = 'dense_plus_alpha'"])
  synth = stacks["encoder"][0].synthesizer
  assert isinstance(synth, ms.Mixture) and synth.learned_weights
  assert [c.name for c in synth.components] == ["dot_product", "dense"]
  assert synth.components[1].share_query_projection


@pytest.mark.parametrize("variant,binding,named", [
    ("random", "SelfAttention.attention_func = 'hybrid'", "attention_func"),
    ("random", "SelfAttention.use_hyperprompt = True", "hyperprompt"),
    ("dense", "SelfAttention.hyperprompt_length_encoder = 4",
     "hyperprompt"),
    ("random_vanilla", "SelfAttention.shared_kv = True", "shared_kv"),
    ("random", "SelfAttention.attention_kwargs = {'float32_logits': False}",
     "float32_logits"),
    ("random", "SelfAttention.attention_kwargs = {'dropout_rete': 0.1}",
     "dropout_rete"),
])
def test_inherited_settings_it_cannot_honour_fail(variant, binding, named):
  with pytest.raises(ValueError, match="cannot honour.*" + named):
    _stacks("synthesizer/%s.gin" % variant, params=[binding])


def test_inherited_settings_it_honours_build():
  # shared_kv means nothing without keys: the value projection is the
  # only one (R), so it is accepted there.
  stacks = _stacks("synthesizer/random.gin", params=[
      "SelfAttention.shared_kv = True",
      "SelfAttention.attention_kwargs = {'float32_logits': True}"])
  assert type(stacks["encoder"][0]) is ms.SynthesizerAttention


def test_every_variant_file_has_a_row_and_every_row_a_file():
  files = set(gin_path.gin_files("synthesizer"))
  assert files - set(attentions.EXTRA_GIN_FILES) == set(
      attentions.VARIANT_NAMES)
  assert set(attentions.EXTRA_GIN_FILES) <= files


@pytest.mark.parametrize("variant", attentions.VARIANTS, ids=lambda v: v.name)
def test_variant_file_builds_the_components_of_its_row(variant):
  for name, layers in _stacks(variant.gin_file).items():
    synth = layers[0].synthesizer
    parts = synth.components if isinstance(synth, ms.Mixture) else [synth]
    assert tuple(p.name for p in parts) == variant.components, name
    for part in parts:
      assert type(part) is ms.synthesizers.BY_NAME[part.name]


def test_readme_variant_table_follows_the_variant_table():
  """docs/variants.md's table: a row per variant, label, equation, gin file."""
  readme = os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), "docs", "variants.md")
  with open(readme) as f:
    rows = [line.split("|")[1:-1] for line in f
            if line.startswith("| ") and "`synthesizer/" in line and
            ".gin` |" in line and "init_from_t5" not in line]
  by_file = {cells[3].strip().strip("`"): cells for cells in rows}
  listed = [v for v in attentions.VARIANTS if v.in_paper]
  assert len(rows) == len(listed) == len(by_file)
  for variant in listed:
    cells = by_file[variant.gin_file]
    assert cells[0].strip().split(" (")[0] == variant.label
    assert cells[2].strip() == (variant.equation or "–")
    assert _paper_tables(cells[-1]) == set(variant.paper_tables)


def _paper_tables(cell: str) -> set:
  """{"Table 4", "Tables 5-6"} from a documents' cell "4, 5-6"."""
  numbers = [t.strip() for t in cell.replace("–", "").split(",")]
  return {("Tables " if t == "5-6" else "Table ") + t for t in numbers if t}


def test_baselines_doc_table_follows_the_attention_table():
  """docs/baselines.md: one row per baseline, its paper's tables."""
  doc = os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), "docs", "baselines.md")
  with open(doc) as f:
    rows = [line.split("|")[1:-1] for line in f
            if line.startswith("| ") and "`baselines/" in line]
  by_file = {cells[1].strip().strip("`"): cells for cells in rows}
  assert sorted(by_file) == sorted(b.gin_file for b in attentions.BASELINES)
  for baseline in attentions.BASELINES:
    assert _paper_tables(by_file[baseline.gin_file][-1].strip()) == set(
        baseline.paper_tables), baseline.name


# Every baseline file: its layer in each stack (the table's `layer`), and
# which stacks are causal.
_BASELINES = {b.name: getattr(ms, b.layer) for b in attentions.BASELINES}
_CONVOLUTIONS = {
    "lightweight_conv": transformer_layers.LightweightConv1DLocalAttn,
    "dynamic_conv": transformer_layers.DynamicConv1DLocalAttn,
}


def test_every_baseline_file_has_a_row_and_every_row_a_file():
  assert sorted(gin_path.gin_files("baselines")) == sorted(
      attentions.BASELINE_NAMES)
  for baseline in attentions.BASELINES:
    assert attentions.get(baseline.label) is baseline
    assert os.path.exists(os.path.join(gin_path.GIN_DIR, baseline.gin_file))


@pytest.mark.parametrize("name", gin_path.gin_files("baselines"))
def test_baseline_file_builds_its_layer_in_the_stacks_it_applies_to(name):
  stacks = _stacks("baselines/%s.gin" % name)
  layer = _BASELINES[name]
  assert type(stacks["encoder"][0]) is layer
  assert type(stacks["lm"][0]) is layer
  decoder = stacks["decoder"]
  assert isinstance(decoder[1], transformer_layers.EncDecAttention)
  if not attentions.get(name).causal:  # the decoder keeps self-attention
    assert type(decoder[0]) is transformer_layers.SelfAttention
    assert stacks["encoder"][0].relative_attention_type is None
    return
  assert type(decoder[0]) is layer
  if layer is local_conv.DecodableLocalConvAttnBlock:
    for stack in stacks.values():
      assert stack[0].kernel_width == 7
      assert isinstance(stack[0].conv_local_attn_layer, _CONVOLUTIONS[name])


@pytest.mark.parametrize("name", sorted(_CONVOLUTIONS))
def test_convolution_kernel_is_causal_in_autoregressive_models_only(name):
  # The models mesh builds from the gin files (utils.build_model): the
  # kernel's window comes from the model each stack is called in.
  gin.parse_config_files_and_bindings(
      ["defaults.gin", "models/t5.1.1.tiny.gin",
       "baselines/%s.gin" % name], [])

  def build(model_type):
    return mtf_utils.build_model(
        model_type=model_type, input_vocab_size=64, output_vocab_size=64,
        layout_rules=mtf.convert_to_layout_rules(""),
        mesh_shape=mtf.convert_to_shape(""))

  encoder_decoder = build("bitransformer")
  models = {"encoder": encoder_decoder.encoder,
            "decoder": encoder_decoder.decoder,
            "lm": build("lm"), "delimited_lm": build("delimited_lm"),
            "aligned": build("aligned")}  # Table 7's encoder-only classifier
  windows = {kind: model.layer_stack.layers[0].window(model)
             for kind, model in models.items()}
  assert windows == {"encoder": (-3, 3), "decoder": (-6, 0), "lm": (-6, 0),
                     "delimited_lm": (-6, 0), "aligned": (-3, 3)}


def test_convolution_refuses_a_window_into_the_future_of_a_decoder():
  gin.parse_config_files_and_bindings(
      ["defaults.gin", "models/t5.1.1.tiny.gin",
       "baselines/dynamic_conv.gin"],
      ["DecodableLocalConvAttnBlock.kernel_width = None",
       "DecodableLocalConvAttnBlock.min_relative_pos = -3",
       "DecodableLocalConvAttnBlock.max_relative_pos = 3"])
  model = transformer.make_bitransformer(input_vocab_size=64,
                                         output_vocab_size=64)
  encoder = model.encoder.layer_stack.layers[0]
  assert encoder.window(model.encoder) == (-3, 3)
  decoder = model.decoder.layer_stack.layers[0]
  with pytest.raises(ValueError, match="max_relative_pos is 3 .*decoder"):
    decoder.window(model.decoder)


def test_lean_adafactor_file_selects_the_optimizer():
  gin.parse_config_files_and_bindings(
      ["defaults.gin", "models/t5.1.1.tiny.gin", "synthesizer/random.gin",
       "synthesizer/lean_adafactor.gin"], [])
  chosen = gin.query_parameter("utils.run.optimizer")
  assert chosen.configurable.wrapped is ms.LeanAdafactorOptimizer


# A path in a gin comment: a file name with a known suffix, and its folders
# (not a pattern such as keep_*_self_attention.gin or <dir>/x.gin).
_COMMENT_PATH = re.compile(r"(?<![\w./*<>-])[\w./-]*\w\.(?:py|gin|md)\b")


def _gin_comment_paths():
  """(gin file, path) for every file path a comment of a gin file names."""
  out = []
  for folder, _, files in os.walk(gin_path.GIN_DIR):
    for name in sorted(files):
      if not name.endswith(".gin"):
        continue
      path = os.path.join(folder, name)
      with open(path) as f:
        for line in f:
          if line.lstrip().startswith("#"):
            out += [(path, p) for p in _COMMENT_PATH.findall(line)]
  return out


def test_every_path_a_gin_comment_names_exists():
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  search = [repo, gin_path.GIN_DIR] + [
      os.path.join(os.path.dirname(m.__file__), "gin")
      for m in (mesh_tensorflow.transformer, t5.models)]
  found = _gin_comment_paths()
  assert len(found) > 10  # the pattern finds them
  missing = [(os.path.relpath(gin_file, gin_path.GIN_DIR), path)
             for gin_file, path in found
             if not any(os.path.exists(os.path.join(root, path))
                        for root in search + [os.path.dirname(gin_file)])]
  assert not missing
