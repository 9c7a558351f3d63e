# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Shared fixtures: tiny models trained once per session by the stock CLI.

The tests run against the working tree: its root goes first on `sys.path`
here and on `PYTHONPATH` for the stock-CLI subprocesses, so an edit is
tested without reinstalling. The installed copy is still needed for its
start-up hook (`mtf_synthesizer.pth`); a stale one stops the run with a
message to run `make install`.
"""

import concurrent.futures
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (REPO, os.environ.get("PYTHONPATH")) if p)


def _check_installed_hook():
  """Exits when the installed start-up hook is missing or stale."""
  hooks = sys.modules.get("_mtf_synthesizer_hooks")
  if hooks is None:
    pytest.exit("mtf_synthesizer's start-up hook did not run: the package is "
                "not installed in this environment. Run `make install` (or "
                "`make test`).", returncode=2)
  with open(hooks.__file__) as installed, open(
      os.path.join(REPO, "_mtf_synthesizer_hooks.py")) as source:
    if installed.read() != source.read():
      pytest.exit("The installed start-up hook (%s) differs from the working "
                  "tree's _mtf_synthesizer_hooks.py. Run `make install` (or "
                  "`make test`)." % hooks.__file__, returncode=2)


_check_installed_hook()

# pylint: disable=g-import-not-at-top,wrong-import-position
import cli_util
from mtf_synthesizer import variants
from t5_tasks import vocabulary

VARIANTS = variants.NAMES
T5_VANILLA = variants.MESH_ATTENTION.name  # no variant file
TRAIN_STEPS = 2
LENGTH = 64


@pytest.fixture(scope="session")
def trained_models(tmp_path_factory):
  """Trains every variant and a plain T5 model for TRAIN_STEPS steps.

  Returns:
    name -> (model_dir, subprocess.CompletedProcess).
  """
  root = tmp_path_factory.mktemp("trained")

  def train(name):
    model_dir = str(root / name)
    gin_files = [] if name == T5_VANILLA else ["synthesizer/%s.gin" % name]
    proc = cli_util.run(cli_util.train_command(
        model_dir, gin_files, steps=TRAIN_STEPS, length=LENGTH))
    return name, (model_dir, proc)

  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    return dict(pool.map(train, VARIANTS + (T5_VANILLA,)))


@pytest.fixture(scope="module")
def byte_vocab():
  """Selects the byte vocabulary (offline) for a module's tasks."""
  old = os.environ.get(vocabulary.ENV_VAR)
  os.environ[vocabulary.ENV_VAR] = "byte"
  vocabulary.reset_vocabulary()
  yield
  if old is None:
    del os.environ[vocabulary.ENV_VAR]
  else:
    os.environ[vocabulary.ENV_VAR] = old
  vocabulary.reset_vocabulary()
