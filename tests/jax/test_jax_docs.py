# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""docs/jax.md's and docs/jax_training.md's commands and blocks, as written.

The offline conversion of the tiny released-layout checkpoint the tests keep
(`mtf-synthesizer-flax-from-mesh`, run as `python -m` over its module, which
setup.py's console script names), the block that restores it and the beam
search's block; the trainer's offline run (`mtf-synthesizer-jax-train`,
the same way), and every trainer command of the documents (docs/tpu.md's
for a TPU too, those `gcloud ... --command=` runs on each host) checked for
its flags, gin files, bindings and task. tests/test_docs.py checks that
this module runs them.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
import doc_blocks  # pylint: disable=g-import-not-at-top,wrong-import-position

DOC = "docs/jax.md"
COMMAND = "tests/data/mesh_reference/t5.1.1-encdec-t5_attention"
PYTHON = "checkpointing.restore("
BEAM_SEARCH = "decoding.beam_search("
PROGRAM = "mtf-synthesizer-flax-from-mesh"
MODULE = "mtf_synthesizer.commands.flax_from_mesh"


def test_the_console_script_is_the_modules_main():
  with open(os.path.join(REPO, "setup.py")) as f:
    setup = f.read()
  assert re.search(r'"%s=\s*"?\s*"?%s:main"' % (PROGRAM, MODULE),
                   setup.replace('"\n        "', "")), setup


@pytest.fixture(name="converted", scope="module")
def fixture_converted(tmp_path_factory):
  """Runs the document's offline command; returns its output directory."""
  block = doc_blocks.find_block(DOC, "sh", COMMAND)
  (command,), _ = doc_blocks.parse_block(block)
  argv = command.full_argv()
  assert argv[0] == ".venv-jax/bin/" + PROGRAM
  out_dir = str(tmp_path_factory.mktemp("docs") / "flax_dv")
  argv = doc_blocks.substitute(argv[1:], {"/tmp/flax_dv": out_dir})
  result = subprocess.run([sys.executable, "-m", MODULE] + argv, cwd=REPO,
                          capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stderr
  assert "dense/w2" in result.stdout  # D's own parameters start fresh
  return out_dir


def test_the_python_block_restores_it(converted, capsys):
  block = doc_blocks.find_block(DOC, "python", PYTHON)
  text = block.text.replace('"/tmp/flax_dv"', repr(converted))
  exec(compile(text, block.where, "exec"), {})  # pylint: disable=exec-used
  assert capsys.readouterr().out.split() == ["EncoderDecoder",
                                             "dense_vanilla"]


def test_the_beam_search_block_runs(converted, capsys):
  block = doc_blocks.find_block(DOC, "python", BEAM_SEARCH)
  text = block.text.replace('"/tmp/flax_dv"', repr(converted))
  exec(compile(text, block.where, "exec"), {})  # pylint: disable=exec-used
  assert capsys.readouterr().out.split() == ["(2,", "4,", "8)", "(2,", "4)"]


# --- docs/jax_training.md and docs/tpu.md: mtf-synthesizer-jax-train -------

TRAIN_DOC = "docs/jax_training.md"
TRAIN_COMMAND = "flax/train/tiny_offline.gin"
TRAIN_PROGRAM = "mtf-synthesizer-jax-train"
TRAIN_MODULE = "mtf_synthesizer.commands.jax_train"


def test_the_trainers_console_script_is_the_modules_main():
  with open(os.path.join(REPO, "setup.py")) as f:
    setup = f.read()
  assert '"%s=%s:main"' % (TRAIN_PROGRAM, TRAIN_MODULE) in setup, setup


def _train_commands():
  """(where, arguments) of every trainer command the documents give.

  Their own lines, and those `gcloud ... --worker=all --command="..."`
  runs on every host of a slice.
  """
  found = []
  for command in doc_blocks.commands():
    argv = command.full_argv()
    if os.path.basename(argv[0]) == TRAIN_PROGRAM:
      found.append((command.where, argv[1:]))
    for arg in argv:
      if arg.startswith("--command=") and TRAIN_PROGRAM in arg:
        for part in arg[len("--command="):].split("&&"):
          words = shlex.split(part)
          while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            words = words[1:]  # environment variables
          if words and os.path.basename(words[0]) == TRAIN_PROGRAM:
            found.append((command.where + " (--command)", words[1:]))
  return found


def test_the_documents_give_the_trainers_commands():
  where = {w.split(":")[0] for w, _ in _train_commands()}
  assert {TRAIN_DOC, "docs/tpu.md"} <= where, where
  assert any("--multi_host" in argv for _, argv in _train_commands())


@pytest.mark.parametrize("where,argv", _train_commands(),
                         ids=[w for w, _ in _train_commands()])
def test_train_command_names_real_flags_gin_files_and_tasks(where, argv):
  """Its flags parse, its gin files and bindings parse, its task exists."""
  # pylint: disable=g-import-not-at-top
  import gin
  import mtf_synthesizer
  from mtf_synthesizer.commands import jax_train
  from mtf_synthesizer.flax_train import data
  # pylint: enable=g-import-not-at-top
  args, bindings = jax_train.parse_args(argv)
  files = []
  for name in args.gin_file:
    path = os.path.join(mtf_synthesizer.GIN_DIR, name)
    assert os.path.isfile(path), (where, name)
    files.append(path)
  data.import_modules(data.DEFAULT_MODULES)
  gin.clear_config()
  try:
    gin.parse_config_files_and_bindings(
        files, ["train.model_dir = %r" % args.model_dir] + bindings)
    task = gin.query_parameter("train.mixture_or_task_name")
    variant = gin.query_parameter("T5Config.variant")
  finally:
    gin.clear_config()
  data.get_task(task)
  assert variant, where


@pytest.fixture(name="trained", scope="module")
def fixture_trained(tmp_path_factory):
  """Runs docs/jax_training.md's offline command; (model dir, stderr)."""
  block = doc_blocks.find_block(TRAIN_DOC, "sh", TRAIN_COMMAND)
  (command,), _ = doc_blocks.parse_block(block)
  argv = command.full_argv()
  assert argv[0] == ".venv-jax/bin/" + TRAIN_PROGRAM
  model_dir = str(tmp_path_factory.mktemp("docs") / "jax_tiny")
  argv = doc_blocks.substitute(argv[1:], {"/tmp/jax_tiny": model_dir})
  result = subprocess.run([sys.executable, "-m", TRAIN_MODULE] + argv,
                          cwd=REPO, capture_output=True, text=True,
                          check=False, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  return model_dir, result.stderr


def test_the_offline_run_prints_and_writes_what_the_document_says(trained):
  model_dir, stderr = trained
  with open(os.path.join(REPO, TRAIN_DOC)) as f:
    text = f.read()
  # The document's output, its first lines as printed.
  shown = re.search(r"\n    (mtf-synthesizer-jax-train: .*?)\n    \.\.\.\n",
                    text, re.S).group(1).split("\n    ")
  lines = [l.replace(model_dir, "/tmp/jax_tiny")
           for l in stderr.splitlines()
           if re.match(r"mtf-synthesizer-jax-train:|step |eval at ", l)]
  assert lines[:2] == shown[:2], (lines, shown)
  for want, got in zip(shown[2:], lines[2:]):  # the same form, any value
    assert re.sub(r"-?\d+\.\d+", "N", want) == re.sub(r"-?\d+\.\d+", "N",
                                                      got), (want, got)
  assert lines[-2:][0].startswith("step 6/6")
  assert lines[-1].startswith("eval at step 6:")
  assert sorted(os.listdir(model_dir)) == [
      "checkpoint_4", "checkpoint_6", "config.gin", "eval", "model.gin",
      "operative_config.gin", "train"]
