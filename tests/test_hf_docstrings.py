# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch model's docstrings are transformers' `@auto_docstring`'s.

The model's classes and forwards are decorated as transformers' T5's are:
transformers writes the standard arguments' text, and the arguments whose
meaning is the model's own are documented in the forward's own (raw)
docstring, which overrides the standard text. Here:

  * every argument of every forward is documented, the model's own with
    the model's text (`labels` with mesh's loss, not "masked language
    modeling"), the others with transformers' standard text;
  * importing the model prints none of `auto_docstring`'s `[ERROR]` lines,
    from this package and where a saved model is loaded with
    `trust_remote_code` without it (the check can fail: an undocumented
    argument of a decorated function prints one).
"""

import inspect
import os
import subprocess
import sys

import pytest

import conftest
import tiny_models

torch = pytest.importorskip("torch")
# pylint: disable=g-import-not-at-top,wrong-import-position
from transformers.utils import auto_docstring

from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling
from mtf_synthesizer.hf_tools import saving
# pylint: enable=g-import-not-at-top,wrong-import-position

pytestmark = pytest.mark.usefixtures("one_thread")
FORWARDS = {
    "MtfSynthesizerStack": modeling.MtfSynthesizerStack,
    "MtfSynthesizerModel": modeling.MtfSynthesizerModel,
    "MtfSynthesizerForConditionalGeneration":
        modeling.MtfSynthesizerForConditionalGeneration,
    "MtfSynthesizerForCausalLM": modeling.MtfSynthesizerForCausalLM,
}
# The model's own text of an argument, by class: (argument, a phrase of it).
OWN = {
    "MtfSynthesizerStack": [("position_ids", "tables it reads")],
    "MtfSynthesizerModel": [("attention_mask", "input_ids != pad_token_id"),
                            ("output_hidden_states", "indices")],
    "MtfSynthesizerForConditionalGeneration": [
        ("labels", "mesh's"), ("num_items_in_batch", "Trainer"),
        ("decoder_attention_mask", "the decoder is causal")],
    "MtfSynthesizerForCausalLM": [
        ("labels", "mesh's"), ("shift_labels", "already shifted"),
        ("position_ids", "tables it reads"),
        ("num_items_in_batch", "Trainer")],
}


def _arguments(doc):
  """{argument: its text} of an `auto_docstring`-written Args section."""
  lines = doc.split("Args:", 1)[1].split("Returns:", 1)[0].split("\n")
  found, name = {}, None
  indent = min(len(l) - len(l.lstrip()) for l in lines if l.strip())
  for line in lines:
    if line.strip() and len(line) - len(line.lstrip()) == indent:
      name = line.strip().split(" ", 1)[0]
      found[name] = ""
    elif name:
      found[name] += " " + line.strip()
  return found


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_every_argument_is_documented_with_its_meaning(name):
  forward = FORWARDS[name].forward
  documented = _arguments(forward.__doc__)
  signature = inspect.signature(inspect.unwrap(forward))
  wanted = [p for p in signature.parameters
            if p not in ("self", "kwargs")]
  assert sorted(documented) == sorted(wanted), name
  for argument, phrase in OWN[name]:
    assert phrase in documented[argument], (argument, documented[argument])
  if "labels" in documented:
    assert "masked language modeling" not in documented["labels"]
  assert "Indices of input sequence tokens" in documented["input_ids"] or (
      name == "MtfSynthesizerForCausalLM")


_IMPORT = "import mtf_synthesizer.hf_model.modeling_mtf_synthesizer"

_LOAD = """
import sys
import transformers
for forbidden in ("mtf_synthesizer",):
  try:
    __import__(forbidden)
  except ImportError:
    continue
  raise SystemExit(forbidden + " is importable")
transformers.AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1],
                                                   trust_remote_code=True)
print("loaded")
"""


def _errors(output):
  return [line for line in output.splitlines() if "[ERROR]" in line]


def test_importing_the_model_prints_no_docstring_error():
  proc = subprocess.run([sys.executable, "-c", _IMPORT],
                        capture_output=True, text=True, timeout=600,
                        cwd=conftest.REPO)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert not _errors(proc.stdout + proc.stderr)


def test_loading_a_saved_model_prints_no_docstring_error(tmp_path):
  model = tiny_models.seq2seq(("dense", "dot_product"))
  saving.save_pretrained(model, tmp_path / "model")
  (tmp_path / "load.py").write_text(_LOAD)
  env = dict(os.environ, HF_MODULES_CACHE=str(tmp_path / "modules"))
  proc = subprocess.run(
      conftest.pytorch_python(tmp_path) + [str(tmp_path / "load.py"),
                                           str(tmp_path / "model")],
      capture_output=True, text=True, timeout=600, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "loaded" in proc.stdout
  assert not _errors(proc.stdout + proc.stderr)


def test_the_check_can_fail(capsys):
  """An argument of the model's own left undocumented is reported."""

  class Undocumented(modeling.MtfSynthesizerPreTrainedModel):

    def forward(self, input_ids=None, tables_row=None):
      r"""
      Returns:
          Nothing.
      """
      del input_ids, tables_row

  auto_docstring(Undocumented.forward)
  assert any("tables_row" in line for line in _errors(capsys.readouterr().out))
