# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every baseline gin file trains through the stock CLI.

One step of a tiny T5 each (all four at once), and the checkpoint holds the
baseline's variables: the convolutions and local attention as an
encoder-decoder on span corruption, Linformer as the encoder-only ListOps
classifier. A baseline that docs/baselines.md trains runs the document's
command (read from it; a temporary model directory and STEPS steps), the
others a one-layer model of the same sizes. What the layers compute, and
how the decoders decode, is checked in process: tests/test_local_conv.py,
tests/test_local_attention.py, tests/test_linformer.py.
"""

import concurrent.futures

import pytest
import tensorflow.compat.v1 as tf

import doc_blocks
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner
from mtf_synthesizer.stock_cli import gin_path

# Runs the stock CLI: `make test-fast` skips it.
pytestmark = pytest.mark.slow

STEPS, LENGTH, K = 1, 64, 16
DOC = "docs/baselines.md"
H, D_KV, D_MODEL = 2, 64, 32   # models/t5.1.1.tiny.gin
WIDTH = 7                      # baselines/_local_conv.gin
BUCKETS = 32                   # T5's relative position buckets

# name -> local_train keyword arguments (those docs/baselines.md does not
# train: the others run the document's command)
_RUNS = {
    "lightweight_conv": {},
    "dynamic_conv": {},
    "local_attention": {},
    "linformer": {
        "mixture": "listops",
        "base_gin_files": [commands.DATASET_GIN, commands.TINY_MODEL_GIN,
                           "experiments/_encoder_classifier.gin"],
        "gin_params": ["LinformerAttention.k = %d" % K],
        "env": {"MTF_SYNTH_VOCAB": "byte"}},
}


def test_every_baseline_file_is_trained_here():
  assert sorted(gin_path.gin_files("baselines")) == sorted(_RUNS)


def _documented(name):
  """docs/baselines.md's command that trains `name`, or None."""
  found = [c for c in doc_blocks.commands(doc_blocks.read_blocks([DOC]))
           if "baselines/%s.gin" % name in c.values("gin_file")]
  assert len(found) <= 1, found
  return found[0] if found else None


def test_the_documents_commands_have_the_sizes_checked_here():
  documented = [n for n in sorted(_RUNS) if _documented(n)]
  assert documented == ["lightweight_conv", "linformer"]
  for name in documented:
    params = _documented(name).values("gin_param")
    assert ("utils.run.sequence_length = {'inputs': %d, 'targets': %d}" % (
        LENGTH, LENGTH)) in params, params
  assert "LinformerAttention.k = %d" % K in _documented(
      "linformer").values("gin_param")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """Trains one tiny model per baseline file; name -> (model_dir, Result)."""
  root = tmp_path_factory.mktemp("baselines")

  def train(name):
    model_dir = str(root / name)
    documented = _documented(name)
    if documented:
      command = doc_blocks.to_stock_command(documented.substituted({
          "--model_dir=" + documented.values("model_dir")[0]:
              "--model_dir=" + model_dir,
          "train_steps = 300": "train_steps = %d" % STEPS,
      }), documented.full_env())
    else:
      command = commands.local_train(
          model_dir, attentions.MESH_SELF_ATTENTION.name, STEPS, length=LENGTH,
          batch_size=2, dims={"num_layers": 1},
          gin_files=["baselines/%s.gin" % name], **_RUNS[name])
    return name, (model_dir, runner.run(command, timeout=900))

  # Most of each run is single-threaded start-up and graph building.
  with concurrent.futures.ThreadPoolExecutor(max_workers=len(_RUNS)) as pool:
    return dict(pool.map(train, sorted(_RUNS)))


def _variables(model_dir, scope):
  """{name below scope: shape} of the checkpoint, without optimizer slots."""
  names = dict(tf.train.list_variables(model_dir))
  return {n[len(scope):]: s for n, s in names.items()
          if n.startswith(scope) and "_slot_" not in n}


def _conv_variables(kind):
  out = {
      "local_conv_inp_0/kernel": [D_MODEL, D_MODEL],
      "local_conv_inp_0/bias": [D_MODEL],
      "local_conv_inp_1/kernel": [D_MODEL, D_MODEL],
      "local_conv_inp_1/bias": [D_MODEL],
      "separable_conv1d/depthwise_conv_hack/depthwise_dense_0/bias":
          [D_MODEL],
      "separable_conv1d/pointwise_dense/kernel": [D_MODEL, D_MODEL],
      "separable_conv1d/pointwise_dense/bias": [D_MODEL],
      "local_conv_attn_op_projection/kernel": [D_MODEL, D_MODEL],
      "local_conv_attn_op_projection/bias": [D_MODEL],
  }
  for i in range(WIDTH):
    if kind == "lightweight_conv":  # one kernel of width 7 per channel
      out["lightwt_depthwise_dense_%d/kernel" % i] = [D_MODEL]
    else:  # each tap's weights predicted from the position's input
      out["dyn_conv_depthwise_dense_%d/kernel" % i] = [D_MODEL, D_MODEL]
      out["dyn_conv_depthwise_dense_%d/bias" % i] = [D_MODEL]
  return out


_ATTENTION = {"q": [D_MODEL, H * D_KV], "k": [D_MODEL, H * D_KV],
              "v": [D_MODEL, H * D_KV], "o": [H * D_KV, D_MODEL]}


def _expected(name):
  """{scope: {variable below it: shape}} of the baseline's attention."""
  if name == "linformer":  # encoder-only: one stack; E, F: [heads, N, k]
    projection = [H, LENGTH, K]
    return {"transformer/block_000/layer_000/LinformerAttention/":
                dict(_ATTENTION, E=projection, F=projection)}
  if name == "local_attention":  # T5's bias_shared: in the first layer
    layer = dict(_ATTENTION, relative_attention_bias=[H, BUCKETS])
    return {"%s/block_000/layer_000/WindowedSelfAttention/" % stack: layer
            for stack in ("encoder", "decoder")}
  return {"%s/block_000/layer_000/DecodableLocalConvAttnBlock/" % stack:
              _conv_variables(name) for stack in ("encoder", "decoder")}


@pytest.mark.parametrize("name", sorted(_RUNS))
def test_baseline_trains_with_its_variables(trained, name):
  model_dir, result = trained[name]
  assert result.returncode == 0, result.output[-3000:]
  assert "Loss for final step" in result.output
  for scope, expected in _expected(name).items():
    assert _variables(model_dir, scope) == expected, scope
  names = dict(tf.train.list_variables(model_dir))
  # The baseline replaced self-attention everywhere it applies.
  replaced = [n for n in names if "/SelfAttention/" in n]
  if name == "linformer":
    assert not replaced
    assert not [n for n in names if n.startswith(("encoder/", "decoder/"))]
    assert names["transformer/positional_embedding"] == [512, D_MODEL]
    assert not [n for n in names if "relative_attention_bias" in n]
  else:
    assert not replaced, replaced
