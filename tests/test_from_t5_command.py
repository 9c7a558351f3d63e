# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The commands that start without TensorFlow, as a user runs them.

`mtf-synthesizer-export-hf` and `mtf-synthesizer-from-t5` enter through
`_mtf_synthesizer_commands` (setup.py's console scripts; tools/'s twins):
in a fresh process, --help and an argument error answer without importing
TensorFlow or mesh. `mtf-synthesizer-from-t5` writes a Synthesizer around a
locally saved tiny T5 (no download), without TensorFlow; a Python that
cannot import TensorFlow, mesh or this package loads the directory with
`trust_remote_code=True` and, for V, gives the T5's logits.
"""

import json
import os
import subprocess
import sys

import huggingface_hub
import pytest

import conftest
import doc_blocks
from mtf_synthesizer.commands import from_t5 as from_t5_command
import test_from_t5

# Runs a command's entry point as the console script does; prints its exit
# status and which heavy modules it imported.
ENTRY = """
import json, sys
import _mtf_synthesizer_commands
name = sys.argv.pop(1)
sys.argv[0] = "mtf-synthesizer-" + name.replace("_", "-")
try:
  code = getattr(_mtf_synthesizer_commands, name)()
except SystemExit as e:
  code = e.code
print(json.dumps({"code": code, "imported": sorted(
    m for m in ("tensorflow", "mesh_tensorflow", "gin.tf", "t5.models")
    if m in sys.modules)}))
"""
# The command's module with the package's mesh layers imported (the
# negative control).
PLAIN_IMPORT = """
import json, sys
import mtf_synthesizer.commands.from_t5
import mtf_synthesizer
mtf_synthesizer.import_layers()
print(json.dumps({"code": 0, "imported": sorted(
    m for m in ("tensorflow", "mesh_tensorflow") if m in sys.modules)}))
"""
# Loads the written directory without this package; prints the largest
# difference from the T5's logits.
SIDE = """
import json, sys
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
from transformers import T5ForConditionalGeneration
out, t5_dir, inputs, decoder_inputs = sys.argv[1:]
model = AutoModelForSeq2SeqLM.from_pretrained(out, trust_remote_code=True)
t5 = T5ForConditionalGeneration.from_pretrained(t5_dir).eval()
inputs, decoder_inputs = json.loads(inputs), json.loads(decoder_inputs)
ids, dec = torch.tensor(inputs), torch.tensor(decoder_inputs)
with torch.no_grad():
  a = model(input_ids=ids, attention_mask=(ids != 0).long(),
            decoder_input_ids=dec).logits
  b = t5(input_ids=ids, attention_mask=(ids != 0).long(),
         decoder_input_ids=dec).logits
print(json.dumps({"difference": float((a - b).abs().max()),
                  "scale": float(b.abs().max()),
                  "module": type(model).__module__,
                  "tokenizer": type(AutoTokenizer.from_pretrained(
                      out, trust_remote_code=True)).__name__,
                  "absent": [m for m in ("tensorflow", "mtf_synthesizer")
                             if m in sys.modules]}))
"""


def _run(script, *argv, env=None):
  proc = subprocess.run([sys.executable, "-c", script] + list(argv),
                        capture_output=True, text=True, timeout=600,
                        cwd=conftest.REPO, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1]), proc


@pytest.mark.parametrize("command", ["export_hf", "from_t5"])
@pytest.mark.parametrize("argv", [["--help"], ["--no_such_flag"]],
                         ids=["help", "error"])
def test_answers_before_tensorflow(command, argv):
  result, proc = _run(ENTRY, command, *argv)
  assert result["code"] == (0 if argv == ["--help"] else 2)
  assert "usage" in (proc.stdout + proc.stderr).lower()
  assert result["imported"] == [], result


def test_the_check_can_fail():
  """The check sees TensorFlow where the mesh layers are imported."""
  result, _ = _run(PLAIN_IMPORT)
  assert "tensorflow" in result["imported"], result


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
  """A tiny T5 v1.1-layout checkpoint with a ByT5 tokenizer, saved."""
  # pylint: disable-next=g-import-not-at-top
  from transformers import ByT5Tokenizer
  path = tmp_path_factory.mktemp("t5") / "t5"
  test_from_t5._t5("t5.1.1").save_pretrained(path)
  ByT5Tokenizer().save_pretrained(path)
  return path


def test_writes_a_model_that_loads_without_the_package(t5_dir, tmp_path):
  out = tmp_path / "out"
  result, proc = _run(ENTRY, "from_t5", "--t5", str(t5_dir), "--variant",
                      "V", "--output_dir", str(out),
                      "--synthesizer_max_length", "16")
  assert result == {"code": 0, "imported": []}, proc.stderr[-3000:]
  summary = json.loads(proc.stdout.strip().splitlines()[-2])
  assert summary["unused_t5_weights"] == []
  assert summary["tokenizer"] == "ByT5Tokenizer"
  assert {"config.json", "model.safetensors"} <= set(os.listdir(out))
  # The model's code, all of it and nothing else (not the conversion).
  model_code = os.path.join(conftest.REPO, "mtf_synthesizer", "hf_model")
  assert {n for n in os.listdir(out) if n.endswith(".py")} == {
      n for n in os.listdir(model_code)
      if n.endswith(".py") and n != "__init__.py"}
  card = huggingface_hub.ModelCard.load(out / "README.md")
  assert card.data.library_name == "transformers"
  assert "base_model" not in card.data.to_dict()  # a directory, no Hub name
  assert "converted from the T5 %s" % t5_dir in card.text
  (tmp_path / "side.py").write_text(SIDE)
  env = dict(os.environ, HF_MODULES_CACHE=str(tmp_path / "modules"))
  proc = subprocess.run(
      conftest.pytorch_python(tmp_path) + [
          str(tmp_path / "side.py"), str(out), str(t5_dir),
          json.dumps(test_from_t5.INPUTS.tolist()),
          json.dumps(test_from_t5.DECODER_INPUTS.tolist())],
      capture_output=True, text=True, timeout=600, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  loaded = json.loads(proc.stdout.strip().splitlines()[-1])
  assert loaded["absent"] == []
  assert not loaded["module"].startswith("mtf_synthesizer"), loaded
  assert loaded["tokenizer"] == "ByT5Tokenizer"
  assert loaded["scale"] > 1.0
  assert loaded["difference"] <= test_from_t5.TOLERANCE, loaded


def test_reports_what_a_variant_leaves_out(t5_dir, tmp_path, capsys):
  from_t5 = from_t5_command
  out = tmp_path / "out"
  assert from_t5.main(["--t5", str(t5_dir), "--variant", "random",
                       "--output_dir", str(out),
                       "--synthesizer_max_length", "16"]) == 0
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert sorted(summary["unused_t5_weights"]) == test_from_t5._expected_unused(
      ("random",), test_from_t5._t5("t5.1.1"))
  assert summary["initialized_weights"]
  with pytest.raises(SystemExit):
    from_t5.main(["--t5", str(t5_dir), "--variant", "LightConv",
                  "--output_dir", str(out)])
  assert "no variant 'LightConv'" in capsys.readouterr().err
  assert from_t5.main(["--t5", str(tmp_path / "missing"), "--variant", "V",
                       "--output_dir", str(out)]) == 2


# The documents' Hub names, replaced by the local tiny T5 (no download).
HUB_NAMES = ("google/t5-v1_1-small", "google/flan-t5-small")


@pytest.mark.parametrize("doc", ["docs/export.md", "docs/pytorch.md"])
def test_the_documents_command(doc, t5_dir, tmp_path, capsys):
  command = doc_blocks.find(doc, "from_t5.py")
  argv = command.full_argv()
  (hub_name,) = [n for n in HUB_NAMES if any(n in a for a in argv)]
  (output,) = command.values("output_dir")
  argv = command.substituted({hub_name: str(t5_dir),
                              output: str(tmp_path / "out")})
  assert conftest.run_tool("from_t5.py", argv[2:]) == 0
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  (variant,) = command.values("variant")
  config = json.loads((tmp_path / "out" / "config.json").read_text())
  assert config["encoder_synthesizers"] == list(
      from_t5_command.variant_components(variant))
  assert summary["tokenizer"] == "ByT5Tokenizer"


def test_the_readmes_python_block(t5_dir, tmp_path):
  """docs/export.md's from_t5 block, as a user copies it, on the local T5."""
  block = doc_blocks.find_block("docs/export.md", "python",
                                "model, info = from_t5(")
  script = tmp_path / "readme_from_t5.py"
  script.write_text(doc_blocks.substitute_text(
      block.text, {'"google/t5-v1_1-small"': repr(str(t5_dir))}))
  proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                        text=True, timeout=600, cwd=str(tmp_path))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "T5 weights left out: []" in proc.stdout, proc.stdout
  # D+V: D's w1 (weight, bias), w2, b2 and the mixture's logits per layer.
  layers = 2 * test_from_t5.SIZES["num_layers"]
  assert "new weights (finetune them): %d" % (5 * layers) in proc.stdout


def test_the_export_imports_the_layers_after_parsing(tmp_path):
  """A fresh export-hf process: no TensorFlow to parse, then the export."""
  import test_hf_export  # pylint: disable=g-import-not-at-top
  model_dir = test_hf_export._synthetic_model(tmp_path, "t5.1.0")
  result, proc = _run(ENTRY, "export_hf", model_dir, str(tmp_path / "out"),
                      "--vocabulary=byte")
  assert result["code"] == 0, proc.stderr[-3000:]
  assert "tensorflow" in result["imported"]
  assert (tmp_path / "out" / "model.safetensors").exists()
