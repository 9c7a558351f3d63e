# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The JAX trainer takes the stock CLI's 20 steps, loss for loss.

Each case of tests/data/mesh_training/ (tools/mesh_training_reference.py)
keeps the stock CLI's step-0 checkpoint of a tiny T5.1.0 encoder-decoder
(V and D+V), the 20 batches the CLI read from `pydocs_span_corruption`
(no packing, no shuffling, seed 1) and the 20 training losses it computed
with mesh's Adafactor, t5's `rsqrt_no_ramp_down` schedule and z_loss,
dropout off, float32 (tests/test_mesh_training_reference.py reruns the CLI
and checks them). Here `train()` (what `mtf-synthesizer-jax-train` runs)
starts from that checkpoint (`train.init_checkpoint`) with the case's
recipe as gin bindings, reads the same task through seqio (the batches
must be the kept ones) and must compute each step's loss within 1e-4
relative of the CLI's.
"""

import json
import os

import gin
import numpy as np
import pytest

from mtf_synthesizer.flax_train import data
from mtf_synthesizer.flax_train import train as train_lib

ROOT = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "data", "mesh_training")
CASES = sorted(n for n in os.listdir(ROOT)
               if os.path.exists(os.path.join(ROOT, n, "case.json")))
RTOL = 1e-4
# mesh's Adafactor arguments the JAX optimizer takes by the same names.
OPTIMIZER_ARGUMENTS = ("beta1", "clipping_threshold", "decay_rate",
                       "epsilon1", "epsilon2", "factored",
                       "min_dim_size_to_factor",
                       "multiply_by_parameter_scale")


def _case(name):
  with open(os.path.join(ROOT, name, "case.json")) as f:
    return json.load(f)


def bindings(case, model_dir):
  """The case's model and recipe as gin bindings of the JAX trainer."""
  out = ["import mtf_synthesizer.flax_model",
         "import mtf_synthesizer.flax_train.train"]
  for field, value in sorted(case["t5_config"].items()):
    out.append("T5Config.%s = %r" % (
        field, tuple(value) if isinstance(value, list) else value))
  schedule = case["learning_rate_schedule"]
  name = schedule["name"].split(".")[-1]
  out.append("train.learning_rate_schedule = @learning_rate_schedules.%s"
             % name)
  for key, value in sorted(schedule["parameters"].items()):
    out.append("learning_rate_schedules.%s.%s = %r" % (name, key, value))
  optimizer = case["optimizer"]["parameters"]
  for key, value in sorted(optimizer.items()):
    if key in OPTIMIZER_ARGUMENTS:
      out.append("AdafactorOptimizer.%s = %r" % (key, value))
    else:  # mesh's arguments the JAX side does not have: unused here
      assert value is None, (key, value)
  lengths = case["sequence_length"]
  out += [
      "train.model_dir = %r" % model_dir,
      "train.mixture_or_task_name = %r" % case["data"]["mixture"],
      "train.task_feature_lengths = %r" % lengths,
      "train.batch_size = %d" % case["batch_size"],
      "train.train_steps = %d" % case["steps"],
      "train.init_checkpoint = %r" % os.path.join(
          ROOT, case["_name"], case["initial_checkpoint"]),
      "train.shuffle = %r" % case["data"]["shuffle"],
      "train.data_seed = %r" % case["data"]["seed"],
      "train.z_loss = %r" % case["z_loss"],
      "train.loss_denominator = %r" % case["loss_denominator"],
      "train.log_every_steps = 1",
  ]
  return out


@pytest.fixture(autouse=True)
def _byte_vocabulary(monkeypatch):
  monkeypatch.setenv("MTF_SYNTH_VOCAB", "byte")
  data.import_modules()
  yield
  gin.clear_config()


def test_the_tasks_batches_are_the_clis():
  case = _case(CASES[0])
  kept = np.load(os.path.join(ROOT, CASES[0], "batches.npz"))
  batches = data.batches(case["data"]["mixture"], case["data"]["split"],
                         case["sequence_length"], case["batch_size"],
                         shuffle=case["data"]["shuffle"],
                         seed=case["data"]["seed"])
  for step in range(case["steps"]):
    batch = next(batches)
    np.testing.assert_array_equal(batch["encoder_input_tokens"],
                                  kept["inputs"][step])
    np.testing.assert_array_equal(batch["decoder_target_tokens"],
                                  kept["targets"][step])
    # The decoder reads the targets shifted right (mesh's
    # autoregressive_inputs).
    shifted = np.pad(kept["targets"][step], ((0, 0), (1, 0)))[:, :-1]
    np.testing.assert_array_equal(batch["decoder_input_tokens"], shifted)


@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_give_the_clis_losses(name, tmp_path):
  case = dict(_case(name), _name=name)
  gin.clear_config()
  gin.parse_config(bindings(case, str(tmp_path / "run")))
  run = train_lib.train()
  assert run.start_step == 0 and "restored" in run.init
  got = [run.losses[s] for s in range(case["steps"])]
  worst = float(np.max(np.abs(np.subtract(got, case["losses"])) /
                      np.abs(case["losses"])))
  print("%s: 20 losses within %.2g relative of the CLI's" % (name, worst))
  np.testing.assert_allclose(got, case["losses"], rtol=RTOL)
