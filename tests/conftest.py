# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Shared fixtures: tiny models trained once per session by the stock CLI."""

import concurrent.futures
import os

import pytest

import cli_util
from t5_tasks import vocabulary

VARIANTS = ("vanilla", "random", "fixed_random", "factorized_random", "dense",
            "factorized_dense", "random_dense", "dense_vanilla",
            "random_vanilla", "factorized_random_vanilla")
T5_VANILLA = "t5_vanilla"  # mesh's own SelfAttention: no variant file
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
