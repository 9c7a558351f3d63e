# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mtf-synthesizer-jax-train's bad input: one line, exit status 2, nothing
written.

Each case runs the command's `main` in this process (a subprocess where
the case needs more devices than this process's JAX has) on the tiny
offline run of gin/flax/train/tiny_offline.gin, with one thing wrong, and
checks that the command returns 2, that stderr holds exactly one line, the
command's, naming the problem, and that the model directory is as it was
(absent, or its files unchanged).
"""

import os
import subprocess
import sys

import flax.linen as nn
import gin
import jax
import jax.numpy as jnp
import pytest

from mtf_synthesizer.commands import jax_train
from mtf_synthesizer.flax_model import checkpointing
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.flax_train import data
from mtf_synthesizer.flax_train import train as train_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PROGRAM = "mtf-synthesizer-jax-train: "
VARIANT = "flax/random.gin"
RUN = "flax/train/tiny_offline.gin"
# The tiny run's model with another variant (its model.gin differs).
OTHER = dict(vocab_size=384, d_model=32, num_heads=4, head_dim=8, d_ff=64,
             num_encoder_layers=2, num_decoder_layers=2, max_length=32,
             dropout_rate=0.0, variant="dense")


@pytest.fixture(scope="module", autouse=True)
def _tasks_imported():
  """t5_tasks imported before any case: its import's noise is not theirs."""
  data.import_modules(data.DEFAULT_MODULES)


@pytest.fixture(autouse=True)
def _fresh_gin(monkeypatch):
  monkeypatch.delenv("TPU_WORKER_HOSTNAMES", raising=False)
  gin.clear_config()
  yield
  gin.clear_config()


def _snapshot(path):
  """The directory's files and their bytes (None: no directory)."""
  if not os.path.exists(path):
    return None
  out = {}
  for root, _, names in os.walk(path):
    for name in names:
      full = os.path.join(root, name)
      with open(full, "rb") as f:
        out[os.path.relpath(full, path)] = f.read()
  return out


def _argv(model_dir, *extra, gin_files=(VARIANT, RUN)):
  return (["--model_dir=%s" % model_dir] +
          ["--gin_file=%s" % f for f in gin_files] + list(extra))


def _refused(capsys, model_dir, argv, *words):
  """Runs main; checks exit 2, one stderr line with `words`, nothing written.

  Returns:
    The line.
  """
  before = _snapshot(model_dir)
  gin.clear_config()
  capsys.readouterr()
  assert jax_train.main(argv) == 2
  err = capsys.readouterr().err
  lines = err.splitlines()
  assert len(lines) == 1, err
  assert lines[0].startswith(PROGRAM), err
  for word in words:
    assert word in lines[0], (word, lines[0])
  assert _snapshot(model_dir) == before
  return lines[0]


def test_no_variant(tmp_path, capsys):
  md = str(tmp_path / "md")
  _refused(capsys, md, _argv(md, gin_files=(RUN,)), "no variant chosen",
           "T5Config.variant")


def test_mesh_shape_that_does_not_divide_the_devices(tmp_path, capsys):
  md = str(tmp_path / "md")
  ways = jax.device_count() + 1
  _refused(capsys, md, _argv(md, "--gin.mesh_shape.model=%d" % ways),
           "mesh_shape", "do not divide by %d" % ways)
  _refused(capsys, md, _argv(md, "--gin.mesh_shape.data=%d" % ways,
                             "--gin.mesh_shape.model=1"),
           "mesh_shape", "needs %d devices" % ways)


def test_batch_that_does_not_divide_the_data_axis(tmp_path, capsys):
  md = str(tmp_path / "md")
  argv = _argv(md, "--gin.train.batch_size=3", "--gin.mesh_shape.data=2")
  words = ("a batch of 3 sequences", "data axis")
  if jax.device_count() >= 2:
    line = _refused(capsys, md, argv, *words)
  else:  # two devices: a process of its own
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TPU_WORKER_HOSTNAMES", None)
    proc = subprocess.run(
        [sys.executable, "-m", "mtf_synthesizer.commands.jax_train",
         "--cpu_devices=2"] + argv, capture_output=True, text=True,
        cwd=str(tmp_path), env=env, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    (line,) = [l for l in proc.stderr.splitlines()
               if l.startswith(PROGRAM)]
    assert not os.path.exists(md)
  for word in words:
    assert word in line, line


def test_model_directory_of_another_model(tmp_path, capsys):
  md = tmp_path / "md"
  md.mkdir()
  (md / train_lib.MODEL_CONFIG).write_text(checkpointing.config_gin(
      t5.T5Config(**OTHER), False))
  (md / "checkpoint_2").mkdir()
  (md / "checkpoint_2" / "x").write_text("its step")
  _refused(capsys, str(md), _argv(str(md)), str(md), "another model",
           "variant")


def test_unknown_task(tmp_path, capsys):
  md = str(tmp_path / "md")
  _refused(capsys, md, _argv(md, '--gin.train.mixture_or_task_name="nope"'),
           "unknown task or mixture 'nope'")


def test_several_hosts_without_multi_host(tmp_path, capsys, monkeypatch):
  monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "10.0.0.2,10.0.0.3")
  md = str(tmp_path / "md")
  _refused(capsys, md, _argv(md), "2 hosts", "--multi_host",
           "--worker=all")


def test_platform_tpu_without_a_tpu(tmp_path, capsys):
  md = str(tmp_path / "md")
  _refused(capsys, md, _argv(md, "--platform=tpu"), "no TPU visible",
           "jax[tpu]")


def test_missing_gin_file(tmp_path, capsys):
  md = str(tmp_path / "md")
  _refused(capsys, md, _argv(md, gin_files=(VARIANT, "flax/train/nope.gin")),
           "--gin_file=flax/train/nope.gin", "no such file")


def test_init_checkpoint_that_is_not_there(tmp_path, capsys):
  md = str(tmp_path / "md")
  missing = str(tmp_path / "no_such_model")
  _refused(capsys, md, _argv(md, "--gin.train.init_checkpoint=%r" % missing),
           "init_checkpoint=%s" % missing)


def test_init_checkpoint_of_another_variant(tmp_path, capsys):
  other = t5.make_model(False, t5.T5Config(**OTHER))
  tokens = jnp.ones((1, 4), jnp.int32)
  params = nn.unbox(other.init(jax.random.PRNGKey(0), tokens, tokens,
                               enable_dropout=False)["params"])
  converted = str(tmp_path / "converted")
  checkpointing.save(converted, params, train_lib.model_config_text(other))
  md = str(tmp_path / "md")
  _refused(capsys, md, _argv(md, "--gin.train.init_checkpoint=%r" %
                             converted), converted, "another model")


def test_init_checkpoint_may_differ_in_dropout_only(tmp_path):
  """Finetuning with dropout from a converted model trained without."""
  def tiny(**overrides):
    return t5.make_model(False, t5.T5Config(**dict(OTHER, **overrides)))
  pretrained = tiny()
  tokens = jnp.ones((1, 4), jnp.int32)
  params = nn.unbox(pretrained.init(jax.random.PRNGKey(0), tokens, tokens,
                                    enable_dropout=False)["params"])
  converted = str(tmp_path / "converted")
  checkpointing.save(converted, params,
                     train_lib.model_config_text(pretrained))
  restored, init = train_lib.initial_params(tiny(dropout_rate=0.1),
                                            converted, 0)
  assert init == converted
  assert jax.tree.all(jax.tree.map(
      lambda a, b: bool((a == b).all()), restored, params))
  with pytest.raises(train_lib.TrainError, match="another model"):
    train_lib.initial_params(tiny(d_ff=32), converted, 0)
