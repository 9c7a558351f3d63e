# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""MTF_SYNTH_GRAPH_OPTIMIZER: the tests' CLI runs without Grappler.

The switch is the suite's (cli_site/graph_optimizer.py), not the package's.

The session config is read where the estimator reads it
(`maybe_overwrite_model_dir_and_session_config`, which fills a RunConfig
without one from the default). The tests' stock-CLI runs set the variable
to 0 (conftest.py); test_preemption.py runs with TF's default.
"""

import pytest
from tensorflow_estimator.python.estimator import estimator as estimator_lib
from tensorflow_estimator.python.estimator import run_config
from tensorflow_estimator.python.estimator.tpu import tpu_config

import graph_optimizer
from mtf_synthesizer.stock_cli import cpu_devices

_DEFAULT = run_config.get_default_session_config


@pytest.fixture(autouse=True)
def restore_default(monkeypatch):
  yield
  monkeypatch.delenv(cpu_devices.ENV_VAR, raising=False)
  monkeypatch.delenv(graph_optimizer.ENV_VAR, raising=False)
  cpu_devices.install_from_env()
  graph_optimizer.install_from_env()
  assert run_config.get_default_session_config is _DEFAULT


def _estimator_session_config(tmp_path):
  config = estimator_lib.maybe_overwrite_model_dir_and_session_config(
      tpu_config.RunConfig(), str(tmp_path))
  return config.session_config


@pytest.mark.parametrize("value,optimizes", [("", True), ("1", True),
                                             ("0", False)])
def test_env_var_sets_the_estimators_session_config(monkeypatch, tmp_path,
                                                     value, optimizes):
  monkeypatch.setenv(graph_optimizer.ENV_VAR, value)
  assert graph_optimizer.install_from_env() == optimizes
  session_config = _estimator_session_config(tmp_path)
  rewrite = session_config.graph_options.rewrite_options
  assert rewrite.disable_meta_optimizer == (not optimizes)
  # The rest of TF's default stays.
  assert session_config.allow_soft_placement
  assert rewrite.meta_optimizer_iterations == (
      _DEFAULT().graph_options.rewrite_options.meta_optimizer_iterations)


def test_installed_twice_then_back_to_the_default(monkeypatch, tmp_path):
  monkeypatch.setenv(graph_optimizer.ENV_VAR, "0")
  graph_optimizer.install_from_env()
  graph_optimizer.install_from_env()
  monkeypatch.setenv(graph_optimizer.ENV_VAR, "1")
  graph_optimizer.install_from_env()
  assert run_config.get_default_session_config is _DEFAULT
  rewrite = _estimator_session_config(tmp_path).graph_options.rewrite_options
  assert not rewrite.disable_meta_optimizer


@pytest.mark.parametrize("order", [(cpu_devices, graph_optimizer),
                                   (graph_optimizer, cpu_devices)])
def test_composes_with_cpu_devices(monkeypatch, tmp_path, order):
  """In either order: the devices' config, without the optimizer."""
  monkeypatch.setenv(cpu_devices.ENV_VAR, "4")
  monkeypatch.setenv(graph_optimizer.ENV_VAR, "0")
  for setting in order:
    setting.install_from_env()
  session_config = _estimator_session_config(tmp_path)
  assert session_config.device_count["CPU"] == 4
  assert not session_config.allow_soft_placement
  assert session_config.graph_options.rewrite_options.disable_meta_optimizer


@pytest.mark.parametrize("value", ["no", "2", "false"])
def test_bad_value_is_a_clear_error(monkeypatch, value):
  monkeypatch.setenv(graph_optimizer.ENV_VAR, value)
  with pytest.raises(ValueError,
                     match="MTF_SYNTH_GRAPH_OPTIMIZER must be 0 or 1"):
    graph_optimizer.install_from_env()
