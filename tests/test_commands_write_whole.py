# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The commands write a whole model directory or none.

`mtf-synthesizer-from-t5` (on a tiny T5 saved here) and
`mtf-synthesizer-export-hf` (on a model directory of random weights,
`test_hf_export._synthetic_model`): a process killed while it writes leaves
no output directory; an output directory that holds files is refused with
its name and exit status 2, and left as it was; --overwrite replaces it
whole. A T5 without a tokenizer gives a model without one, and says so.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import conftest
from mtf_synthesizer.commands import from_t5 as from_t5_command
from mtf_synthesizer.commands import whole_dir
import test_from_t5

# Files of a saved transformers tokenizer (any one of them is one).
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "spiece.model",
                   "special_tokens_map.json", "added_tokens.json")
# Runs a command's entry point as its console script does, with one step of
# the writing replaced by one that writes MARKER (the directory being
# written) and then waits to be killed. argv: MARKER, the command's name,
# its arguments.
STALLED = """
import sys, time
import _mtf_synthesizer_commands
marker, name = sys.argv[1:3]
sys.argv = ["mtf-synthesizer-" + name.replace("_", "-")] + sys.argv[3:]

def stall(directory):
  with open(marker + ".tmp", "w") as f:
    f.write(str(directory))
  import os
  os.replace(marker + ".tmp", marker)
  time.sleep(600)

if name == "from_t5":
  # After the model's files are written, before the tokenizer's.
  from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling
  model_class = modeling.MtfSynthesizerForConditionalGeneration
  save = model_class.save_pretrained
  def save_and_stall(self, directory, *args, **kwargs):
    save(self, directory, *args, **kwargs)
    stall(directory)
  model_class.save_pretrained = save_and_stall
else:
  # After config.json, the weights and the code, before the tokenizer.
  import mtf_synthesizer
  mtf_synthesizer.import_layers()
  from mtf_synthesizer.export import hf_export
  hf_export._write_tokenizer = lambda vocabulary, extra_ids, out: stall(out)
sys.exit(getattr(_mtf_synthesizer_commands, name)())
"""


@pytest.fixture(scope="module")
def t5_dirs(tmp_path_factory):
  """A tiny T5 saved with a ByT5 tokenizer, and the same without one."""
  # pylint: disable-next=g-import-not-at-top
  from transformers import ByT5Tokenizer
  root = tmp_path_factory.mktemp("t5s")
  t5 = test_from_t5._t5("t5.1.1")
  t5.save_pretrained(root / "with_tokenizer")
  ByT5Tokenizer().save_pretrained(root / "with_tokenizer")
  t5.save_pretrained(root / "without_tokenizer")
  return {"with": root / "with_tokenizer",
          "without": root / "without_tokenizer"}


@pytest.fixture(scope="module")
def mesh_model_dir(tmp_path_factory):
  """A model directory the export reads: checkpoint and operative config."""
  import test_hf_export  # pylint: disable=g-import-not-at-top
  return test_hf_export._synthetic_model(tmp_path_factory.mktemp("mesh"),
                                         "t5.1.0")


def _from_t5_argv(t5_dir, out, *extra):
  return ["--t5", str(t5_dir), "--variant", "V", "--output_dir", str(out),
          "--synthesizer_max_length", "16"] + list(extra)


def _export_argv(model_dir, out, *extra):
  return [model_dir, str(out), "--vocabulary=byte"] + list(extra)


def _run(command, argv):
  """Runs a command in this process as tools/ runs it; its exit status."""
  return conftest.run_tool(command + ".py", argv)


def _argv(command, t5_dirs, mesh_model_dir, out, *extra):
  if command == "from_t5":
    return _from_t5_argv(t5_dirs["with"], out, *extra)
  return _export_argv(mesh_model_dir, out, *extra)


def _leftovers(parent, out):
  """Names beside `out` that the commands' writing made."""
  return [n for n in os.listdir(parent) if n.startswith("." + out.name)]


@pytest.mark.parametrize("command", ["from_t5", "export_hf"])
def test_a_killed_run_leaves_no_output_directory(command, t5_dirs,
                                                 mesh_model_dir, tmp_path):
  out = tmp_path / "out"
  marker = tmp_path / "writing"
  proc = subprocess.Popen(
      [sys.executable, "-c", STALLED, str(marker), command] +
      _argv(command, t5_dirs, mesh_model_dir, out),
      cwd=conftest.REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)
  try:
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and (
        time.time() < deadline):
      time.sleep(0.2)
    assert marker.exists(), proc.communicate(timeout=60)[1][-3000:]
    assert proc.poll() is None  # stalled in the middle of the writing
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.communicate()
  assert proc.returncode == -signal.SIGKILL
  # The model's files were written when the process was killed ...
  written = marker.read_text()
  assert {"config.json", "model.safetensors"} <= set(os.listdir(written))
  # ... but not as the output directory.
  assert not out.exists(), os.listdir(out)
  assert os.path.dirname(os.path.abspath(written)) == str(tmp_path)


@pytest.mark.parametrize("command", ["from_t5", "export_hf"])
def test_a_directory_with_files_is_refused(command, t5_dirs, mesh_model_dir,
                                           tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  (out / "notes.txt").write_text("the user's")
  assert _run(command, _argv(command, t5_dirs, mesh_model_dir, out)) == 2
  error = capsys.readouterr().err
  assert str(out) in error and "--overwrite" in error, error
  assert os.listdir(out) == ["notes.txt"]
  assert (out / "notes.txt").read_text() == "the user's"
  assert _leftovers(tmp_path, out) == []


@pytest.mark.parametrize("command", ["from_t5", "export_hf"])
def test_overwrite_replaces_the_directory_whole(command, t5_dirs,
                                                mesh_model_dir, tmp_path,
                                                capsys):
  out = tmp_path / "out"
  (out / "old_subdir").mkdir(parents=True)
  (out / "stale.bin").write_bytes(b"old")
  (out / "config.json").write_text("{}")
  assert _run(command, _argv(command, t5_dirs, mesh_model_dir, out,
                             "--overwrite")) == 0
  capsys.readouterr()
  names = set(os.listdir(out))
  assert {"config.json", "model.safetensors"} <= names
  assert not {"stale.bin", "old_subdir"} & names
  assert json.loads((out / "config.json").read_text())["d_model"] == 32
  assert _leftovers(tmp_path, out) == []


@pytest.mark.parametrize("command", ["from_t5", "export_hf"])
def test_overwrite_never_replaces_the_input(command, t5_dirs,
                                            mesh_model_dir, tmp_path,
                                            capsys):
  """OUT_DIR the input's directory or its parent: refused, both kept."""
  model = t5_dirs["with"] if command == "from_t5" else mesh_model_dir
  before = sorted(os.listdir(model))
  for out in (model, os.path.dirname(model)):
    argv = _argv(command, t5_dirs, mesh_model_dir, out, "--overwrite")
    assert _run(command, argv) == 2
    error = capsys.readouterr().err
    assert "holds the input %s" % model in error, error
  assert sorted(os.listdir(model)) == before


@pytest.mark.parametrize("command", ["from_t5", "export_hf"])
def test_an_empty_directory_is_written(command, t5_dirs, mesh_model_dir,
                                       tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  assert _run(command, _argv(command, t5_dirs, mesh_model_dir, out)) == 0
  capsys.readouterr()
  assert {"config.json", "model.safetensors"} <= set(os.listdir(out))
  assert _leftovers(tmp_path, out) == []


def test_a_t5_without_tokenizer_gives_a_model_without_one(t5_dirs, tmp_path,
                                                          capsys):
  out = tmp_path / "out"
  assert from_t5_command.main(_from_t5_argv(t5_dirs["without"], out)) == 0
  captured = capsys.readouterr()
  summary = json.loads(captured.out.strip().splitlines()[-1])
  assert summary["tokenizer"] is None, summary
  assert any("no tokenizer written" in n for n in summary["notes"]), summary
  assert "no tokenizer written" in captured.err
  names = set(os.listdir(out))
  assert {"config.json", "model.safetensors"} <= names
  assert not names & set(TOKENIZER_FILES), names


def test_a_t5_with_tokenizer_gives_it(t5_dirs, tmp_path, capsys):
  """The control: the same T5 with its tokenizer writes it."""
  out = tmp_path / "out"
  assert from_t5_command.main(_from_t5_argv(t5_dirs["with"], out)) == 0
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert summary["tokenizer"] == "ByT5Tokenizer"
  assert summary["notes"] == []
  assert "tokenizer_config.json" in os.listdir(out)


def test_a_failed_write_leaves_the_old_directory(tmp_path):
  """An error while writing: nothing moved, nothing left beside."""
  out = tmp_path / "out"
  out.mkdir()
  (out / "model.safetensors").write_bytes(b"old")
  with pytest.raises(RuntimeError):
    with whole_dir.written_whole(str(out), overwrite=True) as partial:
      with open(os.path.join(partial, "config.json"), "w") as f:
        f.write("{}")
      raise RuntimeError("the export failed")
  assert os.listdir(out) == ["model.safetensors"]
  assert _leftovers(tmp_path, out) == []


def test_a_linked_directory_is_replaced_behind_its_link(tmp_path):
  target = tmp_path / "target"
  target.mkdir()
  (target / "stale.bin").write_bytes(b"old")
  link = tmp_path / "link"
  link.symlink_to(target)
  with whole_dir.written_whole(str(link), overwrite=True) as partial:
    with open(os.path.join(partial, "config.json"), "w") as f:
      f.write("{}")
  assert link.is_symlink()
  assert os.listdir(link) == ["config.json"]
  assert _leftovers(tmp_path, target) == []


def test_a_file_is_refused_even_with_overwrite(tmp_path):
  out = tmp_path / "out"
  out.write_text("a file")
  for overwrite in (False, True):
    with pytest.raises(whole_dir.OutputDirError, match=str(out)):
      with whole_dir.written_whole(str(out), overwrite):
        pass
  assert out.read_text() == "a file"
