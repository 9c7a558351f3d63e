# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""MTF_SYNTH_GRAPH_FILES: the tests' CLI runs without graph files.

The switch is the suite's (cli_site/graph_files.py, applied in the stock
CLI by cli_site/sitecustomize.py), not the package's. The tests' stock-CLI
runs set it to 0 (conftest.py); test_preemption.py runs with TF's default
and checks the files are there, and test_variants_cli.py that the
variants' runs have none.
"""

import importlib.util
import subprocess
import sys

import pytest
import tensorflow.compat.v1 as tf
from tensorflow_estimator.python.estimator.tpu import tpu_config

import conftest
import graph_files


@pytest.fixture(autouse=True)
def restore_defaults(monkeypatch):
  yield
  monkeypatch.delenv(graph_files.ENV_VAR, raising=False)
  graph_files.install_from_env()


def _hook_saves_graph(tmp_path):
  hook = tf.train.CheckpointSaverHook(str(tmp_path), save_steps=1)
  return hook._save_graph_def  # pylint: disable=protected-access


@pytest.mark.parametrize("value,written", [("", True), ("1", True),
                                           ("0", False)])
def test_env_var_sets_the_defaults(monkeypatch, tmp_path, value, written):
  monkeypatch.setenv(graph_files.ENV_VAR, value)
  assert graph_files.install_from_env() == written
  assert _hook_saves_graph(tmp_path) == written
  config = tpu_config.RunConfig(model_dir=str(tmp_path))
  assert config.checkpoint_save_graph_def == written
  # An explicit argument still wins.
  explicit = tf.train.CheckpointSaverHook(str(tmp_path), save_steps=1,
                                          save_graph_def=True)
  assert explicit._save_graph_def  # pylint: disable=protected-access


@pytest.mark.parametrize("value", ["no", "2", "false"])
def test_bad_value_is_a_clear_error(monkeypatch, value):
  monkeypatch.setenv(graph_files.ENV_VAR, value)
  with pytest.raises(ValueError, match="MTF_SYNTH_GRAPH_FILES must be 0 or 1"):
    graph_files.install_from_env()


def test_the_switches_are_the_suites_not_the_packages():
  for name in ("graph_files", "graph_optimizer"):
    assert importlib.util.find_spec("mtf_synthesizer.stock_cli." + name) is (
        None)
  # Outside the stock CLI the suite's start-up file imports nothing.
  code = ("import sys; print('sitecustomize' in sys.modules, "
          "'graph_files' in sys.modules, 'tensorflow' in sys.modules)")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=300, cwd=conftest.CLI_SITE)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.split() == ["True", "False", "False"]
