# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""README.md's recipes, read from the README, at tiny scale and offline.

Recipe 1 (finetune a released T5 checkpoint into D+V with the stock CLI,
then evaluate every checkpoint) runs as written but for the substitutions
listed in RECIPE_1: no TPU (one CPU device), a temporary model directory,
the tests' tiny plain T5 model for the released checkpoint, a byte task for
GLUE's RTE (`key_presence`, a yes/no task scored by accuracy, for the
evaluation), 64-token sequences, and the same count of steps past the
checkpoint's step as the README's (scaled down to one). Recipe 2 (C4
pretraining on a Cloud TPU VM) cannot run without a TPU: the VM its
commands create and copy to is the one the TPU tool's dry run prints, its
installation is that of the TPU VM leg (`make test-tpu-vm`, which replays
it), the tool's own dry run of the README's command prints the pretraining
command, whose names the stock CLI knows, and that command trains one step
at tiny scale on one CPU device (its TPU flags dropped; a tiny model, a
byte task, 64-token sequences). Recipe 3 (export and generate) runs in
tests/test_hf_export.py.
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
from mtf_synthesizer.jobs import events

README = "README.md"
RECIPE_1 = doc_blocks.find(README, "rte_dense_vanilla", "init_from_t5.gin",
                           program=doc_blocks.CLI)
RECIPE_1_EVAL = doc_blocks.find(README, "rte_dense_vanilla", "eval.gin",
                                program=doc_blocks.CLI)
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
  argv = doc_blocks.drop(argv, "--tpu=", "utils.tpu_mesh_shape.")
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
  argv = _on_one_cpu(doc_blocks.drop(
      RECIPE_1.substituted(_tiny(model_dir, init, STEPS + 1)),
      "--t5_tfds_data_dir="))
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
  # Then the README's evaluation: every checkpoint, on the validation split.
  argv = _on_one_cpu(doc_blocks.drop(RECIPE_1_EVAL.substituted({
      "gs://my-bucket/rte_dense_vanilla/operative_config.gin":
          os.path.join(model_dir, "operative_config.gin"),
      "--model_dir=gs://my-bucket/rte_dense_vanilla": "--model_dir=" + model_dir,
      "'synth_glue_rte'": "'key_presence'",
      "{'inputs': 512, 'targets': 8}": "{'inputs': %d, 'targets': %d}" % (
          conftest.LENGTH, conftest.LENGTH)}), "--t5_tfds_data_dir=")) + [
              "--gin_param=recall_config.num_validation = 4",
              # T5's eval.gin decodes 128 targets; the tiny tables hold 64.
              "--gin_param=Bitransformer.decode.max_decode_length = %d" %
              conftest.LENGTH]
  proc = subprocess.run([commands.cli_path()] + argv[1:], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=900,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  scalars = events.read_scalars(os.path.join(model_dir, "validation_eval"))
  (accuracy,) = [tag for tag in scalars if tag.endswith("accuracy")]
  assert sorted(step for step, _, _ in scalars[accuracy]) == [STEPS,
                                                              STEPS + 1]
  assert all(0 <= value <= 100 for _, _, value in scalars[accuracy])


def test_recipe_1_evaluates_what_it_trained_as_the_tpu_job_evaluates():
  """Its model directory, operative config, then the variant file again."""
  assert RECIPE_1_EVAL.values("model_dir") == RECIPE_1.values("model_dir")
  (model_dir,) = RECIPE_1.values("model_dir")
  files = RECIPE_1_EVAL.values("gin_file")
  assert files == [model_dir + "/operative_config.gin",
                   "synthesizer/dense_vanilla.gin", "eval.gin"]
  for name in ("MIXTURE_NAME", "utils.run.sequence_length",
               "utils.tpu_mesh_shape.tpu_topology",
               "utils.tpu_mesh_shape.model_parallelism"):
    assert _binding(RECIPE_1_EVAL, name) == _binding(RECIPE_1, name), name
  assert _binding(RECIPE_1_EVAL, "utils.run.dataset_split") == "'validation'"
  assert _binding(RECIPE_1_EVAL, "eval_checkpoint_step") == "'all'"
  for param in commands.eval_seed_params():
    name, value = (x.strip() for x in param.split("=", 1))
    assert _binding(RECIPE_1_EVAL, name) == value
  for command in (RECIPE_1, RECIPE_1_EVAL):
    assert command.values("tpu") == ["local"]
    assert command.values("t5_tfds_data_dir") == [
        "gs://my-bucket/tensorflow_datasets"]
    assert command.argv[0] == ".venv-tpu/bin/" + doc_blocks.CLI


# --- recipe 2 ---------------------------------------------------------------


def _gcloud(verb: str) -> doc_blocks.Command:
  """Recipe 2's `gcloud compute tpus tpu-vm <verb>` (not the JAX recipe's,
  whose TPU VM has the JAX image, `--version=v2-alpha-...`)."""
  (command,) = [c for c in doc_blocks.commands(doc_blocks.read_blocks(
      [README])) if c.program == "gcloud" and c.argv[4] == verb and
                not any(v.startswith("v2-alpha")
                        for v in c.values("version"))]
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
  """The README's `gcloud ... create` is what the tool's dry run prints,
  the VM's name the tool's default."""
  create = _gcloud("create")
  name = create.argv[5]
  (zone,), (project,) = create.values("zone"), create.values("project")
  (printed,) = [c for c in _printed(_dry_run(
      capsys, "--zone=" + zone, "--gcp_project=" + project))
                if c.program == "gcloud"]
  assert create.argv == printed.argv
  # The topology the jobs bind is the VM's accelerator type.
  accelerator = create.values("accelerator-type")
  assert TPU_JOB.values("tpu_topology") == accelerator
  for command in (RECIPE_1, RECIPE_1_EVAL):
    assert [_binding(command, "utils.tpu_mesh_shape.tpu_topology").strip(
        "'")] == accelerator
  for verb in ("scp", "ssh"):
    command = _gcloud(verb)
    assert name in " ".join(command.argv[5:]), verb
    assert (command.values("zone"), command.values("project")) == (
        [zone], [project]), verb


def test_recipe_2_copies_the_tracked_files_only():
  """No .venv (3 GB), no runs/: `git archive` of the commit, then scp."""
  (archive,) = [c for c in doc_blocks.commands(doc_blocks.read_blocks(
      [README])) if c.program == "git" and c.argv[1] == "archive"]
  (tarball,) = archive.values("o") or [
      archive.argv[archive.argv.index("-o") + 1]]
  assert archive.argv[-1] == "HEAD"
  scp = _gcloud("scp")
  assert tarball in scp.argv and "--recurse" not in scp.argv


def _install_block():
  return doc_blocks.find_block(README, "sh", "--system-site-packages")


def test_recipe_2_installs_over_the_images_tensorflow():
  lines = [l for l in _install_block().text.splitlines() if l.strip()]
  assert "python3 -m venv --system-site-packages .venv-tpu" in lines
  installs = [l for l in lines if " install " in l and "pip" in l]
  assert installs == [
      ".venv-tpu/bin/pip install -q --no-deps -r requirements-tpu-vm.lock",
      ".venv-tpu/bin/pip install -q --no-deps ."]
  # The image's Python is 3.10: Ubuntu's venv module for it.
  assert "sudo apt-get install -y python3.10-venv" in lines
  assert TPU_JOB.argv[0] == ".venv-tpu/bin/mtf-synthesizer-tpu-job"


def test_the_tpu_vm_lock_leaves_tensorflow_to_the_image():
  """Neither TensorFlow nor what it brings, nor torch, is in the lock."""
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  def name(requirement):
    return re.split(r"[ ;<>=!~\[(]", requirement, 1)[0].lower().replace(
        "_", "-")
  with open(os.path.join(conftest.REPO, "requirements-tpu-vm.lock")) as f:
    pinned = {name(l) for l in f if l.strip() and not l.startswith("#")}
  brought = {name(r) for r in metadata.requires("tensorflow")
             if "extra ==" not in r}
  assert "numpy" in brought and "protobuf" in brought
  assert not pinned & (brought | {"tensorflow", "torch"}), pinned & brought
  for needed in ("mesh-tensorflow", "t5", "tensorflow-text", "gin-config",
                 "seqio-nightly", "tfds-nightly"):
    assert needed in pinned


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
