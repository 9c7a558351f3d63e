# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""README.md's recipes, read from the README, at tiny scale and offline.

Recipe 1 (finetune a released T5 checkpoint into D+V with the stock CLI)
runs as written but for the substitutions listed in RECIPE_1: no TPU (one
CPU device), a temporary model directory, the tests' tiny plain T5 model
for the released checkpoint, a byte task for GLUE's RTE, 64-token
sequences, and the same count of steps past the checkpoint's step as the
README's (scaled down to one). Recipe 2 (C4 pretraining on a Cloud TPU)
cannot run without a TPU: its TPU VM commands are checked against what the
TPU tool itself creates, the tool's own dry run of the README's command
prints the pretraining command, whose names the stock CLI knows, and that
command trains one step at tiny scale on one CPU device (its TPU flags
dropped; a tiny model, a byte task, 64-token sequences).
Recipe 3 (export and generate) runs in tests/test_hf_export.py.
"""

import ast
import os
import re
import subprocess

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import conftest
import doc_blocks
from mtf_synthesizer.jobs import commands

README = "README.md"
RECIPE_1 = doc_blocks.find(README, "rte_dense_vanilla", program=doc_blocks.CLI)
TPU_JOB = doc_blocks.find(README, "mtf-synthesizer-tpu-job")
STEPS = conftest.TRAIN_STEPS
ATTN = "encoder/block_000/layer_000/SynthesizerAttention/"
SUMMARY = re.compile(r"init_from_t5: (\d+) restored from (\S+), (\d+) fresh"
                     r"(?:: (.*))?$", re.M)


def _readme() -> str:
  with open(os.path.join(conftest.REPO, README)) as f:
    return f.read()


def _binding(command: doc_blocks.Command, name: str) -> str:
  """The value of the one `--gin_param` that binds `name`."""
  (value,) = [p.split("=", 1)[1].strip() for p in command.values("gin_param")
              if p.split("=", 1)[0].strip() == name]
  return value


def _checkpoint_step(command: doc_blocks.Command) -> int:
  init = _binding(command, "utils.run.init_checkpoint").strip("'\"")
  return int(re.fullmatch(r".*model\.ckpt-(\d+)", init).group(1))


# --- recipe 1 ---------------------------------------------------------------


def test_recipe_1_counts_its_steps_past_the_checkpoints_step():
  """train_steps is absolute: the checkpoint's step plus the finetuning's."""
  step = _checkpoint_step(RECIPE_1)
  train_steps = int(_binding(RECIPE_1, "utils.run.train_steps"))
  finetune = train_steps - step
  assert step == 999900  # T5.1.0's released checkpoints
  assert finetune > 0
  assert "%d is %d plus %d finetuning steps" % (
      train_steps, step, finetune) in " ".join(_readme().split())


def test_recipe_1_is_d_plus_v_from_t5_at_t5s_finetuning_rate():
  files = RECIPE_1.values("gin_file")
  assert files.index("synthesizer/dense_vanilla.gin") < files.index(
      "synthesizer/init_from_t5.gin")
  assert files.index("models/t5.1.0.base.gin") < files.index(
      "synthesizer/dense_vanilla.gin")
  assert "learning_rate_schedules/constant_0_001.gin" in files
  assert _binding(RECIPE_1, "MIXTURE_NAME").startswith("'synth_glue_")
  lengths = ast.literal_eval(_binding(RECIPE_1, "utils.run.sequence_length"))
  assert int(_binding(RECIPE_1, "SynthesizerAttention.max_length")) == max(
      lengths.values())


def _tiny(model_dir: str, init: str, steps: int) -> dict:
  """RECIPE_1's substitutions: one CPU device and the tiny model."""
  return {
      "--model_dir=gs://my-bucket/rte_dense_vanilla":
          "--model_dir=" + model_dir,
      "models/t5.1.0.base.gin": commands.TINY_MODEL_GIN,
      "gs://t5-data/pretrained_models/base/model.ckpt-999900": init,
      "utils.run.train_steps = 1024900": "utils.run.train_steps = %d" % steps,
      "'synth_glue_rte'": "'%s'" % commands.SPAN_CORRUPTION,
      "{'inputs': 512, 'targets': 8}": "{'inputs': %d, 'targets': %d}" % (
          conftest.LENGTH, conftest.LENGTH),
      "SynthesizerAttention.max_length = 512":
          "SynthesizerAttention.max_length = %d" % conftest.LENGTH,
      "('tokens_per_batch', 65536)": "('tokens_per_batch', %d)" % (
          4 * conftest.LENGTH),
  }


def _on_one_cpu(argv):
  """The command without its TPU flags and bindings, on one CPU device."""
  argv = doc_blocks.drop(argv, "--tpu=", "--tpu_zone=", "--gcp_project=",
                         "utils.tpu_mesh_shape.")
  return argv + ["--gin_param=utils.run.mesh_shape = ''",
                 "--gin_param=utils.run.mesh_devices = ['']"]


def _values(model_dir: str, step: int) -> dict:
  reader = tf.train.load_checkpoint(
      os.path.join(model_dir, "model.ckpt-%d" % step))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


@pytest.mark.slow
def test_recipe_1_finetunes_a_t5_checkpoint_into_d_plus_v(trained_models,
                                                          tmp_path):
  source_dir, result = trained_models[conftest.MESH_ATTENTION]
  assert result.returncode == 0, result.stderr[-3000:]
  init = os.path.join(source_dir, "model.ckpt-%d" % STEPS)
  model_dir = str(tmp_path / "rte_dense_vanilla")
  # The README's count of steps past the checkpoint's, scaled to one step.
  argv = _on_one_cpu(RECIPE_1.substituted(_tiny(model_dir, init, STEPS + 1)))
  proc = subprocess.run([commands.cli_path()] + argv[1:], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=900,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  # Every T5 weight restored; only D's and the mixture's own are fresh.
  (summary,) = SUMMARY.findall(proc.stderr)
  restored, checkpoint, fresh, names = summary
  assert checkpoint == init
  source = _values(source_dir, STEPS)
  start = _values(model_dir, STEPS)  # written before the first step
  assert int(restored) == len(source)
  fresh_names = names.split(", ")
  assert len(fresh_names) == int(fresh) > 0
  assert all("/dense/" in n or "/mixture/" in n for n in fresh_names), names
  for name in ("q", "k", "v", "o"):
    np.testing.assert_array_equal(
        start[ATTN + name], source[ATTN.replace("Synthesizer", "Self") + name])
  # And it trained exactly the one step past the checkpoint's.
  end = _values(model_dir, STEPS + 1)
  assert end["global_step"] == STEPS + 1
  assert not np.array_equal(end[ATTN + "dense/w2"], start[ATTN + "dense/w2"])


# --- recipe 2 ---------------------------------------------------------------


def _gcloud(verb: str) -> doc_blocks.Command:
  (command,) = [c for c in doc_blocks.commands(doc_blocks.read_blocks(
      [README])) if c.program == "gcloud" and c.argv[4] == verb]
  return command


def _dry_run(capsys, *extra: str) -> str:
  argv = list(TPU_JOB.argv[1:]) + ["--dry_run"] + list(extra)
  assert conftest.run_tool("tpu_job.py", argv) == 0
  return capsys.readouterr().out


def _printed(out: str):
  block = doc_blocks.Block("(dry run)", 1, "sh", out)
  found, _ = doc_blocks.parse_block(block)
  return found


def test_recipe_2_creates_the_tpu_the_job_would_create(capsys):
  """The README's `gcloud ... create` is what `--create_tpu` would run."""
  (created,) = [c for c in _printed(_dry_run(capsys, "--create_tpu"))
                if c.program == "gcloud"]
  assert _gcloud("create").argv == created.argv
  name = created.argv[5]
  zone, project = created.values("zone"), created.values("project")
  for verb in ("scp", "ssh"):
    command = _gcloud(verb)
    assert name in " ".join(command.argv[5:]), verb
    assert (command.values("zone"), command.values("project")) == (
        zone, project), verb
  assert TPU_JOB.values("tpu") == [name]
  assert TPU_JOB.values("zone") == zone
  assert TPU_JOB.values("gcp_project") == project


def test_recipe_2_installs_with_the_python_the_makefile_asks_for():
  (make,) = [c for c in doc_blocks.commands(doc_blocks.read_blocks([README]))
             if c.program == "make" and "install" in c.argv]
  (python,) = [a.split("=", 1)[1] for a in make.argv if
               a.startswith("PYTHON=")]
  with open(os.path.join(conftest.REPO, "Makefile")) as f:
    makefile = f.read()
  assert re.search(r"^PYTHON \?= %s$" % re.escape(python), makefile, re.M)
  (apt,) = [c for c in doc_blocks.commands(doc_blocks.read_blocks([README]))
            if c.program == "sudo"]
  assert python in apt.argv and python + "-venv" in apt.argv


def test_recipe_2_pretrains_on_c4_with_names_the_cli_knows(capsys):
  import test_docs  # pylint: disable=g-import-not-at-top
  (pretrain,) = [c for c in _printed(_dry_run(capsys))
                 if c.program == doc_blocks.CLI]
  files = pretrain.values("gin_file")
  assert "experiments/c4_span_corruption.gin" in files
  assert files[-1] == "synthesizer/%s.gin" % TPU_JOB.values("variant")[0]
  assert "utils.tpu_mesh_shape.tpu_topology = %r" % (
      TPU_JOB.values("tpu_topology")[0],) in pretrain.values("gin_param")
  assert pretrain.values("model_dir")[0].startswith(
      TPU_JOB.values("bucket")[0] + "/")
  problems = test_docs._cli_problems  # pylint: disable=protected-access
  assert problems(pretrain) == []



@pytest.mark.slow
def test_recipe_2_pretraining_command_trains_at_tiny_scale(capsys, tmp_path):
  """The job's printed pretraining command, off TPU at tiny scale: the model
  file, the C4 experiment and the variant compose and train one step."""
  (pretrain,) = [c for c in _printed(_dry_run(capsys))
                 if c.program == doc_blocks.CLI]
  (model_dir,) = pretrain.values("model_dir")
  argv = pretrain.substituted({
      model_dir: str(tmp_path / "pretrain"),
      "models/t5.1.0.base.gin": commands.TINY_MODEL_GIN,
      "utils.run.train_steps = 524288": "utils.run.train_steps = 1"})
  argv = doc_blocks.drop(argv, "--t5_tfds_data_dir=", "utils.run.layout_rules")
  argv = _on_one_cpu(argv) + [
      "--gin_param=MIXTURE_NAME = '%s'" % commands.SPAN_CORRUPTION,
      "--gin_param=utils.run.sequence_length = {'inputs': %d, "
      "'targets': %d}" % (conftest.LENGTH, conftest.LENGTH),
      "--gin_param=SynthesizerAttention.max_length = %d" % conftest.LENGTH,
      "--gin_param=utils.run.batch_size = ('tokens_per_batch', %d)" % (
          4 * conftest.LENGTH)]
  proc = subprocess.run([commands.cli_path()] + argv[1:], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=900,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  values = _values(str(tmp_path / "pretrain"), 1)
  assert values["global_step"] == 1
  # R+V: the random table and the mixture weights beside q and k.
  for name in ("random/R", "mixture/alpha_logits", "q", "k"):
    assert ATTN + name in values, name
