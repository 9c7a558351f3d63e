# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Finetuning through the stock CLI and t5's MtfModel: from T5
(t5_attention), and a synthesizer from its own checkpoint, with
synthesizer/init_from_t5.gin."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import conftest
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

STEPS = conftest.TRAIN_STEPS
ATTN = "encoder/block_000/layer_000/"
BYTES = {"MTF_SYNTH_VOCAB": "byte"}
INIT = "synthesizer/init_from_t5.gin"
SUMMARY = re.compile(r"init_from_t5: (\d+) restored from (\S+), (\d+) fresh"
                     r"(?:: (.*))?$", re.M)
# mesh reads global_step for the learning-rate schedule with no ordering
# against the step's own `assign_add(global_step, 1)`. The noam schedule
# decays linearly to 0 at utils.run.train_steps, so a read that comes after
# the increment in the one finetune step (STEPS -> STEPS + 1) gives a
# learning rate of exactly 0 and no weight changes at all. Without the decay
# the rate is rsqrt(max(step, 10000)) = 0.01 whichever value is read.
NO_DECAY = "learning_rate_schedule_noam.linear_decay_fraction = 0.0"


@pytest.fixture(scope="module")
def pretrained(trained_models):
  """A plain T5 (mesh SelfAttention) model and an R model."""
  out = {}
  for name, key in (("t5", conftest.MESH_ATTENTION), ("random", "random")):
    model_dir, proc = trained_models[key]
    assert proc.returncode == 0, proc.stderr[-3000:]
    out[name] = model_dir
  return out


def _values(model_dir, step):
  reader = tf.train.load_checkpoint(
      os.path.join(model_dir, "model.ckpt-%d" % step))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _summary(stderr):
  """(restored, checkpoint, fresh names) from the one summary line."""
  lines = SUMMARY.findall(stderr)
  assert len(lines) == 1, lines
  restored, checkpoint, fresh, names = lines[0]
  names = names.split(", ") if names else []
  assert len(names) == int(fresh)
  return int(restored), checkpoint, names


def _assert_restored_everything(proc, init, model_dir):
  """Every variable at the first checkpoint is the init checkpoint's."""
  restored, checkpoint, fresh = _summary(proc.stderr)
  assert checkpoint == init
  assert fresh == []
  source = _values(os.path.dirname(init), STEPS)
  start = _values(model_dir, STEPS)
  assert restored == len(start) == len(source)
  assert sorted(start) == sorted(source)
  for name, value in start.items():
    np.testing.assert_array_equal(value, source[name], err_msg=name)


def test_random_vanilla_starts_from_t5_attention_checkpoint(pretrained,
                                                            tmp_path):
  model_dir = str(tmp_path / "rv")
  init = os.path.join(pretrained["t5"], "model.ckpt-%d" % STEPS)
  proc = runner.run(commands.local_train(
      model_dir, "random_vanilla", steps=STEPS + 1, gin_files=[INIT],
      gin_params=["utils.run.init_checkpoint = '%s'" % init, NO_DECAY]),
                       timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  # The first checkpoint is written before the first step (global_step is
  # restored: STEPS), so it holds the initial values.
  start = _values(model_dir, STEPS)
  source = _values(pretrained["t5"], STEPS)
  for name in ("q", "k", "v", "o", "relative_attention_bias"):
    np.testing.assert_array_equal(
        start[ATTN + "SynthesizerAttention/" + name],
        source[ATTN + "SelfAttention/" + name])
  assert ATTN + "SynthesizerAttention/random/R" in start
  assert not any("random/R" in n for n in source)
  np.testing.assert_array_equal(
      start[ATTN + "SynthesizerAttention/mixture/alpha_logits"], 0.0)
  assert ("init_from_t5: %sSynthesizerAttention/q <- %sSelfAttention/q"
          % (ATTN, ATTN)) in proc.stderr
  assert ("init_from_t5: %sSynthesizerAttention/random/R is fresh"
          % ATTN) in proc.stderr
  # One summary: everything but the synthesizer's own weights is restored.
  restored, checkpoint, fresh = _summary(proc.stderr)
  assert checkpoint == init
  assert fresh == sorted(n for n in start if "/random/R" in n or
                         "/mixture/alpha_logits" in n)
  assert restored + len(fresh) == len(start)
  assert len(start) - len(fresh) == len(source)
  # And training went on from there: one step from the restored global_step
  # and values, which R (fresh, all of it trained) shows.
  end = _values(model_dir, STEPS + 1)
  assert end["global_step"] == STEPS + 1
  assert not np.array_equal(end[ATTN + "SynthesizerAttention/random/R"],
                            start[ATTN + "SynthesizerAttention/random/R"])


def _without(init, names, path):
  """Writes a copy of checkpoint `init` without `names`; returns its path."""
  reader = tf.train.load_checkpoint(init)
  keep = sorted(set(reader.get_variable_to_shape_map()) - set(names))
  with tf.Graph().as_default(), tf.Session() as sess:
    sess.run(tf.raw_ops.SaveV2(
        prefix=path, tensor_names=keep, shape_and_slices=[""] * len(keep),
        tensors=[tf.constant(reader.get_tensor(n)) for n in keep]))
  return path


def test_missing_mapped_names_fail_with_their_names(pretrained, tmp_path):
  init = os.path.join(pretrained["t5"], "model.ckpt-%d" % STEPS)
  names = tf.train.load_checkpoint(init).get_variable_to_shape_map()
  slot = sorted(n for n in names
                if n.startswith(ATTN + "SelfAttention/q_slot_"))[0]
  broken = _without(init, [ATTN + "SelfAttention/k", slot],
                    str(tmp_path / "broken.ckpt"))
  model_dir = str(tmp_path / "rv")
  proc = runner.run(commands.local_train(
      model_dir, "random_vanilla", steps=STEPS + 1, gin_files=[INIT],
      gin_params=["utils.run.init_checkpoint = '%s'" % broken]), timeout=900)
  assert proc.returncode != 0
  assert "ValueError: init_from_t5: 2 variable(s)" in proc.stderr
  synth_slot = slot.replace("/SelfAttention/", "/SynthesizerAttention/")
  for graph_name, checkpoint_name in (
      (ATTN + "SynthesizerAttention/k", ATTN + "SelfAttention/k"),
      (synth_slot, slot)):
    assert "  %s (looked for %s or %s)" % (
        graph_name, checkpoint_name, graph_name) in proc.stderr
  assert "mtf_synthesizer.restore_with_casts.allow_fresh" in proc.stderr
  assert not tf.train.latest_checkpoint(model_dir)


@pytest.mark.parametrize("mapping", [False, True],
                         ids=["plain_init_checkpoint", "init_from_t5"])
def test_synthesizer_finetunes_on_another_task(pretrained, tmp_path, mapping):
  """R pretrained on span corruption, finetuned on listops.

  Plain `utils.run.init_checkpoint` (as jobs.cloud_tpu finetunes) and
  with `synthesizer/init_from_t5.gin`, which restores everything under its
  own names.
  """
  model_dir = str(tmp_path / "r_listops")
  init = os.path.join(pretrained["random"], "model.ckpt-%d" % STEPS)
  proc = runner.run(commands.local_train(
      model_dir, "random", steps=STEPS + 1, mixture="listops",
      gin_files=[INIT] if mapping else [],
      gin_params=["utils.run.init_checkpoint = '%s'" % init], env=BYTES),
                       timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  start = _values(model_dir, STEPS)
  source = _values(pretrained["random"], STEPS)
  for name in ("random/R", "kv", "o"):
    key = ATTN + "SynthesizerAttention/" + name
    np.testing.assert_array_equal(start[key], source[key])
  operative = open(os.path.join(model_dir, "operative_config.gin")).read()
  assert "SynthesizerAttention.synthesizers" in operative
  if mapping:
    # Under their own names: the mapped SelfAttention names are not there.
    assert ("init_from_t5: %sSynthesizerAttention/kv <- "
            "%sSynthesizerAttention/kv" % (ATTN, ATTN)) in proc.stderr
    _assert_restored_everything(proc, init, model_dir)


MTF_MODEL_FINETUNE = textwrap.dedent("""\
    import sys
    from absl import logging
    import gin
    import t5.models
    import mtf_synthesizer
    import t5_tasks

    pretrained_dir, model_dir, step = sys.argv[1], sys.argv[2], sys.argv[3]
    logging.set_verbosity(logging.INFO)
    gin.parse_config_file("synthesizer/init_from_t5.gin")
    model = t5.models.MtfModel(
        model_dir=model_dir, tpu=None, mesh_shape="", mesh_devices=[""],
        batch_size=("tokens_per_batch", 256),
        sequence_length={"inputs": 64, "targets": 64},
        learning_rate_schedule=0.01)
    # The checkpoint is a Python argument: finetune() reads the pretrained
    # operative config, where utils.run.init_checkpoint is None, and hands
    # mesh the path, which the mapping is told by its own binding.
    checkpoint = "%s/model.ckpt-%s" % (pretrained_dir, step)
    gin.bind_parameter("mtf_synthesizer.vanilla_to_synthesizer.checkpoint",
                       checkpoint)
    model.finetune("pydocs_span_corruption", finetune_steps=1,
                   pretrained_model_dir=pretrained_dir,
                   pretrained_checkpoint_step=int(step))
    assert gin.query_parameter("utils.run.init_checkpoint") is None
""")


def test_mtf_model_finetune_passes_the_checkpoint_in_python(pretrained,
                                                           tmp_path):
  """t5.models.MtfModel.finetune: the checkpoint reaches mesh in Python,
  the mapping through its own binding (utils.run.init_checkpoint unset)."""
  model_dir = str(tmp_path / "r_mtf_model")
  proc = subprocess.run(
      [sys.executable, "-c", MTF_MODEL_FINETUNE, pretrained["random"],
       model_dir, str(STEPS)],
      capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  init = os.path.join(pretrained["random"], "model.ckpt-%d" % STEPS)
  _assert_restored_everything(proc, init, model_dir)


def test_bfloat16_checkpoint_into_a_float32_run(pretrained, tmp_path):
  """The CLI stores weights as bfloat16 (mesh's default master dtype); a
  float32 run (as a released float32 checkpoint into a bfloat16 run, the
  other way round) restores them cast, and prints the summary after."""
  model_dir = str(tmp_path / "rv_float32")
  init = os.path.join(pretrained["t5"], "model.ckpt-%d" % STEPS)
  source = _values(pretrained["t5"], STEPS)
  stored = {n: v.dtype for n, v in source.items()}
  assert any(d == tf.bfloat16.as_numpy_dtype for d in stored.values())
  proc = runner.run(commands.local_train(
      model_dir, "random_vanilla", steps=STEPS + 1, gin_files=[INIT],
      gin_params=["utils.run.init_checkpoint = '%s'" % init, NO_DECAY,
                  "utils.get_variable_dtype.master_dtype = 'float32'"]),
                       timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  restored, checkpoint, fresh = _summary(proc.stderr)
  assert checkpoint == init
  start = _values(model_dir, STEPS)
  assert restored + len(fresh) == len(start)
  # Every variable mapped from the checkpoint holds its value, now float32.
  checked = 0
  for name, value in start.items():
    source_name = re.sub("/SynthesizerAttention/", "/SelfAttention/", name)
    source_name = re.sub(r"/SelfAttention/kv(_slot_\w+)?$",
                         r"/SelfAttention/v\1", source_name)
    if name in fresh:
      continue
    assert value.dtype != tf.bfloat16.as_numpy_dtype, name
    np.testing.assert_array_equal(
        value, source[source_name].astype(value.dtype), err_msg=name)
    checked += 1
  assert checked == restored == len(source)
  casts = re.findall(r"init_from_t5: \S+ <- \S+ \(cast from bfloat16 to "
                     r"float32\)", proc.stderr)
  assert len(casts) == sum(d == tf.bfloat16.as_numpy_dtype
                           for d in stored.values())
  # The summary comes after the session's initialisation, not before the
  # graph is built.
  plan = proc.stderr.index("init_from_t5: restoring %d from %s" % (restored,
                                                                   init))
  assert plan < proc.stderr.index("init_from_t5: %d restored from" % restored)
