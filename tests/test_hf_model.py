# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch model of the export: the paper's equations, and its names.

For every synthesizing function and every composition of the variant table,
`hf_reference_side.py` (a process without TensorFlow or mesh) checks the
PyTorch attention layer against the NumPy reference (eq. 3, 8), a language
model's cached decoding against its full pass, and an encoder-decoder's
cached `generate()` against the uncached one. The export's naming of mesh's
variables is checked here; `test_hf_export.py` compares trained models with
mesh itself.
"""

import ast
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import conftest
from mtf_synthesizer import attentions
from mtf_synthesizer import synthesizers
from mtf_synthesizer.export import hf_export
from mtf_synthesizer.export import torch_names

TOLERANCE = 1e-5
# Every function alone, then every composition of the table (in its order).
CASES = [[name] for name in sorted(synthesizers.BY_NAME)] + [
    list(v.components) for v in attentions.VARIANTS
    if len(v.components) > 1]


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
  root = tmp_path_factory.mktemp("hf_reference")
  (root / "cases.json").write_text(json.dumps(CASES))
  proc = subprocess.run(
      conftest.pytorch_python(root) + [
          os.path.join(os.path.dirname(__file__), "hf_reference_side.py"),
          str(root / "cases.json"), str(root / "result.json")],
      stdin=subprocess.DEVNULL, capture_output=True, text=True,
      timeout=900)
  assert proc.returncode == 0, proc.stderr[-5000:]
  return json.loads((root / "result.json").read_text())


@pytest.mark.parametrize("names", CASES, ids="+".join)
def test_layer_equals_the_reference(checked, names):
  assert checked["+".join(names)]["layer"] < TOLERANCE


@pytest.mark.parametrize("names", CASES, ids="+".join)
def test_cached_decoding_equals_the_full_pass(checked, names):
  assert checked["+".join(names)]["decoding"] < TOLERANCE


@pytest.mark.parametrize("names", CASES, ids="+".join)
def test_cached_generate_equals_uncached(checked, names):
  assert checked["+".join(names)]["generate"] == 0


def test_every_function_is_implemented_without_tensorflow(checked):
  assert checked["_functions"] == sorted(synthesizers.BY_NAME)
  assert not {"tensorflow", "mesh_tensorflow", "gin",
              "mtf_synthesizer"} & set(checked["_modules"])


STACKS = {"encoder": "model.encoder", "decoder": "model.decoder"}


@pytest.mark.parametrize("mesh_name,shape,torch_name,torch_shape", [
    ("encoder/block_001/layer_000/SynthesizerAttention/random/R",
     [2, 8, 8], "model.encoder.block.1.layer.0.SelfAttention.random.R",
     [2, 8, 8]),
    # One head: mesh leaves the heads axis out.
    ("encoder/block_001/layer_000/SynthesizerAttention/random/R",
     [8, 8], "model.encoder.block.1.layer.0.SelfAttention.random.R",
     [1, 8, 8]),
    ("decoder/block_000/layer_000/SynthesizerAttention/mixture/alpha_logits",
     [3, 2], "model.decoder.block.0.layer.0.SelfAttention.alpha_logits",
     [3, 2]),
    ("encoder/block_000/layer_000/SynthesizerAttention/dense/w1",
     [16, 2, 4], "model.encoder.block.0.layer.0.SelfAttention.dense.w1.weight",
     [8, 16]),
    ("encoder/block_000/layer_000/SynthesizerAttention/dense/b1",
     [2, 4], "model.encoder.block.0.layer.0.SelfAttention.dense.w1.bias",
     [8]),
    ("encoder/block_000/layer_000/SynthesizerAttention/kv",
     [16, 8], "model.encoder.block.0.layer.0.SelfAttention.v.weight",
     [8, 16]),
    ("decoder/block_000/layer_001/EncDecAttention/q",
     [16, 8], "model.decoder.block.0.layer.1.EncDecAttention.q.weight",
     [8, 16]),
    ("encoder/block_000/layer_000/SelfAttention/relative_attention_bias",
     [2, 32], "model.encoder.block.0.layer.0.SelfAttention."
     "relative_attention_bias.weight", [32, 2]),
    ("decoder/block_010/layer_002/DenseReluDense/wi_1/kernel",
     [16, 64], "model.decoder.block.10.layer.2.DenseReluDense.wi_1.weight",
     [64, 16]),
    ("encoder/block_000/layer_001/rms_norm/scale", [16],
     "model.encoder.block.0.layer.1.layer_norm.weight", [16]),
    # T5.1.0 as released: layer_norm and final_layer_norm.
    ("encoder/block_000/layer_001/layer_norm/scale", [16],
     "model.encoder.block.0.layer.1.layer_norm.weight", [16]),
    ("decoder/final_layer_norm/scale", [16],
     "model.decoder.final_layer_norm.weight", [16]),
    ("decoder/rms_norm/scale", [16], "model.decoder.final_layer_norm.weight",
     [16]),
    ("decoder/logits/kernel", [16, 384], "lm_head.weight", [384, 16]),
    ("shared/embedding", [384, 16], "model.shared.weight", [384, 16]),
    ("encoder/embedding", [384, 16], "model.encoder.embed_tokens.weight",
     [384, 16]),
    ("global_step", [], None, None),
    ("encoder/block_000/layer_000/SelfAttention/q_slot_vc", [16], None,
     None),
])
def test_torch_names(mesh_name, shape, torch_name, torch_shape):
  value = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
  heads = 1 if shape == [8, 8] else 2  # the one-head R
  found = torch_names.torch_weight(mesh_name, value, heads, STACKS)
  if torch_name is None:
    assert found is None
    return
  name, array = found
  assert (name, list(array.shape)) == (torch_name, torch_shape)
  # Every value is kept, none made up.
  assert sorted(array.ravel()) == sorted(value.ravel())


def test_torch_names_refuse_what_has_no_weight():
  with pytest.raises(torch_names.UnknownVariable, match="Linformer"):
    torch_names.torch_weight(
        "encoder/block_000/layer_000/Linformer/E", np.zeros(3), 2, STACKS)


def _imported_packages(path: str) -> set:
  """The top-level packages a Python file imports."""
  with open(path) as f:
    tree = ast.parse(f.read())
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names |= {a.name.split(".")[0] for a in node.names}
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names.add(node.module.split(".")[0])
  return names


def test_only_the_model_code_and_its_tools_import_torch():
  """The product's other modules never import torch: the model's code
  (`hf_model/`) and the tools that build or train it (`hf_tools/`) do.

  (transformers, which writes the export's tokenizer, and t5.models, which
  MtfModel uses, import it themselves when it is installed.)
  """
  importers = set()
  for package in ("mtf_synthesizer", "t5_tasks"):
    for folder, _, files in os.walk(os.path.join(conftest.REPO, package)):
      for name in files:
        path = os.path.join(folder, name)
        if name.endswith(".py") and "torch" in _imported_packages(path):
          importers.add(os.path.relpath(path, conftest.REPO))
  assert importers == {
      "mtf_synthesizer/hf_model/attention_mtf_synthesizer.py",
      "mtf_synthesizer/hf_model/checks_mtf_synthesizer.py",
      "mtf_synthesizer/hf_model/functions_mtf_synthesizer.py",
      "mtf_synthesizer/hf_model/loss_mtf_synthesizer.py",
      "mtf_synthesizer/hf_model/modeling_mtf_synthesizer.py",
      "mtf_synthesizer/hf_tools/mesh_training.py",
      "mtf_synthesizer/hf_tools/t5_conversion.py"}
  # The names module is NumPy only (the exporter, without torch, uses it).
  assert "torch" not in _imported_packages(torch_names.__file__)


def test_layers_and_export_load_without_torch():
  code = ("import sys, mtf_synthesizer\n"
          "from mtf_synthesizer.export import hf_export\n"
          "print('torch' in sys.modules, 'transformers' in sys.modules)")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=600, cwd=conftest.REPO)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.strip().splitlines()[-1] == "False False"


def test_export_says_what_it_needs(tmp_path, capsys, monkeypatch):
  """A directory the CLI did not train: a clear error, exit status 2; and,
  without torch, what to install to load an export."""
  find_spec = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
      None if name == "torch" else find_spec(name, *a)))
  status = conftest.run_tool("export_hf.py", [str(tmp_path),
                                              str(tmp_path / "out")])
  assert status == 2
  error = capsys.readouterr().err
  assert "operative_config.gin not found" in error
  assert "pip install torch" in error
  assert "pip install --no-deps ." in error


def test_stock_cli_never_imports_torch():
  """The start-up hook keeps t5's Hugging Face model out of the stock CLI."""
  code = ("import sys\n"
          "sys.argv = ['t5_mesh_transformer']\n"
          "import t5.models\n"
          "print('torch' in sys.modules, 'transformers' in sys.modules)\n"
          "try:\n"
          "  t5.models.HfPyTorchModel('t5-small', '/tmp/unused')\n"
          "except ImportError as e:\n"
          "  print(e)\n")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=600, cwd=conftest.REPO)
  assert proc.returncode == 0, proc.stderr[-3000:]
  first, message = proc.stdout.strip().splitlines()[-2:]
  assert first == "False False"
  assert "pip install torch" in message
  assert "pip install --no-deps ." in message
