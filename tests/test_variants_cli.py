# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every variant gin file trains a tiny bitransformer through the stock CLI.

Checks that the checkpoint holds exactly the variables Table 1 implies, in
every self-attention layer of the encoder and the decoder, and that Fixed
Random has no optimizer slot.
"""

import concurrent.futures
import os
import subprocess
import sys

import pytest
import tensorflow.compat.v1 as tf

CLI = os.path.join(os.path.dirname(sys.executable), "t5_mesh_transformer")
N = 64           # SynthesizerAttention.max_length = sequence length
H, D_KV, D_MODEL = 2, 64, 32   # models/t5.1.1.tiny.gin
K = 8            # FactorizedRandom default rank (paper)

_QKV = {"q": [D_MODEL, H * D_KV], "k": [D_MODEL, H * D_KV],
        "v": [D_MODEL, H * D_KV]}
_VALUE = {"kv": [D_MODEL, H * D_KV]}
_PARTS = {
    "R": {"random/R": [H, N, N]},
    "Fix": {"fixed_random/R": [H, N, N]},
    "FR": {"factorized_random/R1": [H, N, K],
           "factorized_random/R2": [H, N, K]},
    "D": {"dense/w1": [D_MODEL, H, D_KV], "dense/b1": [H, D_KV],
          "dense/w2": [H, D_KV, N], "dense/b2": [H, N]},
    "FD": {"factorized_dense/w1": [D_MODEL, H, D_KV],
           "factorized_dense/b1": [H, D_KV],
           "factorized_dense/wa": [H, D_KV, 8], "factorized_dense/ba": [H, 8],
           "factorized_dense/wb": [H, D_KV, 8], "factorized_dense/bb": [H, 8]},
    "V": _QKV,
}


def _expected(*parts):
  out = {"o": [H * D_KV, D_MODEL]}
  for p in parts:
    out.update(_PARTS[p])
  if "V" not in parts:
    out.update(_VALUE)
  if len(parts) > 1:
    out["mixture/alpha_logits"] = [len(parts), H]
  return out


VARIANTS = {
    "vanilla": _expected("V"),
    "random": _expected("R"),
    "fixed_random": _expected("Fix"),
    "factorized_random": _expected("FR"),
    "dense": _expected("D"),
    "factorized_dense": _expected("FD"),
    "random_dense": _expected("R", "D"),
    "dense_vanilla": _expected("D", "V"),
    "random_vanilla": _expected("R", "V"),
    "factorized_random_vanilla": _expected("FR", "V"),
}


def train_command(model_dir, variant, steps=2):
  """The stock CLI command for a tiny model with one variant file."""
  return [
      CLI, "--module_import=mtf_synthesizer", "--module_import=t5_tasks",
      "--model_dir=" + model_dir, "--gin_file=dataset.gin",
      "--gin_file=models/t5.1.1.tiny.gin",
      "--gin_file=synthesizer/%s.gin" % variant,
      "--gin_param=MIXTURE_NAME = 'pydocs_span_corruption'",
      "--gin_param=utils.run.mesh_shape = ''",
      "--gin_param=utils.run.mesh_devices = ['']",
      "--gin_param=utils.run.train_steps = %d" % steps,
      "--gin_param=utils.run.save_checkpoints_steps = %d" % steps,
      "--gin_param=utils.run.sequence_length = "
      "{'inputs': %d, 'targets': %d}" % (N, N),
      "--gin_param=utils.run.batch_size = ('tokens_per_batch', 256)",
      "--gin_param=SynthesizerAttention.max_length = %d" % N,
  ]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  root = tmp_path_factory.mktemp("variants")

  def run(variant):
    model_dir = str(root / variant)
    proc = subprocess.run(train_command(model_dir, variant),
                          capture_output=True, text=True, timeout=900)
    return variant, model_dir, proc

  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    return {v: (d, p) for v, d, p in pool.map(run, sorted(VARIANTS))}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_trains_with_table_1_variables(trained, variant):
  model_dir, proc = trained[variant]
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
  if variant == "fixed_random":
    assert not any("fixed_random/R_slot" in n for n in slots)
