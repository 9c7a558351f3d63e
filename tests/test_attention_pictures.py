# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attention pictures (workbench.pictures) against independent sums.

Fast tests write synthetic checkpoints (tf.train.Saver, the layer's variable
names and shapes) and compare the tool's softmax(R), softmax(R1 R2^T), causal
masks and mixture weights with explicit per-row loops. One module fixture
trains tiny R+V and vanilla models for two steps through the stock CLI (in
parallel): layer 0's attention computed in NumPy from the checkpoint must
equal the weights recorded from mesh's own forward pass, and the whole tool
must write valid PNGs of the expected size.
"""

import math
import os

import numpy as np
from PIL import Image
import pytest
import tensorflow.compat.v1 as tf

import conftest
import lowering as lowering_lib
from mtf_synthesizer.core import reference as ref
from workbench import attention_layers as layers_lib
from workbench import attention_maps as maps
from workbench import pictures as ap

# The tests on models trained through the stock CLI are marked slow
# (`make test-fast` skips them).

N, H, K, D = 16, 3, 4, 8
SCOPE = "%s/block_%03d/layer_000/SynthesizerAttention"
CONFIG = """
encoder/SynthesizerAttention.synthesizers = \\
    [@synthesizers.DotProduct(), @synthesizers.Random()]
decoder/SynthesizerAttention.synthesizers = [@synthesizers.FactorizedRandom()]
"""


def _write_checkpoint(directory, values):
  graph = tf.Graph()
  with graph.as_default():
    variables = [tf.Variable(v.astype(np.float32), name=n)
                 for n, v in values.items()]
    saver = tf.train.Saver(variables)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return saver.save(sess, os.path.join(directory, "model.ckpt"),
                        global_step=7)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
  """A checkpoint: encoder R+V mixture (listed V first), decoder FR."""
  directory = str(tmp_path_factory.mktemp("synthetic"))
  rng = np.random.RandomState(0)
  values = {}
  for block in range(2):
    enc, dec = SCOPE % ("encoder", block), SCOPE % ("decoder", block)
    values[enc + "/random/R"] = rng.normal(0, 2, (H, N, N))
    values[enc + "/q"] = rng.normal(0, 1, (D, H * D))
    values[enc + "/k"] = rng.normal(0, 1, (D, H * D))
    values[enc + "/v"] = rng.normal(0, 1, (D, H * D))
    values[enc + "/mixture/alpha_logits"] = rng.normal(0, 1, (2, H))
    values[dec + "/factorized_random/R1"] = rng.normal(0, 1, (H, N, K))
    values[dec + "/factorized_random/R2"] = rng.normal(0, 1, (H, N, K))
    values[dec + "/kv"] = rng.normal(0, 1, (D, H * D))
  values["shared/embedding"] = rng.normal(0, 1, (300, D))
  values["encoder/block_000/layer_000/SynthesizerAttention/random/R_slot_vc"] \
      = np.zeros((H, N))
  _write_checkpoint(directory, values)
  with open(os.path.join(directory, "operative_config.gin"), "w") as f:
    f.write(CONFIG)
  return directory, values


def _reference_softmax_rows(logits, causal):
  """Row by row, with an explicit loop: exp / sum over the visible j <= i."""
  length = logits.shape[0]
  out = np.zeros_like(logits)
  for i in range(length):
    stop = i + 1 if causal else length
    e = [math.exp(logits[i, j]) for j in range(stop)]
    out[i, :stop] = np.array(e) / sum(e)
  return out


def test_finds_layers_and_mixture_order(synthetic):
  directory, _ = synthetic
  layers = layers_lib.find_attention_layers(
      layers_lib.load_variables(directory), open(directory +
                                         "/operative_config.gin").read())
  assert [(l.stack, l.block) for l in layers] == [
      ("encoder", 0), ("encoder", 1), ("decoder", 0), ("decoder", 1)]
  assert layers[0].components == ["dot_product", "random"]  # gin order
  assert layers[0].order_known and layers[0].short_kind == "V+R"
  assert layers[2].components == ["factorized_random"]


def test_without_config_mixture_order_is_unknown(synthetic):
  directory, _ = synthetic
  layers = layers_lib.find_attention_layers(
      layers_lib.load_variables(directory))
  assert not layers[0].order_known
  assert layers[2].order_known  # a single function has no order


@pytest.mark.parametrize("length,causal", [(N, False), (5, True), (N, True)])
def test_softmax_r_equals_loop_reference(synthetic, length, causal):
  directory, values = synthetic
  variables = layers_lib.load_variables(directory)
  layers = layers_lib.find_attention_layers(variables, CONFIG)
  got = maps.synthetic_attention(variables, layers[1], length, causal)
  r = values[SCOPE % ("encoder", 1) + "/random/R"].astype(np.float32)
  assert got.shape == (H, length, length)
  for h in range(H):
    np.testing.assert_allclose(
        got[h], _reference_softmax_rows(r[h, :length, :length], causal),
        rtol=1e-6, atol=1e-9)
  np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-9)
  if causal:
    assert np.all(got[:, np.triu_indices(length, 1)[0],
                      np.triu_indices(length, 1)[1]] == 0.0)
    np.testing.assert_array_equal(got[:, 0, 0], 1.0)


def test_softmax_factorized_random_equals_loop_reference(synthetic):
  directory, values = synthetic
  variables = layers_lib.load_variables(directory)
  layer = layers_lib.find_attention_layers(variables, CONFIG)[3]
  got = maps.synthetic_attention(variables, layer, 10, causal=True)
  r1 = values[SCOPE % ("decoder", 1) + "/factorized_random/R1"]
  r2 = values[SCOPE % ("decoder", 1) + "/factorized_random/R2"]
  for h in range(H):
    logits = np.array([[sum(float(np.float32(r1[h, i, k])) *
                            float(np.float32(r2[h, j, k])) for k in range(K))
                        for j in range(10)] for i in range(10)])
    np.testing.assert_allclose(got[h], _reference_softmax_rows(logits, True),
                               rtol=1e-6, atol=1e-9)


def test_mixture_weights_sum_to_one_in_config_order(synthetic):
  directory, values = synthetic
  variables = layers_lib.load_variables(directory)
  layer = layers_lib.find_attention_layers(variables, CONFIG)[0]
  alpha = maps.mixture_weights(variables, layer)
  w = values[SCOPE % ("encoder", 0) + "/mixture/alpha_logits"]
  for h in range(H):
    e = [math.exp(float(np.float32(w[c, h]))) for c in range(2)]
    np.testing.assert_allclose(alpha[:, h], np.array(e) / sum(e), rtol=1e-6)
  np.testing.assert_allclose(alpha.sum(0), 1.0, rtol=1e-12)
  assert maps.mixture_weights(
      variables, layers_lib.find_attention_layers(variables, CONFIG)[2]) is None


def test_relative_position_bucket_matches_mesh():
  # pylint: disable=g-import-not-at-top,protected-access
  import mesh_tensorflow as mtf
  from mesh_tensorflow.transformer import transformer_layers
  rel = np.arange(-300, 300, dtype=np.int32)
  for bidirectional in (True, False):
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "m")
    dim = mtf.Dimension("x", rel.size)
    with tf.Graph().as_default():
      x = mtf.import_tf_tensor(mesh, tf.constant(rel), mtf.Shape([dim]))
      y = transformer_layers._relative_position_bucket(
          x, bidirectional=bidirectional, num_buckets=32)
      lowering = lowering_lib.lower(graph, mesh)
      with tf.Session() as sess:
        expected = sess.run(lowering.export_to_tf_tensor(y))
    np.testing.assert_array_equal(
        ref.relative_position_bucket(rel, bidirectional), expected)


def test_synthetic_pictures_are_valid_pngs(synthetic, tmp_path):
  directory, _ = synthetic
  variables = layers_lib.load_variables(directory)
  layers = layers_lib.find_attention_layers(variables, CONFIG)
  panels = [("p%d" % h, w, True) for h, w in enumerate(
      maps.synthetic_attention(variables, layers[2], 12, True))]
  path = ap.plot_heatmaps(panels, str(tmp_path / "s.png"), "t", dpi=50)
  with Image.open(path) as image:
    image.verify()
  with Image.open(path) as image:
    assert image.format == "PNG"
    assert image.size == ap.heatmap_size(len(panels), dpi=50) == (675, 225)
    assert np.asarray(image.convert("L")).std() > 10  # not blank
  alpha = maps.mixture_weights(variables, layers[0])
  path = ap.plot_mixture_weights([("enc 0", ["V", "R"], alpha)],
                                 str(tmp_path / "m.png"), "t", dpi=50)
  with Image.open(path) as image:
    assert image.format == "PNG" and image.size == (175, 175)


# ------------------------------------------- real models via the stock CLI


def test_attention_softmaxes_finds_each_layers_weights():
  """Both softmaxes a layer can take (ops.softmax) are found by scope."""
  # pylint: disable=g-import-not-at-top
  import mesh_tensorflow as mtf
  from mtf_synthesizer.ops import softmax as softmax_lib
  # pylint: enable=g-import-not-at-top
  dims = [mtf.Dimension("heads", 2), mtf.Dimension("length", 3),
          mtf.Dimension("memory_length", 3)]
  projected = [mtf.Dimension("heads", 2), mtf.Dimension("length", 3),
               mtf.Dimension("memory_proj", 2)]
  with tf.Graph().as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    x = mtf.import_tf_tensor(mesh, np.zeros((2, 3, 3), np.float32), dims)
    y = mtf.import_tf_tensor(mesh, np.zeros((2, 3, 2), np.float32),
                             projected)
    with tf.variable_scope(SCOPE % ("encoder", 0)):
      fused = softmax_lib.softmax(x, dims[-1])  # TF's softmax, one op
      softmax_lib.softmax(y, projected[-1])  # not over memory_length: ignored
    with tf.variable_scope(SCOPE % ("decoder", 0)):
      split = softmax_lib.softmax(x, dims[-1], extra_logit=0.0)  # mtf's ops
    with tf.variable_scope("encoder/block_000/layer_001/DenseReluDense"):
      mtf.softmax(x, dims[-1])  # not in an attention layer: ignored
    found = maps._attention_softmaxes(graph)  # pylint: disable=protected-access
  assert set(found) == {SCOPE % ("encoder", 0), SCOPE % ("decoder", 0)}
  assert found[SCOPE % ("encoder", 0)] is fused
  assert found[SCOPE % ("decoder", 0)] is split


@pytest.fixture(scope="module")
def trained(trained_models):
  """R+V and plain T5 models, trained once per session (conftest.py)."""
  out = {}
  for name, key in (("RV", "random_vanilla"),
                    ("mesh", conftest.MESH_ATTENTION)):
    model_dir, proc = trained_models[key]
    assert proc.returncode == 0, proc.stderr[-3000:]
    out[name] = model_dir
  return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["RV", "mesh"])
def test_first_layer_numpy_equals_mesh_forward_pass(trained, name):
  model_dir = trained[name]
  variables = layers_lib.load_variables(model_dir)
  with open(os.path.join(model_dir, "operative_config.gin")) as f:
    layers = layers_lib.find_attention_layers(variables, f.read())
  kinds = {l.short_kind for l in layers}
  assert kinds == ({"R+V"} if name == "RV" else {"V (mesh)"})
  ids = maps.encode_text("x = [3, 1, 2]; x.sort()")
  real = maps.model_attention(model_dir, ids)
  assert sorted(real) == sorted(l.scope for l in layers)  # no EncDec
  numpy_first = maps.first_layer_attention(variables, layers, ids)
  assert len(numpy_first) == 2
  for scope, weights in numpy_first.items():
    assert real[scope].shape == (2, len(ids), len(ids))
    np.testing.assert_allclose(weights, real[scope], atol=2e-6)
  for scope, weights in real.items():
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    if scope.startswith("decoder"):
      assert np.all(weights[:, np.triu_indices(len(ids), 1)[0],
                            np.triu_indices(len(ids), 1)[1]] == 0.0)


@pytest.mark.slow
def test_draw_writes_every_picture(trained, tmp_path):
  paths = ap.draw([("R+V", trained["RV"]), ("mesh", trained["mesh"])],
                  str(tmp_path), text="abc def", length=20, run_model=False,
                  dpi=40)
  names = sorted(os.path.basename(p) for p in paths)
  assert names == ["histograms.png", "input_R_V.png", "input_mesh.png",
                   "mixture_R_V.png", "synthetic_R_V.png"]
  for path in paths:
    with Image.open(path) as image:
      assert image.format == "PNG"
  with Image.open(tmp_path / "synthetic_R_V.png") as image:  # 2 stacks x 2
    assert image.size == ap.heatmap_size(8, dpi=40)        # layers x 2 heads
  with Image.open(tmp_path / "input_mesh.png") as image:  # layer 0 only
    assert image.size == ap.heatmap_size(4, dpi=40)
  variables = layers_lib.load_variables(trained["RV"])
  for layer in layers_lib.find_attention_layers(variables):
    np.testing.assert_allclose(
        maps.mixture_weights(variables, layer).sum(0), 1.0, rtol=1e-12)
