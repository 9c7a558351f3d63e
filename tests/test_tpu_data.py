# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The data a Cloud TPU job reads: named as the tasks read it, checked first.

docs/tpu.md's table of datasets per experiment is the tasks' registry's
(`jobs/datasets.py` reads the registry); a data folder that lacks one of
them, or holds another version, stops the job with one line naming the
command that prepares it; `mtf-synthesizer-data` lists, checks and names
TFDS's own build commands at the versions the tasks read. All offline: the
data folders are faked, as far as TFDS's layout needs
(`<name>/<config>/<version>/dataset_info.json`).
"""

import os
import re
import shlex

import pytest

import conftest
from mtf_synthesizer.commands import data
from mtf_synthesizer.jobs import cloud_tpu
from mtf_synthesizer.jobs import datasets
from mtf_synthesizer.jobs import experiments
from mtf_synthesizer.jobs import preflight

GLUE = "synth_glue_super_glue_proportional"


def _docs_table():
  """{(experiment, mixture): [datasets]} from docs/tpu.md's table."""
  with open(os.path.join(conftest.REPO, "docs", "tpu.md")) as f:
    section = f.read().split("## The data", 1)[1].split("\n## ", 1)[0]
  rows = {}
  for line in section.splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if len(cells) == 3 and cells[0].startswith("`") and (
        cells[0] != "`--experiment`"):
      rows[(cells[0].strip("`"), cells[1].strip("`"))] = re.findall(
          r"`([^`]+)`", cells[2])
  return rows


def test_the_docs_name_the_versions_the_tasks_read():
  rows = _docs_table()
  want = {}
  for name, exp in experiments.EXPERIMENTS.items():
    for mixture in exp.mixtures:
      want[(name, mixture)] = datasets.tfds_names([mixture])
  assert rows == want
  # What the issue was about: GLUE is read at 1.0.0, which a bare
  # `tfds build glue` (2.0.0) does not make.
  assert "glue/rte:1.0.0" in want[("c4_glue_superglue", GLUE)]
  assert want[("c4_glue_superglue", "synth_c4_span_corruption")] == [
      "c4/en:3.1.0"]


def _prepare(folder, names):
  for name in names:
    path = datasets.data_path(name, str(folder))
    os.makedirs(path)
    with open(os.path.join(path, "dataset_info.json"), "w") as f:
      f.write("{}")


def test_a_folder_with_another_version_is_one_line_naming_the_command(
    tmp_path):
  names = datasets.tfds_names([GLUE])
  _prepare(tmp_path, [n for n in names if n != "glue/rte:1.0.0"] +
           ["glue/rte:2.0.0"])
  line = preflight.data_error(str(tmp_path), [GLUE])
  assert "\n" not in line
  assert "lacks glue/rte:1.0.0, which %s reads" % GLUE in line
  command = line.split("can write there: ", 1)[1]
  assert shlex.split(command) == datasets.prepare_argv([GLUE], str(tmp_path))
  assert data.parse_args(shlex.split(command)[1:]).mixture == [GLUE]
  _prepare(tmp_path, ["glue/rte:1.0.0"])
  assert preflight.data_error(str(tmp_path), [GLUE]) is None


def test_the_data_command_lists_and_names_tfds_builds(tmp_path, capsys):
  _prepare(tmp_path, ["wmt14_translate/de-en:1.0.0"])
  assert data.main(["--data_dir=%s" % tmp_path,
                    "--experiment=wmt_ende"]) == 0
  assert capsys.readouterr().out.startswith(
      "prepared  wmt14_translate/de-en:1.0.0: %s" % tmp_path)
  assert data.main(["--data_dir=%s" % tmp_path, "--mixture=synth_glue_rte",
                    "--experiment=c4_glue_superglue"]) == 1
  out = capsys.readouterr().out
  lines = [l for l in out.splitlines() if l.startswith("missing")]
  assert len(lines) == len(datasets.tfds_names(
      ["synth_glue_rte", GLUE, "synth_c4_span_corruption"]))
  (rte,) = [l for l in lines if l.startswith("missing   glue/rte:1.0.0:")]
  build = shlex.split(rte.split(" or: ", 1)[1])
  assert build == ["tfds", "build", "glue/rte:1.0.0",
                   "--data_dir=%s" % tmp_path]
  (c4,) = [l for l in lines if l.startswith("missing   c4/en:3.1.0:")]
  assert "Apache Beam" in c4 and "7 TB" in c4
  build = shlex.split(c4.split("): ", 1)[1])
  # TFDS's own command line takes the commands as printed.
  # pylint: disable=g-import-not-at-top
  from tensorflow_datasets.scripts.cli import main as tfds_cli
  parsed = tfds_cli._parse_flags(build)  # pylint: disable=protected-access
  assert parsed.datasets == ["c4/en:3.1.0"]
  assert "runner=DataflowRunner" in parsed.beam_pipeline_options


def test_unknown_mixture_is_one_line(capsys):
  assert data.main(["--data_dir=/tmp/x", "--mixture=no_such_task"]) == 2
  assert "Unknown mixture or task 'no_such_task'" in capsys.readouterr().err


def test_the_job_checks_what_its_stages_read():
  job = cloud_tpu.Job(bucket="gs://b", tpu_topology="v3-8",
                      model_size="base", variant="random")
  assert job.mixtures("all") == ["synth_c4_span_corruption", GLUE]
  assert job.mixtures("finetune") == [GLUE]
  argv = job.preflight_argv("eval")
  assert "--data_dir=gs://b/tensorflow_datasets" in argv
  assert argv[-2:] == ["--mixture=synth_c4_span_corruption",
                       "--mixture=%s" % GLUE]
  for command in job.commands("all"):
    assert "--t5_tfds_data_dir=gs://b/tensorflow_datasets" in command.argv()


def test_readme_prepares_what_recipe_1_reads():
  with open(os.path.join(conftest.REPO, "README.md")) as f:
    readme = f.read()
  (line,) = re.findall(r"`(\S*mtf-synthesizer-data [^`]*)`", readme)
  args = data.parse_args(shlex.split(line)[1:])
  (recipe,) = set(re.findall(r"MIXTURE_NAME = '(\w+)'", readme))
  assert args.mixture == [recipe] and args.prepare
  assert args.data_dir == "gs://my-bucket/tensorflow_datasets"
  assert "--t5_tfds_data_dir=%s" % args.data_dir in readme


@pytest.mark.parametrize("topology,devices,mesh", [
    ("v3-8", 8, "batch:4,model:2"), ("v2-8", 8, "batch:4,model:2"),
    ("v4-8", 4, "batch:2,model:2"), ("v4-32", 16, "batch:8,model:2")])
def test_the_mesh_is_what_tensorflow_shows(topology, devices, mesh):
  """mesh's own `tpu_mesh_shape`, given the job's bindings and flag, lays
  out as many devices as TensorFlow shows (`TPU_GENERATIONS`)."""
  # pylint: disable=g-import-not-at-top
  from absl import flags
  import mesh_tensorflow as mtf
  from mesh_tensorflow.transformer import utils as mtf_utils
  job = cloud_tpu.Job(bucket="gs://b", tpu_topology=topology,
                      model_size="base", variant="random")
  assert job.mesh_shape == mesh
  (command,) = job.commands("pretrain")
  argv = command.argv()
  (bound,) = [re.search(r"= '(.*)'", a).group(1) for a in argv
              if "tpu_mesh_shape.tpu_topology" in a]
  cores_per_chip = [int(a.split("=")[1]) for a in argv
                    if a.startswith("--logical_cores_per_chip=")]
  saved = flags.FLAGS["logical_cores_per_chip"].value
  try:
    flags.FLAGS["logical_cores_per_chip"].value = (cores_per_chip or [2])[0]
    shape = mtf_utils.tpu_mesh_shape(bound, 2)
  finally:
    flags.FLAGS["logical_cores_per_chip"].value = saved
  assert shape == mtf.convert_to_shape(mesh)
  assert shape.size == devices
