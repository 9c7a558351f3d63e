# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What was written before the subpackages still works with them.

`data/before_subpackages/` holds two tiny models trained by the stock CLI
with the flat package (every module at `mtf_synthesizer/`'s top level):
R+V with the lean Adafactor, and the local-attention baseline, whose
operative config imports `mtf_synthesizer.local_attention`. Their operative
configs parse, build the models and restore their checkpoints, and the
logits are those the flat package computed (`expected_logits.npy`, written
by `_logits` then). The modules' former paths import the modules they moved
to.
"""

import importlib
import os

import gin
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import utils
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import lowering as lowering_lib
import mtf_synthesizer
import t5_tasks  # pylint: disable=unused-import  (the configs bind its tasks)

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                    "before_subpackages")
MODELS = ("random_vanilla", "local_attention")
# Inputs and targets of the models (byte ids; 1 is EOS).
IDS = np.array([[40, 51, 98, 104, 33, 101, 110, 100, 60, 71, 99, 32, 120,
                 61, 62, 1]], np.int32)


def _logits(model_dir: str) -> np.ndarray:
  """The model of an operative config, restored from its checkpoint."""
  with gin.unlock_config():
    gin.clear_config()
    gin.parse_config_file(os.path.join(model_dir, "operative_config.gin"))
  checkpoint = tf.train.latest_checkpoint(model_dir)
  shapes = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
  vocab_size = shapes["decoder/logits/kernel"][1]

  def logits_fn(imported):
    model = transformer.make_bitransformer(
        input_vocab_size=vocab_size, output_vocab_size=vocab_size)
    logits, _ = model.call_simple(
        inputs=imported["inputs"], targets=imported["targets"],
        compute_loss=False, mode=tf.estimator.ModeKeys.EVAL,
        variable_dtype=utils.get_variable_dtype())
    return logits

  try:
    return lowering_lib.restored_logits(
        checkpoint, {"inputs": IDS, "targets": IDS}, logits_fn)
  finally:
    with gin.unlock_config():
      gin.clear_config()


@pytest.mark.parametrize("name", MODELS)
def test_an_operative_config_of_the_flat_package_restores(name):
  model_dir = os.path.join(DATA, name)
  with open(os.path.join(model_dir, "operative_config.gin")) as f:
    config = f.read()
  # Written before the move: the former paths, not the subpackages.
  assert "mtf_synthesizer.baselines" not in config
  assert "mtf_synthesizer.core" not in config
  logits = _logits(model_dir)  # every variable restored (partial=False)
  expected = np.load(os.path.join(model_dir, "expected_logits.npy"))
  np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_former_module_paths_are_the_modules():
  # pylint: disable=protected-access
  assert mtf_synthesizer._FORMER_PATHS
  for former, now in sorted(mtf_synthesizer._FORMER_PATHS.items()):
    module = importlib.import_module("mtf_synthesizer." + former)
    assert module is importlib.import_module("mtf_synthesizer." + now)
    assert getattr(mtf_synthesizer, former) is module, former
    assert module.__spec__.name == "mtf_synthesizer." + now
    assert not os.path.exists(os.path.join(
        os.path.dirname(mtf_synthesizer.__file__), former + ".py")), former


def test_former_imports_of_users_still_work():
  # pylint: disable=g-import-not-at-top,unused-import,reimported
  from mtf_synthesizer import synthesizers
  from mtf_synthesizer.layer import SynthesizerAttention
  from mtf_synthesizer.release import composition
  import mtf_synthesizer.checkpoints
  assert synthesizers.Random is mtf_synthesizer.Random
  assert SynthesizerAttention is mtf_synthesizer.SynthesizerAttention
  assert composition("random")[0][0].name == "random"
  assert mtf_synthesizer.checkpoints.vanilla_to_synthesizer is (
      mtf_synthesizer.checkpoints.from_t5.vanilla_to_synthesizer)
