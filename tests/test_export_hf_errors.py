# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""`mtf-synthesizer-export-hf` names what it cannot read, without traceback.

On a model directory of random weights (`test_hf_export._synthetic_model`)
with checkpoints of two steps: --checkpoint of a step it lacks, or of a
prefix that does not exist, exits with status 2 and names the steps it
has; --checkpoint of a step it has exports that checkpoint; a checkpoint
whose data file is cut short exits with status 2 and names it.
"""

import json
import os
import shutil

import pytest

import conftest

STEPS = (1, 7)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
  """A model directory with the checkpoints of STEPS (the same weights)."""
  import test_hf_export  # pylint: disable=g-import-not-at-top
  path = test_hf_export._synthetic_model(tmp_path_factory.mktemp("mesh"),
                                         "t5.1.0")
  for name in os.listdir(path):  # model.ckpt-1.* -> model.ckpt-7.*
    if name.startswith("model.ckpt-1."):
      shutil.copy(os.path.join(path, name), os.path.join(
          path, name.replace("model.ckpt-1.", "model.ckpt-7.")))
  return path


def _export(model_dir, out, *extra):
  return conftest.run_tool("export_hf.py", [model_dir, str(out),
                                            "--vocabulary=byte"] +
                           list(extra))


@pytest.mark.parametrize("checkpoint", ["99", "model.ckpt-99"])
def test_a_missing_checkpoint_names_the_steps_there_are(model_dir, tmp_path,
                                                        capsys, checkpoint):
  out = tmp_path / "out"
  assert _export(model_dir, out, "--checkpoint=" + checkpoint) == 2
  error = capsys.readouterr().err
  assert "99" in error, error
  assert "steps %s" % ", ".join(str(s) for s in STEPS) in error, error
  assert "Traceback" not in error
  assert not out.exists()


def test_a_step_there_is_is_exported(model_dir, tmp_path, capsys):
  """The control: --checkpoint=7 exports model.ckpt-7."""
  assert _export(model_dir, tmp_path / "out", "--checkpoint=7") == 0
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert summary["checkpoint"] == os.path.join(model_dir, "model.ckpt-7")


def test_a_cut_checkpoint_is_named(model_dir, tmp_path, capsys):
  broken = tmp_path / "broken"
  shutil.copytree(model_dir, broken)
  (data,) = [n for n in os.listdir(broken)
             if n.startswith("model.ckpt-7.data-")]
  size = os.path.getsize(broken / data)
  with open(broken / data, "r+b") as f:
    f.truncate(size // 2)
  out = tmp_path / "out"
  assert _export(str(broken), out,
                 "--checkpoint=" + str(broken / "model.ckpt-7")) == 2
  error = capsys.readouterr().err
  assert str(broken / "model.ckpt-7") in error, error
  assert not out.exists()
