# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The user's commands come with the package, outside any checkout.

A wheel built from the checkout's sources is installed with
`pip install --no-deps --target` into an empty folder; with only that folder
on PYTHONPATH (the virtual environment provides the dependencies), from a
directory outside the checkout, each console script answers --help with the
installed package, and the export writes a trained model.
"""

import os
import shutil
import subprocess
import sys

import pytest

import conftest

# What setup.py builds the distribution from.
SOURCES = ("setup.py", "MANIFEST.in", "mtf_synthesizer.pth",
           "_mtf_synthesizer_hooks.py", "_mtf_synthesizer_commands.py",
           "mtf_synthesizer", "t5_tasks", "gin")
COMMANDS = ("mtf-synthesizer-export-hf", "mtf-synthesizer-tpu-job",
            "mtf-synthesizer-data",
            "mtf-synthesizer-convert-release-checkpoint",
            "mtf-synthesizer-from-t5", "mtf-synthesizer-flax-from-mesh",
            "mtf-synthesizer-jax-train")


def _run(argv, **kwargs):
  return subprocess.run(argv, capture_output=True, text=True, timeout=900,
                        **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
  """(target folder, environment) of the wheel installed outside the tree."""
  root = tmp_path_factory.mktemp("installed")
  source = root / "source"
  source.mkdir()
  ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
  for name in SOURCES:
    path = os.path.join(conftest.REPO, name)
    if os.path.isdir(path):
      shutil.copytree(path, source / name, ignore=ignore)
    else:
      shutil.copy(path, source / name)
  wheels = root / "wheels"
  proc = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
               "--no-build-isolation", "-w", str(wheels), str(source)],
              cwd=str(root))
  assert proc.returncode == 0, proc.stderr[-3000:]
  (wheel,) = wheels.glob("mtf_synthesizer-*.whl")
  target = root / "site"
  proc = _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
               "--target", str(target), str(wheel)], cwd=str(root))
  assert proc.returncode == 0, proc.stderr[-3000:]
  env = dict(os.environ, PYTHONPATH=str(target))
  return target, env


@pytest.mark.slow
def test_the_wheel_holds_the_commands_and_no_workbench(installed):
  target, env = installed
  for command in COMMANDS:
    assert (target / "bin" / command).exists(), command
  assert not (target / "workbench").exists()
  assert not (target / "tools").exists()
  proc = _run([sys.executable, "-c",
               "import mtf_synthesizer; print(mtf_synthesizer.__file__)"],
              cwd=str(target.parent), env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.strip().startswith(str(target) + os.sep)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_answers_help(installed, command):
  target, env = installed
  proc = _run([str(target / "bin" / command), "--help"],
              cwd=str(target.parent), env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "usage" in (proc.stdout + proc.stderr).lower()


@pytest.mark.slow
def test_the_installed_export_writes_a_trained_model(installed,
                                                     trained_models,
                                                     tmp_path):
  target, env = installed
  model_dir, trained = trained_models["random"]
  assert trained.returncode == 0, trained.stderr[-3000:]
  out = tmp_path / "export"
  proc = _run([str(target / "bin" / COMMANDS[0]), model_dir, str(out)],
              cwd=str(tmp_path), env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (out / "config.json").exists()
  assert os.listdir(out)
