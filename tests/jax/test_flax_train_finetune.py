# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Finetuning a T5.1.1 mesh checkpoint into D+V with mtf-synthesizer-jax-train.

The checkpoint is the stock CLI's of a tiny T5.1.1 with mesh's own
attention (tests/data/mesh_reference/t5.1.1-encdec-t5_attention: a
released T5's layout). Starting D+V from it (`train.init_checkpoint`,
`init_from_t5`'s rule) must restore every weight of the checkpoint, each
bit for bit (compared here by values, independently of the name map: a
layout change is a reshape in C order), draw only the Synthesizer's own
parameters, and train: the command runs, its losses are finite, and its
evaluations write their metrics (the teacher-forced one and the task's
own, t5's accuracy of ListOps decoded).
"""

import os
import subprocess
import sys

import gin
import jax
import numpy as np
import pytest
from flax import traverse_util

from mtf_synthesizer.checkpoints import tf_format
from mtf_synthesizer.flax_train import checkpoints
from mtf_synthesizer.flax_train import summaries
from mtf_synthesizer.flax_train import train as train_lib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHECKPOINT = os.path.join(REPO, "tests", "data", "mesh_reference",
                          "t5.1.1-encdec-t5_attention")
SIZES = os.path.join(REPO, "tests", "data", "mesh_reference",
                     "flax_sizes.gin")
GIN_FILES = ["flax/t5_1_1.gin", SIZES, "flax/dense_vanilla.gin"]
RUN = [
    "train.mixture_or_task_name = 'pydocs_span_corruption'",
    "train.task_feature_lengths = {'inputs': 8, 'targets': 8}",
    "train.batch_size = 4",
    "train.train_steps = 3",
    "train.learning_rate_schedule = "
    "@learning_rate_schedules.constant_learning_rate",
    "learning_rate_schedules.constant_learning_rate.learning_rate = 0.001",
    "train.log_every_steps = 1",
    "train.eval_every_steps = 3",
    "train.eval_steps = 1",
    "train.init_checkpoint = %r" % CHECKPOINT,
]
# The Synthesizer's own parameters in D+V: D's projections, eq. 8's weights.
SYNTHESIZER_OWN = ("/dense/", "/mixture/")


@pytest.fixture(autouse=True)
def _byte_vocabulary(monkeypatch):
  monkeypatch.setenv("MTF_SYNTH_VOCAB", "byte")


def _prepared(model_dir):
  gin.clear_config()
  train_lib.data_lib.import_modules()
  gin.parse_config_files_and_bindings(
      GIN_FILES, RUN + ["train.model_dir = %r" % str(model_dir)])
  try:
    return train_lib.train(check_only=True)
  finally:
    gin.clear_config()


def test_every_t5_weight_is_restored_bit_for_bit(tmp_path):
  setup = _prepared(tmp_path / "run")
  assert not os.path.exists(tmp_path / "run"), "prepare wrote the model dir"
  params = {p: np.asarray(v) for p, v in traverse_util.flatten_dict(
      setup.params, sep="/").items()}
  reader = tf_format.load_checkpoint(CHECKPOINT)
  weights = [n for n in reader.variable_names()
             if "_slot_" not in n and n != "global_step"]
  assert weights
  unmatched_params = set(params)
  for name in weights:
    value = np.asarray(reader.read(name), np.float32).ravel()
    twins = [p for p in unmatched_params
             if params[p].size == value.size and
             np.array_equal(params[p].ravel(), value)]
    assert twins, "checkpoint weight %s is in no parameter" % name
    unmatched_params.discard(sorted(twins)[0])
  # What the checkpoint did not give is the Synthesizer's own, drawn.
  assert unmatched_params
  for path in unmatched_params:
    assert any(own in "/" + path for own in SYNTHESIZER_OWN), path
  assert "drawn" in setup.init and CHECKPOINT in setup.init


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
  """The command's finetune run: (its model directory, its result)."""
  model_dir = tmp_path_factory.mktemp("finetune") / "run"
  argv = [sys.executable, "-m", "mtf_synthesizer.commands.jax_train",
          "--model_dir=%s" % model_dir]
  argv += ["--gin_file=%s" % f for f in GIN_FILES]
  argv += ["--gin.%s" % b.replace(" = ", "=", 1) for b in RUN + [
      # A task with metrics (t5's accuracy), decoded and scored.
      "train.mixture_or_task_name = 'listops'",
      "train.task_feature_lengths = {'inputs': 8, 'targets': 4}",
      "train.decode_eval_every_steps = 3",
      "train.decode_eval_examples = 4"]]
  done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True,
                        env=dict(os.environ, MTF_SYNTH_VOCAB="byte"),
                        timeout=600)
  return model_dir, done


def test_the_command_finetunes_and_evaluates(finetuned):
  model_dir, done = finetuned
  assert done.returncode == 0, done.stderr[-3000:]
  assert "from %s" % CHECKPOINT in done.stderr
  losses = summaries.read_scalars(str(model_dir / "train"))["loss"]
  assert sorted(losses) == [1, 2, 3]
  assert all(np.isfinite(v) for v in losses.values())
  evaluated = summaries.read_scalars(str(model_dir / "eval"))
  assert set(evaluated["loss"]) == {3}
  assert set(evaluated["listops/accuracy"]) == {3}
  assert "listops/accuracy" in done.stderr
  assert os.path.isdir(model_dir / "checkpoint_3")
  assert os.path.exists(model_dir / "operative_config.gin")


def test_a_trainer_checkpoint_starts_another_finetune(finetuned, tmp_path):
  model_dir, done = finetuned
  assert done.returncode == 0, done.stderr[-3000:]
  gin.clear_config()
  train_lib.data_lib.import_modules()
  step_dir = str(model_dir / "checkpoint_3")
  gin.parse_config_files_and_bindings(
      GIN_FILES, RUN + ["train.model_dir = %r" % str(tmp_path / "next"),
                        "train.init_checkpoint = %r" % step_dir])
  try:
    setup = train_lib.train(check_only=True)
    manager = checkpoints.manager(str(model_dir))
    kept = checkpoints.restore(manager, 3, setup.trainer.abstract_state)
    manager.close()
  finally:
    gin.clear_config()
  assert setup.init == step_dir
  want = traverse_util.flatten_dict(jax.device_get(kept.params), sep="/")
  got = traverse_util.flatten_dict(setup.params, sep="/")
  assert sorted(got) == sorted(want)
  for path in want:
    np.testing.assert_array_equal(np.asarray(got[path]), want[path])
  assert not os.path.exists(tmp_path / "next")
