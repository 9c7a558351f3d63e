# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""docs/jax.md's commands and Python blocks, run as written.

The offline conversion of the tiny released-layout checkpoint the tests keep
(`mtf-synthesizer-flax-from-mesh`, run as `python -m` over its module, which
setup.py's console script names), the block that restores it and the beam
search's block. tests/test_docs.py checks that this module runs them.
"""

import os
import re
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
