# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Mesh checkpoints as the Flax model's parameters (`checkpoints/flax_names`).

The Flax trees here are written from the contract (T5X/flaxformer's names
for T5's parameters, the Synthesizer's own under the attention module with
mesh's local names; `expected_tree`), not from the map:

  * every kept stock-CLI checkpoint (tests/data/mesh_reference: every
    variant, language models, both layouts, the mesh and bfloat16 runs)
    maps whole onto its model's tree: every weight restored, none fresh,
    the bytes unchanged (a reshape);
  * each released T5 family of released_families.py (T5.1.0, T5.1.1, mT5,
    ByT5, ...) into Synthesizer variants: T5's weights restored, the
    Synthesizer's own fresh, a keys-free variant's unused T5 q and k named;
  * one error names every unknown mesh variable, every weight the model
    lacks (a checkpoint of another variant), every parameter missing, and
    every shape that differs, with both shapes;
  * the layouts are `core/reference.py`'s: the reference's layer computed
    from the checkpoint's variables equals the one computed from the Flax
    arrays mapped back, and the Flax kernels' heads are the reference's
    heads-major column blocks.
"""

import os
from typing import Dict, Sequence, Tuple

import ml_dtypes
import numpy as np
import pytest

import conftest
import doc_blocks
import released_families
from mtf_synthesizer import attentions
from mtf_synthesizer.checkpoints import flax_names
from mtf_synthesizer.checkpoints import names
from mtf_synthesizer.checkpoints import tf_format
from mtf_synthesizer.core import reference
from workbench import mesh_reference

ROOT = os.path.join(conftest.REPO, "tests", "data", "mesh_reference")
BUCKETS = 32


def _attention(module: str, components: Sequence[str], d: int, h: int,
               dk: int, n: int, k: int, factors: Tuple[int, int],
               synthesizer: bool) -> Dict[str, Tuple[int, ...]]:
  """An attention module's parameters in the contract's names."""
  out = {module + "/value/kernel": (d, h, dk),
         module + "/out/kernel": (h, dk, d)}
  if not synthesizer or "dot_product" in components:
    out[module + "/query/kernel"] = (d, h, dk)
    out[module + "/key/kernel"] = (d, h, dk)
  if synthesizer:
    for kind in components:
      if kind == "dot_product":
        continue
      settings = {"factorized_random": {"k": k},
                  "factorized_dense": dict(zip("ab", factors))}.get(kind)
      for local, shape in reference.variable_shapes(
          kind, d, h, dk, n, settings).items():
        out["%s/%s" % (module, local)] = tuple(shape)
    if len(components) > 1:
      out[module + "/mixture/alpha_logits"] = (len(components), h)
  return out


def expected_tree(components: Sequence[str], *, d: int, h: int, dk: int,
                  d_ff: int, vocab: int, encoder_layers: int,
                  decoder_layers: int, causal_lm: bool = False,
                  gated: bool = False, tied: bool = True, n: int = 8,
                  k: int = 8, factors: Tuple[int, int] = (2, 4),
                  synthesizer_decoder: bool = True
                  ) -> Dict[str, Tuple[int, ...]]:
  """The Flax model's parameters: path -> shape (the contract's names).

  A relative attention bias shared by each stack's layers (T5's); the
  encoder-decoder attention is mesh's dot product.
  """
  # A language model's embedding is its decoder's (T5X's DecoderOnly).
  tree = {("decoder/" if causal_lm else "") + "token_embedder/embedding": (
      vocab, d)}
  mlp = ["wi_0", "wi_1"] if gated else ["wi"]
  stacks = [("decoder", decoder_layers)] if causal_lm else [
      ("encoder", encoder_layers), ("decoder", decoder_layers)]
  for stack, depth in stacks:
    tree["%s/relpos_bias/rel_embedding" % stack] = (h, BUCKETS)
    tree["%s/%s_norm/scale" % (stack, stack)] = (d,)
    for i in range(depth):
      layer = "%s/layers_%d/" % (stack, i)
      if stack == "encoder":
        tree[layer + "pre_attention_layer_norm/scale"] = (d,)
        tree.update(_attention(layer + "attention", components, d, h, dk, n,
                               k, factors, True))
      else:
        tree[layer + "pre_self_attention_layer_norm/scale"] = (d,)
        tree.update(_attention(layer + "self_attention", components, d, h,
                               dk, n, k, factors, synthesizer_decoder))
        if not causal_lm:
          tree[layer + "pre_cross_attention_layer_norm/scale"] = (d,)
          tree.update(_attention(layer + "encoder_decoder_attention", (), d,
                                 h, dk, n, k, factors, False))
      tree[layer + "pre_mlp_layer_norm/scale"] = (d,)
      for name in mlp:
        tree[layer + "mlp/%s/kernel" % name] = (d, d_ff)
      tree[layer + "mlp/wo/kernel"] = (d_ff, d)
  if not tied:
    tree["decoder/logits_dense/kernel"] = (d, vocab)
  return tree


def _kept_tree(name: str) -> Dict[str, Tuple[int, ...]]:
  """The Flax tree of a kept case's model (FR's k, FD's factors read)."""
  case = mesh_reference.BY_NAME[name]
  reader = tf_format.load_checkpoint(os.path.join(ROOT, name))
  shapes = {n: reader.shape(n) for n in reader.variable_names()}
  k = next((s[2] for n, s in shapes.items() if n.endswith("/R1")), 8)
  a = next((s[2] for n, s in shapes.items() if n.endswith("/wa")), 2)
  b = next((s[2] for n, s in shapes.items() if n.endswith("/wb")), 4)
  dims = mesh_reference.DIMS
  # mesh's own SelfAttention (a released T5's layout) is the dot product.
  components = attentions.get(case.variant).components or ("dot_product",)
  return expected_tree(
      components, d=dims["d_model"],
      h=dims["num_heads"], dk=dims["d_kv"], d_ff=dims["d_ff"], vocab=384,
      encoder_layers=dims["num_layers"], decoder_layers=dims["num_layers"],
      causal_lm=case.model_type == "lm", gated=case.layout == "t5.1.1",
      tied=case.layout == "t5.1.0", n=mesh_reference.LENGTH, k=k,
      factors=(a, b))


KEPT = [c.name for c in mesh_reference.CASES]


@pytest.mark.parametrize("name", KEPT)
def test_every_kept_checkpoint_maps_whole(name):
  reader = tf_format.load_checkpoint(os.path.join(ROOT, name))
  tree = _kept_tree(name)
  params = flax_names.flax_params(reader, tree)
  assert params.fresh == [] and params.unused == []
  assert sorted(params.restored) == sorted(tree)
  weights = [n for n in reader.variable_names() if names.is_weight(n)]
  assert sorted(params.sources.values()) == sorted(weights)
  for path, value in params.restored.items():
    stored = reader.read(params.sources[path])
    assert value.shape == tree[path], path
    assert value.dtype == stored.dtype, path
    assert value.tobytes() == stored.tobytes(), path
  if "bfloat16" in name:
    assert params.restored["token_embedder/embedding"].dtype == (
        ml_dtypes.bfloat16)
  # And back: mesh's names and shapes, the same bytes.
  back = flax_names.mesh_params(params.restored,
                                {n: reader.shape(n) for n in weights})
  assert sorted(back) == sorted(weights)
  for name_, value in back.items():
    assert value.tobytes() == reader.read(name_).tobytes(), name_


# Released families into every Synthesizer variant of the table.
INTO = attentions.VARIANT_NAMES
FAMILY_CASES = [(f.name, naming, v) for f in released_families.FAMILIES
                for naming in f.namings for v in INTO]


@pytest.fixture(scope="module")
def family_checkpoints(tmp_path_factory):
  root = tmp_path_factory.mktemp("families")
  out = {}
  for family in released_families.FAMILIES:
    for naming in family.namings:
      folder = root / ("%s-%s" % (family.name.replace(" ", "_")
                                  .replace(",", ""), naming))
      folder.mkdir()
      released_families.write(family, naming, str(folder / "model.ckpt-1000"))
      out[(family.name, naming)] = str(folder / "model.ckpt-1000")
  return out


def _family_tree(family, variant: str) -> Dict[str, Tuple[int, ...]]:
  rf = released_families
  return expected_tree(
      attentions.get(variant).components, d=rf.D_MODEL, h=rf.HEADS,
      dk=rf.D_KV, d_ff=rf.D_FF, vocab=rf.VOCAB,
      encoder_layers=family.encoder_layers,
      decoder_layers=family.decoder_layers, gated=family.gated,
      tied=family.shared_softmax, n=16, k=4, factors=(4, 4))


@pytest.mark.parametrize("family_name,naming,variant", FAMILY_CASES)
def test_a_released_family_starts_a_variant(family_checkpoints, family_name,
                                            naming, variant):
  family = released_families.BY_NAME[family_name]
  prefix = family_checkpoints[(family_name, naming)]
  tree = _family_tree(family, variant)
  params = flax_names.flax_params(prefix, tree)
  own = sorted(p for p in tree if flax_names.is_synthesizer_own(p))
  assert params.fresh == own
  components = attentions.get(variant).components
  if len(components) > 1 or components != ("dot_product",):
    assert own  # the variant has parameters of its own
  assert sorted(params.restored) == sorted(set(tree) - set(own))
  keys_free = "dot_product" not in components
  reader = tf_format.load_checkpoint(prefix)
  weights = {n for n in reader.variable_names() if names.is_weight(n)}
  unused = {n for n in weights
            if keys_free and n.split("/")[-1] in ("q", "k") and (
                "/SelfAttention/" in n)}
  assert set(params.unused) == unused
  assert set(params.sources.values()) == weights - unused
  # T5's value projection is the Synthesizer's, in the Flax layout.
  value = params.restored["encoder/layers_0/attention/value/kernel"]
  stored = reader.read("encoder/block_000/layer_000/SelfAttention/v")
  np.testing.assert_array_equal(
      value, stored.reshape(released_families.D_MODEL,
                            released_families.HEADS, -1))


def _mesh_dict(name: str) -> Dict[str, np.ndarray]:
  reader = tf_format.load_checkpoint(os.path.join(ROOT, name))
  return reader.read_many()


def test_one_error_names_every_unknown_and_unexpected_variable():
  name = "t5.1.0-encdec-random_vanilla"
  arrays = _mesh_dict(name)
  arrays["encoder/block_000/layer_000/SynthesizerAttention/bogus"] = (
      np.zeros(3, np.float32))
  arrays["encoder/block_000/layer_007/Convolution/kernel"] = np.zeros(
      3, np.float32)
  arrays["extra/thing"] = np.zeros(3, np.float32)
  arrays["extra/thing_slot_v"] = np.zeros(3, np.float32)  # a slot: ignored
  with pytest.raises(flax_names.MappingError) as error:
    flax_names.flax_params(arrays, _kept_tree(name))
  assert error.value.unknown == [
      "encoder/block_000/layer_000/SynthesizerAttention/bogus",
      "encoder/block_000/layer_007/Convolution/kernel", "extra/thing"]
  message = str(error.value)
  for unknown in error.value.unknown:
    assert unknown in message
  assert "thing_slot_v" not in message


def test_a_checkpoint_of_another_variant_is_named():
  """D+V's checkpoint into R's model: D's weights unexpected, q/k unused,
  R's tables missing (a Synthesizer checkpoint of the wrong variant is not
  a T5 checkpoint: here nothing may start fresh)."""
  name = "t5.1.0-encdec-dense_vanilla"
  tree = _kept_tree("t5.1.0-encdec-random")
  with pytest.raises(flax_names.MappingError) as error:
    flax_names.flax_params(os.path.join(ROOT, name), tree,
                           may_start_fresh=lambda path: False)
  unexpected = error.value.unexpected
  assert "encoder/block_000/layer_000/SynthesizerAttention/dense/w1" in (
      unexpected)
  assert unexpected[
      "encoder/block_000/layer_000/SynthesizerAttention/mixture/"
      "alpha_logits"] == "encoder/layers_0/attention/mixture/alpha_logits"
  assert error.value.missing == ["decoder/layers_0/self_attention/random/R",
                                 "encoder/layers_0/attention/random/R"]
  assert "decoder/layers_0/self_attention/random/R" in str(error.value)


def test_a_missing_t5_weight_is_named(family_checkpoints):
  family = released_families.BY_NAME["T5.1.1"]
  reader = tf_format.load_checkpoint(
      family_checkpoints[("T5.1.1", "rms_norm")])
  arrays = reader.read_many()
  del arrays["decoder/block_001/layer_002/DenseReluDense/wo/kernel"]
  del arrays["encoder/rms_norm/scale"]
  with pytest.raises(flax_names.MappingError) as error:
    flax_names.flax_params(arrays, _family_tree(family, "random_vanilla"))
  assert error.value.missing == ["decoder/layers_1/mlp/wo/kernel",
                                 "encoder/encoder_norm/scale"]
  assert not error.value.unknown and not error.value.unexpected


def test_a_shape_mismatch_names_both_shapes():
  name = "t5.1.0-encdec-dense_vanilla"
  tree = _kept_tree(name)
  tree["encoder/layers_0/attention/dense/w2"] = (2, 4, 16)  # N = 16
  tree["encoder/layers_0/attention/query/kernel"] = (8, 2, 8)  # d_kv = 8
  with pytest.raises(flax_names.MappingError) as error:
    flax_names.flax_params(os.path.join(ROOT, name), tree)
  mismatched = error.value.mismatched
  assert mismatched["encoder/layers_0/attention/dense/w2"] == (
      "encoder/block_000/layer_000/SynthesizerAttention/dense/w2",
      (2, 4, 8), (2, 4, 8), (2, 4, 16))
  assert mismatched["encoder/layers_0/attention/query/kernel"][1:] == (
      (8, 8), (8, 2, 4), (8, 2, 8))
  assert "[2, 4, 8]" in str(error.value)
  assert "[2, 4, 16]" in str(error.value)


def test_one_head_tables_get_their_heads_axis():
  """A one-head mesh model stores R as [N, N], alpha as [functions]."""
  arrays = {"encoder/block_000/layer_000/SynthesizerAttention/random/R":
                np.arange(16, dtype=np.float32).reshape(4, 4),
            "encoder/block_000/layer_000/SynthesizerAttention/mixture/"
            "alpha_logits": np.array([0.5, -0.5], np.float32),
            "encoder/block_000/layer_000/SynthesizerAttention/"
            "relative_attention_bias": np.zeros(32, np.float32),
            "encoder/block_000/layer_000/SynthesizerAttention/dense/w1":
                np.ones((8, 3), np.float32)}
  tree = {"encoder/layers_0/attention/random/R": (1, 4, 4),
          "encoder/layers_0/attention/mixture/alpha_logits": (2, 1),
          "encoder/relpos_bias/rel_embedding": (1, 32),
          "encoder/layers_0/attention/dense/w1": (8, 1, 3)}
  params = flax_names.flax_params(arrays, tree, num_heads=1)
  assert {p: v.shape for p, v in params.restored.items()} == tree
  np.testing.assert_array_equal(
      params.restored["encoder/layers_0/attention/random/R"][0],
      arrays["encoder/block_000/layer_000/SynthesizerAttention/random/R"])


def test_a_bias_per_layer_is_the_layers_own():
  arrays = {"decoder/block_000/layer_000/SelfAttention/"
            "relative_attention_bias": np.zeros((2, 32), np.float32),
            "decoder/block_001/layer_000/SelfAttention/"
            "relative_attention_bias": np.ones((2, 32), np.float32)}
  tree = {"decoder/layers_0/relpos_bias/rel_embedding": (2, 32),
          "decoder/layers_1/relpos_bias/rel_embedding": (2, 32)}
  params = flax_names.flax_params(arrays, tree, num_heads=2)
  assert params.sources == {
      "decoder/layers_%d/relpos_bias/rel_embedding" % i:
          "decoder/block_%03d/layer_000/SelfAttention/"
          "relative_attention_bias" % i for i in (0, 1)}


ROUND_TRIP = ("t5.1.0-encdec-random_vanilla", "t5.1.0-encdec-dense_vanilla",
              "t5.1.0-encdec-factorized_dense", "t5.1.0-lm-random",
              "t5.1.0-encdec-factorized_random_vanilla")


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_the_layouts_are_the_references(name):
  case = mesh_reference.BY_NAME[name]
  components = attentions.get(case.variant).components
  reader = tf_format.load_checkpoint(os.path.join(ROOT, name))
  weights = {n: reader.read(n).astype(np.float64)
             for n in reader.variable_names() if names.is_weight(n)}
  params = flax_names.flax_params(
      {n: v for n, v in weights.items()}, _kept_tree(name))
  back = flax_names.mesh_params(params.restored,
                                {n: v.shape for n, v in weights.items()})
  stack = "transformer" if case.model_type == "lm" else "encoder"
  scope = "%s/block_000/layer_000/SynthesizerAttention/" % stack
  h, dk = mesh_reference.DIMS["num_heads"], mesh_reference.DIMS["d_kv"]
  x = np.random.RandomState(0).normal(
      size=(2, mesh_reference.LENGTH, mesh_reference.DIMS["d_model"]))

  def local(arrays):
    return {n[len(scope):]: v for n, v in arrays.items()
            if n.startswith(scope) and n[len(scope):] !=
            "relative_attention_bias"}

  causal = case.model_type == "lm"
  expected = reference.layer_output(components, local(weights), x, h, dk,
                                    causal=causal)
  np.testing.assert_array_equal(
      reference.layer_output(components, local(back), x, h, dk,
                             causal=causal), expected)
  # The Flax kernels, used as a Flax model uses them: head by head they
  # are the reference's heads-major blocks.
  module = ("decoder/layers_0/self_attention/" if causal else
            "encoder/layers_0/attention/")
  value = params.restored[module + "value/kernel"]
  out = params.restored[module + "out/kernel"]
  mesh_value = weights[scope + ("v" if "dot_product" in components
                                else "kv")]
  for head in range(h):
    np.testing.assert_allclose(
        np.einsum("bld,dk->blk", x, value[:, head]),
        x @ mesh_value[:, head * dk:(head + 1) * dk], rtol=1e-12)
  per_head = np.einsum("bld,dhk->blhk", x, value)
  np.testing.assert_allclose(
      np.einsum("blhk,hkd->bld", per_head, out),
      (x @ mesh_value) @ weights[scope + "o"], rtol=1e-10)
  if "dot_product" in components:
    query = params.restored[module + "query/kernel"]
    for head in range(h):
      np.testing.assert_allclose(
          x[0] @ query[:, head],
          x[0] @ weights[scope + "q"][:, head * dk:(head + 1) * dk],
          rtol=1e-12)


def test_the_documents_block(family_checkpoints):
  """docs/development.md's block, on T5.1.1 into R+V."""
  block = doc_blocks.find_block("docs/development.md", "python",
                                "flax_names.flax_params(")
  family = released_families.BY_NAME["T5.1.1"]
  scope = {"checkpoint": family_checkpoints[("T5.1.1", "rms_norm")],
           "expected": _family_tree(family, "random_vanilla")}
  exec(compile(block.text, block.where, "exec"), scope)  # pylint: disable=exec-used
  params = scope["params"]
  assert params.fresh == [p for p in sorted(scope["expected"])
                          if flax_names.is_synthesizer_own(p)]
  assert len(params.restored) + len(params.fresh) == len(scope["expected"])
