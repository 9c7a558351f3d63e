# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The kept training losses (tests/data/mesh_training) are the stock CLI's.

`tools/mesh_training_reference.py` keeps, for each case of
`workbench/mesh_training_reference.py` (V and D+V), the stock CLI's step-0
checkpoint, the 20 batches its training consumed and the training loss of
each of its 20 steps, for other trainers to be compared with. Here the CLI
runs the 20 steps again from a copy of each kept checkpoint and must print
the kept losses (within RTOL); the CLI's input pipeline, rebuilt from the
kept operative config, must give the kept batches, and mesh's steps
replayed in this process on them must give the kept losses; the kept files
are the step-0 checkpoint (Adafactor's slots zero) and case.json is what
the tool writes.
"""

import json
import os
import time

import numpy as np
import pytest

import conftest
from mtf_synthesizer.checkpoints import tf_format
from workbench import mesh_reference
from workbench import mesh_training_reference as reference

ROOT = os.path.join(conftest.REPO, "tests", "data", "mesh_training")
NAMES = [c.name for c in reference.CASES]
# Reruns on this machine's TensorFlow; another CPU may round otherwise.
RTOL = 1e-6
MAX_BYTES = 1 << 20
DOC = "docs/development.md"


def _case_dir(name: str) -> str:
  return os.path.join(ROOT, name)


def test_the_kept_cases_are_the_tools_cases():
  kept = sorted(e for e in os.listdir(ROOT)
                if os.path.isdir(os.path.join(ROOT, e)))
  assert kept == sorted(NAMES)
  assert sorted(c.variant for c in reference.CASES) == [
      "dense_vanilla", "vanilla"]


def test_the_kept_files_are_small():
  total = sum(os.path.getsize(os.path.join(folder, f))
              for folder, _, files in os.walk(ROOT) for f in files)
  assert total < MAX_BYTES


@pytest.mark.parametrize("name", NAMES)
def test_the_kept_checkpoint_is_the_initial_one(name):
  assert sorted(os.listdir(_case_dir(name))) == sorted(
      list(reference.CHECKPOINT_FILES) + [reference.BATCHES,
                                          reference.METADATA])
  prefix = tf_format.latest_checkpoint(_case_dir(name))
  assert os.path.basename(prefix) == "model.ckpt-0"
  reader = tf_format.CheckpointReader(prefix)
  names = reader.variable_names()
  assert int(reader.read("global_step")) == 0
  slots = [n for n in names if "_slot_" in n]
  assert slots and all(not np.any(reader.read(n)) for n in slots)
  weights = [n for n in names if "_slot_" not in n and n != "global_step"]
  assert {reader.dtype_name(n) for n in weights} == {"float32"}
  assert np.any(reader.read("shared/embedding"))
  with open(os.path.join(_case_dir(name),
                         mesh_reference.OPERATIVE_CONFIG)) as f:
    operative = f.read()
  for binding in ("mesh_train_dataset_fn.pack = False",
                  "mesh_train_dataset_fn.shuffle = False",
                  "run.train_steps = %d" % reference.STEPS,
                  "run.optimizer = @optimize.AdafactorOptimizer"):
    assert "\n%s\n" % binding in operative, binding


@pytest.mark.parametrize("name", NAMES)
def test_case_json_is_the_tools(name):
  kept = reference.read_metadata(_case_dir(name))
  losses = kept["losses"]
  assert len(losses) == reference.STEPS
  assert len(set(losses)) == reference.STEPS
  assert all(np.isfinite(losses))
  expected = reference.metadata(reference.BY_NAME[name], losses,
                                reference.kept_settings(_case_dir(name)))
  assert kept == json.loads(json.dumps(expected))


@pytest.mark.parametrize("name", NAMES)
def test_the_pipeline_gives_the_kept_batches(name):
  kept = reference.read_batches(_case_dir(name))
  fresh = reference.batches(_case_dir(name))
  assert sorted(kept) == sorted(reference.FEATURES)
  for key in reference.FEATURES:
    assert kept[key].dtype == np.int32, key
    assert kept[key].shape == (reference.STEPS, mesh_reference.BATCH,
                               mesh_reference.LENGTH), key
    np.testing.assert_array_equal(fresh[key], kept[key], err_msg=key)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_mesh_steps_in_process_give_the_kept_losses(name):
  losses = reference.replay(_case_dir(name),
                            reference.read_batches(_case_dir(name)))
  np.testing.assert_allclose(
      losses, reference.read_metadata(_case_dir(name))["losses"],
      rtol=RTOL, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_cli_gives_the_kept_losses(name, tmp_path, monkeypatch):
  # TF's graph optimizer on, as in the tool's runs (the suite turns it off
  # for speed, cli_site/graph_optimizer.py): without it mesh's step may
  # read the global step after its increment (Adafactor's decay of the next
  # step; the read and the increment are unordered in mesh's graph).
  monkeypatch.setenv("MTF_SYNTH_GRAPH_OPTIMIZER", "1")
  model_dir = str(tmp_path / "model")
  reference.start_from(_case_dir(name), model_dir)
  start = time.time()
  losses = reference.run_cli(reference.BY_NAME[name], model_dir)
  print("%s: the CLI's %d steps in %.1f s" % (name, reference.STEPS,
                                              time.time() - start))
  np.testing.assert_allclose(
      losses, reference.read_metadata(_case_dir(name))["losses"],
      rtol=RTOL, atol=0)


def test_the_documents_name_the_tool():
  with open(os.path.join(conftest.REPO, DOC)) as f:
    text = f.read()
  assert "tools/mesh_training_reference.py" in text
  assert "tests/data/mesh_training/" in text
