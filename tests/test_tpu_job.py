# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""tools/tpu_job.py: the dry run prints the right commands and runs nothing.

Also tools/paper_commands.py's baseline rows. The scripts run in process
(`conftest.run_tool`); the commands they print are composed by
`mtf_synthesizer.jobs.cloud_tpu`.

The expectations come from outside the tool: T5's and mtf_synthesizer's gin
files on disk, the task registry, mesh's own `tpu_mesh_shape`, the paper's
settings (524288 pretraining steps on a 2x2 v3 slice, the baselines of its
Tables 4-7, Linformer's k = 32), the flags the installed
`t5.models.mesh_transformer_main` defines.
"""

import contextlib
import copy
import importlib.util
import io
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import time

from absl import flags
import gin
import pytest

import conftest
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import cloud_tpu
from mtf_synthesizer.jobs import experiments

_ROOT = conftest.REPO

_T5_GIN = os.path.join(os.path.dirname(importlib.util.find_spec("t5").origin),
                       "models", "gin")
_SYNTH_GIN = os.path.join(_ROOT, "gin")

_BASE_ARGS = ["--dry_run", "--tpu=synth-tpu", "--zone=europe-west4-a",
              "--gcp_project=proj-1", "--tpu_vm_name=synth-tpu",
              "--bucket=gs://bkt/exp"]


def _forbid_network(monkeypatch):
  def forbidden(*a, **k):
    raise AssertionError("network or subprocess used in a dry run: %r" % (a,))
  monkeypatch.setattr(socket, "socket", forbidden)
  monkeypatch.setattr(socket, "create_connection", forbidden)
  monkeypatch.setattr(subprocess, "Popen", forbidden)
  monkeypatch.setattr(subprocess, "run", forbidden)


def _dry_run(monkeypatch, *args, base=tuple(_BASE_ARGS)):
  """Runs the tool's main with --dry_run; no socket, no subprocess allowed."""
  _forbid_network(monkeypatch)
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    status = conftest.run_tool("tpu_job.py", list(base) + list(args))
  assert status == 0
  return out.getvalue()


def _commands(text):
  """Parses the printed commands back into argv lists (as a shell would)."""
  text = re.sub(r"^#.*$", "", text, flags=re.M)
  return [shlex.split(c.replace("\\\n", " "))
          for c in re.split(r"\n(?=\S)", text.strip()) if c.strip()]


def _t5_commands(text):
  return [c for c in _commands(text) if c[0] == "t5_mesh_transformer"]


def _gin_params(argv):
  return [a[len("--gin_param="):] for a in argv
          if a.startswith("--gin_param=")]


def _gin_files(argv):
  return [a[len("--gin_file="):] for a in argv if a.startswith("--gin_file=")]


def _flag(argv, name):
  values = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
  assert len(values) == 1, (name, argv)
  return values[0]


def _gin_file_exists(path):
  if path.startswith("gs://"):
    return True
  return any(os.path.exists(os.path.join(d, path))
             for d in (_T5_GIN, _SYNTH_GIN))


def test_table4_setting_pretrain_finetune_eval(monkeypatch):
  text = _dry_run(monkeypatch, "--tpu_topology=2x2", "--variant=random",
                  "--model_size=base", "--stage=all")
  cmds = _t5_commands(text)
  assert len(cmds) == 4  # pretrain, finetune, 2 evals
  pretrain, finetune, ppl_eval, glue_eval = cmds
  for c in cmds:
    assert _flag(c, "--tpu") == "synth-tpu"
    assert _flag(c, "--gcp_project") == "proj-1"
    assert _flag(c, "--tpu_zone") == "europe-west4-a"
    assert _flag(c, "--model_dir").startswith("gs://bkt/exp/")
    assert [a for a in c if a.startswith("--module_import")] == [
        "--module_import=mtf_synthesizer", "--module_import=t5_tasks"]
    params = _gin_params(c)
    assert "utils.tpu_mesh_shape.tpu_topology = '2x2'" in params
    # T5 base: model parallelism 2 (T5's notebook for an 8-core slice).
    assert "utils.tpu_mesh_shape.model_parallelism = 2" in params
    assert ("utils.run.layout_rules = "
            "'heads:model,batch:batch,d_ff:model,vocab:model'") in params
    assert all(_gin_file_exists(f) for f in _gin_files(c)), _gin_files(c)
    # A bitransformer: T5's model files say so; nothing overrides it.
    assert not any(p.startswith("utils.run.model_type") for p in params)
    # The gin route, not the Model API (--mode).
    assert not any(a.split("=")[0] == "--mode" for a in c)
  # Pretraining: the model gin, the experiment file, the variant file.
  files = _gin_files(pretrain)
  assert files == ["models/t5.1.0.base.gin",
                   "experiments/c4_span_corruption.gin",
                   "synthesizer/random.gin"]
  assert "utils.run.train_steps = 524288" in _gin_params(pretrain)
  pre_dir = _flag(pretrain, "--model_dir")
  # Finetuning: the pretrained operative config, then the variant file
  # again; the pretrained checkpoint; absolute steps.
  files = _gin_files(finetune)
  op = pre_dir + "/operative_config.gin"
  assert files == [op, "synthesizer/random.gin",
                   "experiments/glue_super_glue_finetune.gin"]
  params = _gin_params(finetune)
  assert ("utils.run.init_checkpoint = '%s/model.ckpt-524288'" % pre_dir
          in params)
  assert "utils.run.train_steps = %d" % (524288 + 262144) in params
  assert _flag(finetune, "--model_dir") != pre_dir
  # Evaluations: perplexity of the pretrained model, decodes of the
  # finetuned one, each after its own operative config.
  assert _flag(ppl_eval, "--model_dir") == pre_dir
  assert "perplexity_eval.gin" in _gin_files(ppl_eval)
  assert _flag(glue_eval, "--model_dir") == _flag(finetune, "--model_dir")
  assert "eval.gin" in _gin_files(glue_eval)
  for c in (ppl_eval, glue_eval):
    files = _gin_files(c)
    assert files[0] == _flag(c, "--model_dir") + "/operative_config.gin"
    assert files.index("synthesizer/random.gin") > 0
  # The gcloud and TensorBoard commands.
  gcloud = [c for c in _commands(text) if c[0] == "gcloud"]
  assert gcloud == [["gcloud", "compute", "tpus", "tpu-vm", "create",
                     "synth-tpu", "--zone=europe-west4-a",
                     "--project=proj-1", "--accelerator-type=v3-8",
                     "--version=tpu-vm-tf-2.15.1-se"]]
  board = [c for c in _commands(text) if c[0] == "tensorboard"]
  assert board and board[0][1].startswith("--logdir=gs://bkt/exp/")


@pytest.mark.parametrize("size,topology,mp", [
    ("small", "v3-8", 1), ("base", "v3-8", 2), ("large", "v3-8", 8),
    ("3B", "v3-32", 8), ("11B", "v3-32", 16), ("11B", "v3-8", 8),
    ("11B", "4x4", 16)])
def test_model_parallelism_per_size(monkeypatch, size, topology, mp):
  text = _dry_run(monkeypatch, "--tpu_topology=" + topology,
                  "--model_size=" + size, "--stage=pretrain")
  (cmd,) = _t5_commands(text)
  params = _gin_params(cmd)
  assert "utils.tpu_mesh_shape.model_parallelism = %d" % mp in params
  assert "utils.tpu_mesh_shape.tpu_topology = '%s'" % topology in params
  assert "models/t5.1.0.%s.gin" % size in _gin_files(cmd)


@pytest.mark.parametrize("topology,accelerator,version", [
    ("v3-8", "v3-8", "tpu-vm-tf-2.15.1-se"),
    ("v3-32", "v3-32", "tpu-vm-tf-2.15.1-pod-se"),
    ("4x4", "v3-32", "tpu-vm-tf-2.15.1-pod-se")])
def test_gcloud_accelerator(monkeypatch, topology, accelerator, version):
  text = _dry_run(monkeypatch, "--tpu_topology=" + topology,
                  "--stage=pretrain")
  (gcloud,) = [c for c in _commands(text) if c[0] == "gcloud"]
  assert "--accelerator-type=" + accelerator in gcloud
  assert "--version=" + version in gcloud


@pytest.mark.parametrize("variant", attentions.VARIANT_NAMES)
def test_every_variant_file_exists_and_follows_model_gin(monkeypatch,
                                                         variant):
  assert os.path.exists(os.path.join(_SYNTH_GIN, "synthesizer",
                                     variant + ".gin"))
  text = _dry_run(monkeypatch, "--variant=" + variant, "--stage=pretrain",
                  "--t5_version=1.1", "--model_size=large")
  (cmd,) = _t5_commands(text)
  files = _gin_files(cmd)
  assert files.index("synthesizer/%s.gin" % variant) > files.index(
      "models/t5.1.1.large.gin")


def test_lm1b_is_a_language_model(monkeypatch):
  text = _dry_run(monkeypatch, "--experiment=lm1b", "--stage=all")
  cmds = _t5_commands(text)
  assert len(cmds) == 2  # train, perplexity eval
  # The experiment file sets model_type 'lm'; the eval reads it from the
  # operative config (tests/test_experiments.py checks the gin files).
  assert "experiments/lm1b.gin" in _gin_files(cmds[0])
  assert ("utils.run.sequence_length = {'targets': 256}" in
          _gin_params(cmds[1]))
  assert "perplexity_eval.gin" in _gin_files(cmds[1])


def test_encoder_only_classification_decodes_with_eval_gin(monkeypatch):
  text = _dry_run(monkeypatch, "--experiment=ag_news", "--stage=all",
                  "--variant=factorized_random")
  train, evaluation = _t5_commands(text)
  assert _gin_files(train)[1:] == ["experiments/ag_news.gin",
                                   "synthesizer/factorized_random.gin"]
  assert "eval.gin" in _gin_files(evaluation)


def test_t5_1_1_names_3b_and_11b_xl_and_xxl(monkeypatch):
  text = _dry_run(monkeypatch, "--t5_version=1.1", "--model_size=11B",
                  "--tpu_topology=v3-32", "--stage=pretrain")
  assert "models/t5.1.1.xxl.gin" in _gin_files(_t5_commands(text)[0])


def _model_gin_value(path, name):
  """Reads `name = value` from a T5 model gin file, following includes."""
  with open(os.path.join(_T5_GIN, path)) as f:
    text = f.read()
  found = re.findall(r"^%s\s*=\s*(\d+)" % name, text, flags=re.M)
  if found:
    return int(found[-1])
  include = re.findall(r"^include '([^']+)'", text, flags=re.M)
  return _model_gin_value(include[-1], name) if include else None


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_model_dimensions_match_t5_gin_files(version):
  # The divisibility check uses the heads and d_ff of T5's own files.
  for size, gin_file in experiments.MODEL_GIN[version].items():
    want = (_model_gin_value(gin_file, "num_heads"),
            _model_gin_value(gin_file, "d_ff"))
    assert experiments.MODEL_DIMS[version][size] == want, (version, size)


def test_indivisible_model_parallelism_is_a_clear_error(capsys):
  # T5 1.1 small has 6 heads: 4-way model parallelism cannot split them.
  status = conftest.run_tool("tpu_job.py", _BASE_ARGS + [
      "--t5_version=1.1", "--model_size=small", "--model_parallelism=4"])
  assert status == 2
  err = capsys.readouterr().err
  assert "'heads' of size 6" in err and "'model' of size 4" in err
  status = conftest.run_tool("tpu_job.py", _BASE_ARGS + [
      "--model_parallelism=16", "--tpu_topology=v3-8"])
  assert status == 2
  assert "does not divide the 8 cores" in capsys.readouterr().err


def test_bucket_must_be_gcs(capsys):
  assert conftest.run_tool("tpu_job.py", [
      "--dry_run", "--tpu=t", "--zone=z", "--gcp_project=p",
      "--bucket=/local/dir"]) == 2
  assert "gs://" in capsys.readouterr().err


def test_mixture_names_are_registered():
  import seqio  # pylint: disable=g-import-not-at-top
  import t5_tasks  # pylint: disable=g-import-not-at-top,unused-import
  names = set()
  for exp in experiments.EXPERIMENTS.values():
    names.add(exp.train_mixture)
    if exp.finetune_mixture:
      names.add(exp.finetune_mixture)
  for name in sorted(names):
    assert seqio.get_mixture_or_task(name) is not None, name


def test_without_dry_run_runs_commands_in_order_and_stops_on_failure(
    tmp_path, capsys):
  log = tmp_path / "log"
  ok = ["sh", "-c", "echo ran-$0 >> %s; echo out-$0" % log, "a"]
  bad = ["sh", "-c", "echo ran-$0 >> %s; exit 3" % log, "b"]
  never = ["sh", "-c", "echo ran-$0 >> %s" % log, "c"]
  assert cloud_tpu.run_commands([ok, bad, never]) == 3
  assert log.read_text().split() == ["ran-a", "ran-b"]
  assert "out-a" in capsys.readouterr().out


def test_model_type_is_a_real_mesh_model_type():
  for name, experiment in experiments.EXPERIMENTS.items():
    assert experiment.model_type in ("bitransformer", "lm", "aligned"), name
    assert experiment.paper.startswith("Table"), name


# --- baselines ----------------------------------------------------------------

# The commands of one job of each table: Table 4 is the C4 pretraining alone.
_TABLE_JOB_COMMANDS = {"Table 4": 1, "Tables 5-6": 4, "Table 7": 2}


def _paper_commands(monkeypatch, *args):
  """Runs tools/paper_commands.py: [(header, [t5 argv, ...])] per job."""
  _forbid_network(monkeypatch)
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    status = conftest.run_tool("paper_commands.py", list(args))
  assert status == 0
  jobs = []
  for block in re.split(r"^# ", out.getvalue(), flags=re.M)[1:]:
    header, _, body = block.partition("\n")
    jobs.append((header, _t5_commands(body)))
  return jobs


def _baseline_header(experiment, baseline):
  return "%s, baseline %s (%s)" % (experiments.EXPERIMENTS[experiment].paper,
                                   baseline.name, baseline.label)


def test_each_table_runs_the_rows_that_report_it():
  # The paper's tables are facts of the attention table (its paper_tables,
  # checked against README.md and docs/baselines.md by test_gin_files).
  for table in experiments.TABLE_EXPERIMENTS:
    for rows, names in ((attentions.VARIANTS, experiments.TABLE_VARIANTS),
                        (attentions.BASELINES, experiments.TABLE_BASELINES)):
      assert set(names[table]) == {a.name for a in rows
                                   if table in a.paper_tables}
    assert "vanilla" in experiments.TABLE_VARIANTS[table]  # the Transformer
  for attention in attentions.ATTENTIONS:
    assert set(attention.paper_tables) <= set(experiments.TABLE_EXPERIMENTS)
  assert experiments.TABLE_VARIANTS["Table 2-3"] == tuple(
      v.name for v in attentions.VARIANTS if v.in_paper)
  assert not experiments.TABLE_BASELINES["Table 2-3"]


@pytest.mark.parametrize("table", sorted(_TABLE_JOB_COMMANDS))
def test_paper_commands_print_the_baseline_rows(monkeypatch, table):
  jobs = _paper_commands(monkeypatch, "--table", table)
  wanted = [attentions.get(label)
            for label in experiments.TABLE_BASELINES[table]]
  for experiment in experiments.TABLE_EXPERIMENTS[table]:
    exp = experiments.EXPERIMENTS[experiment]
    for baseline in wanted:
      gin_file = "baselines/%s.gin" % baseline.name
      assert os.path.exists(os.path.join(_SYNTH_GIN, gin_file))
      (cmds,) = [c for h, c in jobs if h == _baseline_header(experiment,
                                                               baseline)]
      assert len(cmds) == _TABLE_JOB_COMMANDS[table]
      # Trained from scratch: the model file, the experiment file, then
      # the baseline's file (so its layer swap wins).
      assert _gin_files(cmds[0]) == ["models/t5.1.0.base.gin",
                                     exp.gin_file, gin_file]
      # Finetuned and evaluated: an operative config of the baseline's,
      # then its file again.
      root = "gs://${BUCKET}/synthesizer/%s/base/baselines/%s/" % (
          experiment, baseline.name)
      for c in cmds[1:]:
        files = _gin_files(c)
        assert files[0].startswith(root)
        assert files[0].endswith("/operative_config.gin")
        assert files[1] == gin_file
      for c in cmds:
        assert _flag(c, "--model_dir").startswith(root)
  # No other baseline rows; the variants' rows are still there.
  assert sum("baseline" in h for h, _ in jobs) == len(
      wanted) * len(experiments.TABLE_EXPERIMENTS[table])
  assert sum(", variant " in h for h, _ in jobs) == len(
      experiments.TABLE_VARIANTS[table]) * len(
          experiments.TABLE_EXPERIMENTS[table])


def test_paper_commands_print_no_baseline_for_tables_2_3(monkeypatch):
  jobs = _paper_commands(monkeypatch, "--table", "Table 2-3")
  assert jobs and not any("baseline" in h for h, _ in jobs)


def test_a_baseline_flag_adds_it_to_another_table(monkeypatch):
  jobs = _paper_commands(monkeypatch, "--baseline", "dynamic_conv",
                         "--table", "Table 2-3")
  dyconv = attentions.get("DyConv")
  assert [h for h, _ in jobs] == [
      _baseline_header(e, dyconv)
      for e in experiments.TABLE_EXPERIMENTS["Table 2-3"]]
  for (_, cmds), experiment in zip(jobs, experiments.TABLE_EXPERIMENTS[
      "Table 2-3"]):
    assert _gin_files(cmds[0])[1:] == [
        experiments.EXPERIMENTS[experiment].gin_file,
        "baselines/dynamic_conv.gin"]
  # The language model evaluates its perplexity, like the variants'.
  (lm1b,) = [c for h, c in jobs if h.startswith("Table 2: LM1B")]
  assert "perplexity_eval.gin" in _gin_files(lm1b[-1])


def test_linformer_in_a_language_model_is_refused(capsys):
  status = conftest.run_tool("tpu_job.py", _BASE_ARGS + [
      "--baseline=linformer", "--experiment=lm1b"])
  assert status == 2
  err = capsys.readouterr().err
  assert "linformer" in err and "lm1b" in err
  assert "decoder-only language model" in err and "not causal" in err
  # In a table: nothing printed, the same message.
  status = conftest.run_tool("paper_commands.py", [
      "--baseline=linformer", "--table=Table 2-3"])
  captured = capsys.readouterr()
  assert status == 2 and not captured.out
  assert "Table 2-3" in captured.err and "lm1b" in captured.err
  assert "not causal" in captured.err
  # Every table: Tables 2-3 are left out with the reason, the rest printed.
  status = conftest.run_tool("paper_commands.py", ["--baseline=linformer"])
  captured = capsys.readouterr()
  assert status == 0
  assert "Table 2-3 left out" in captured.err and "not causal" in captured.err
  assert "lm1b" not in captured.out
  assert "baselines/linformer.gin" in captured.out
  assert "LinformerAttention.k = 32" in captured.out
  with pytest.raises(ValueError, match="not causal"):
    cloud_tpu.Job(tpu="t", zone="z", gcp_project="p", bucket="gs://b",
                 tpu_topology="2x2", model_size="base", baseline="linformer",
                 experiment="lm1b")


def test_linformer_in_an_encoder_decoder_follows_the_experiment(monkeypatch):
  # Its file keeps the decoder's self-attention: accepted, after the
  # experiment file, with the file's own k (the paper sets k only for
  # Table 7).
  text = _dry_run(monkeypatch, "--baseline=linformer",
                  "--experiment=wmt_ende", "--stage=all")
  assert "baseline linformer (Linformer)" in text
  for c in _t5_commands(text):
    assert "baselines/linformer.gin" in _gin_files(c)
    assert not any(p.startswith("LinformerAttention.")
                   for p in _gin_params(c))
  assert _gin_files(_t5_commands(text)[0]) == [
      "models/t5.1.0.base.gin", "experiments/wmt14_ende.gin",
      "baselines/linformer.gin"]


def test_linformer_binds_k_32_in_table_7(monkeypatch):
  jobs = _paper_commands(monkeypatch, "--table", "Table 7")
  linformer = attentions.get("Linformer")
  for experiment in ("ag_news", "imdb"):
    (cmds,) = [c for h, c in jobs
               if h == _baseline_header(experiment, linformer)]
    for c in cmds:
      params = _gin_params(c)
      assert "LinformerAttention.k = 32" in params
      # After the gin files; before the user's --gin_param, which wins.
      assert params.index("LinformerAttention.k = 32") == len(params) - 1
  # The variants bind nothing of Linformer's.
  for header, cmds in jobs:
    if "variant" in header:
      assert not any("Linformer" in p for c in cmds for p in _gin_params(c))
  text = _dry_run(monkeypatch, "--baseline=linformer", "--experiment=imdb",
                  "--stage=pretrain", "--gin_param=LinformerAttention.k = 64")
  params = _gin_params(_t5_commands(text)[0])
  assert params[-2:] == ["LinformerAttention.k = 32",
                         "LinformerAttention.k = 64"]


def test_variant_and_baseline_are_exclusive(capsys):
  assert conftest.run_tool("tpu_job.py", _BASE_ARGS + [
      "--variant=random", "--baseline=dynamic_conv"]) == 2
  assert "not allowed with" in capsys.readouterr().err
  for kwargs in ({}, {"variant": "random", "baseline": "dynamic_conv"}):
    with pytest.raises(ValueError, match="exactly one"):
      cloud_tpu.Job(tpu="t", zone="z", gcp_project="p", bucket="gs://b",
                   tpu_topology="2x2", model_size="base", **kwargs)
  with pytest.raises(ValueError,
                     match="Unknown baseline 'conv'; known: lightweight_conv"):
    cloud_tpu.resolve_attention(baseline="conv")


def _mesh_transformer_flags():
  """A copy of the flags of the installed `t5_mesh_transformer`."""
  # pylint: disable=g-import-not-at-top,unused-import
  import t5.models.mesh_transformer_main  # Defines them.
  return copy.deepcopy(flags.FLAGS)


def test_paper_commands_parse_as_t5_mesh_transformer_flags(monkeypatch):
  jobs = (_paper_commands(monkeypatch) + _paper_commands(
      monkeypatch, "--baseline=local_attention", "--baseline=dynamic_conv",
      "--variant=random"))
  assert any("baseline" in h for h, _ in jobs)
  for header, cmds in jobs:
    assert cmds, header
    for argv in cmds:
      assert argv[0] == "t5_mesh_transformer"
      parsed = _mesh_transformer_flags()
      # Unknown flags and bad values raise; nothing may be left over.
      assert parsed(argv) == argv[:1], (header, argv)
      assert parsed.gin_file == _gin_files(argv)
      assert parsed.module_import == ["mtf_synthesizer", "t5_tasks"]
      assert all(_gin_file_exists(f) for f in parsed.gin_file), header
      # Each binding parses as gin (skipping configurables the test process
      # has not imported).
      gin.clear_config()
      try:
        for param in parsed.gin_param:
          gin.parse_config(param, skip_unknown=True)
      finally:
        gin.clear_config()


def test_docs_dry_run_example_is_the_tools_output(monkeypatch):
  """docs/tpu.md shows what the tool prints for its example command."""
  with open(os.path.join(conftest.REPO, "docs", "tpu.md")) as f:
    doc = f.read()
  command = re.search(r"    python tools/tpu_job.py --dry_run (.*?)\n\n", doc,
                      re.S).group(1)
  args = shlex.split(command.replace("\\\n", " "))
  shown = re.search(r"Output:\n\n```\n(.*?)```", doc, re.S).group(1)
  assert _dry_run(monkeypatch, *args, base=["--dry_run"]) == shown


def test_sigterm_kills_the_command_in_progress_and_starts_no_other(
    tmp_path, capsys):
  # A pre-empted or stopped batch job leaves no trainer writing into the
  # model directory that the restarted job resumes from.
  pid_file = tmp_path / "pid"
  log = tmp_path / "log"
  sleeper = ["sh", "-c", "echo $$ > %s; exec sleep 120" % pid_file]
  never = ["sh", "-c", "echo ran >> %s" % log]

  def stop_when_running():
    deadline = time.time() + 60
    while time.time() < deadline and not (
        pid_file.exists() and pid_file.read_text().strip()):
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

  stopper = threading.Thread(target=stop_when_running)
  stopper.start()
  begin = time.time()
  status = cloud_tpu.run_commands([sleeper, never])
  stopper.join()
  assert status == 128 + signal.SIGTERM
  assert time.time() - begin < 60
  assert not log.exists()
  child = int(pid_file.read_text())
  with pytest.raises(ProcessLookupError):
    os.kill(child, 0)  # killed and reaped
  assert "stopped by SIGTERM" in capsys.readouterr().err
  # The tool's own SIGTERM handling ends with it.
  assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_the_dry_run_pastes_into_a_shell_as_it_is(monkeypatch):
  """Without --zone and --gcp_project the gcloud line holds ${ZONE} and
  ${PROJECT} for the shell to expand; pasted into bash (gcloud a function
  that prints its arguments), it creates the VM in the zone set there."""
  text = _dry_run(monkeypatch, base=["--dry_run", "--bucket=gs://b",
                                     "--tpu_topology=v3-8"])
  monkeypatch.undo()  # the dry run is over; bash runs what it printed
  assert "\\$" not in text
  script = ("gcloud() { printf '%s\\n' \"$@\"; }\n"
            "tensorboard() { :; }\nt5_mesh_transformer() { :; }\n"
            "mtf-synthesizer-data() { :; }\n"
            "ZONE=europe-west4-a PROJECT=my-project\n" + text)
  out = subprocess.run(["bash", "-euc", script], capture_output=True,
                       text=True, check=True).stdout.splitlines()
  assert out[:7] == ["compute", "tpus", "tpu-vm", "create", "synth-v3-8",
                     "--zone=europe-west4-a", "--project=my-project"]
  assert "# set ZONE=... and PROJECT=... first" in text
