# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""`mtf_synthesizer/hf_model/` holds the model: what loading and running need.

An export writes the folder's modules but its `__init__.py` beside the
weights (`hf_export.MODEL_CODE_FILES`, `hf_export.write_model_code`).
Here:

  * that list is the folder, and loading reaches every file of it
    (transformers' own closure of the modeling and configuration files'
    relative imports): nothing there is dead weight for a loaded model;
  * the folder imports nothing of this package (the tools in
    `mtf_synthesizer/hf_tools/` import the model, never the reverse), and
    defines none of what moved to the tools (conversion, saving, mesh's
    optimizer, the misspelling hint, the Auto classes' registration);
  * a folder written as the export writes it loads with `from_pretrained(
    ..., trust_remote_code=True)` in a fresh interpreter where this
    package, TensorFlow and mesh cannot be imported, for both heads, and
    computes the logits and the greedy decodes of the model it was saved
    from; transformers copies exactly the export's files into its module
    cache.
"""

import ast
import json
import os
import subprocess
import sys

import pytest
import torch
from transformers import dynamic_module_utils

import conftest
import tiny_models
from mtf_synthesizer.export import hf_export

pytestmark = pytest.mark.usefixtures("one_thread")
MODEL_DIR = os.path.join(conftest.REPO, "mtf_synthesizer", "hf_model")
# What the package does with the model beyond loading and running it, by
# the names that define it (mtf_synthesizer/hf_tools/): none of them in the
# model's folder.
TOOLS_NAMES = ("from_t5", "copy_t5_weights", "save_pretrained",
               "from_pretrained", "mesh_optimizer", "MeshAdafactor",
               "mesh_learning_rate", "write_model_card", "check_weights",
               "load_extension", "write_extensions", "misspelled_field",
               "register_for_auto_class")
# Top-level packages the model's code may import: the standard library's,
# and what transformers' remote code runs with.
ALLOWED_IMPORTS = set(sys.stdlib_module_names) | {
    "torch", "transformers", "huggingface_hub"}


def _code_files():
  return sorted(n for n in os.listdir(MODEL_DIR)
                if n.endswith(".py") and n != "__init__.py")


def test_the_export_copies_the_folder_but_its_init():
  assert list(hf_export.MODEL_CODE_FILES) == _code_files()


def test_loading_reaches_every_file_of_the_folder():
  """transformers copies a remote class's file and, recursively, the files
  it imports relatively: from the configuration's and the modeling file
  (config.json's `auto_map`) that is every file the export writes."""
  reached = set()
  for entry in ("configuration_mtf_synthesizer.py",
                "modeling_mtf_synthesizer.py"):
    path = os.path.join(MODEL_DIR, entry)
    reached.add(entry)
    reached.update(os.path.basename(p) for p in
                   dynamic_module_utils.get_relative_import_files(path))
  assert sorted(reached) == _code_files()


def _imports(path):
  """(absolute top-level packages, relative modules) a file imports."""
  with open(path) as f:
    tree = ast.parse(f.read())
  absolute, relative = set(), set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      absolute.update(alias.name.split(".")[0] for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        relative.add(node.module)
      else:
        absolute.add(node.module.split(".")[0])
  return absolute, relative


@pytest.mark.parametrize("name", _code_files())
def test_the_model_imports_nothing_of_the_package(name):
  absolute, relative = _imports(os.path.join(MODEL_DIR, name))
  assert absolute <= ALLOWED_IMPORTS, absolute - ALLOWED_IMPORTS
  assert {m + ".py" for m in relative} <= set(_code_files()), relative


@pytest.mark.parametrize("name", _code_files())
def test_the_tools_are_not_in_the_folder(name):
  with open(os.path.join(MODEL_DIR, name)) as f:
    tree = ast.parse(f.read())
  defined = {node.name for node in ast.walk(tree)
             if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
  called = {node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and
            isinstance(node.func, ast.Attribute)}
  assert not (defined | called) & set(TOOLS_NAMES), (
      (defined | called) & set(TOOLS_NAMES))


def test_the_scans_can_fail(tmp_path):
  """A file that imports the package and defines a tool is caught."""
  path = tmp_path / "bad_mtf_synthesizer.py"
  path.write_text("import os\nfrom mtf_synthesizer.hf_tools import saving\n"
                  "def from_t5():\n  pass\n")
  absolute, _ = _imports(str(path))
  assert not absolute <= ALLOWED_IMPORTS
  assert "from_t5" in {node.name for node in ast.walk(ast.parse(
      path.read_text())) if isinstance(node, ast.FunctionDef)}


SIDE = """
import json, os, sys
for forbidden in ("mtf_synthesizer", "tensorflow", "mesh_tensorflow", "gin"):
  try:
    __import__(forbidden)
  except ImportError:
    continue
  raise SystemExit(forbidden + " is importable")
import torch
import transformers
folder, head, inputs_file, out_file = sys.argv[1:]
auto = (transformers.AutoModelForCausalLM if head == "causal_lm"
        else transformers.AutoModelForSeq2SeqLM)
model = auto.from_pretrained(folder, trust_remote_code=True).eval()
inputs = {k: torch.tensor(v) for k, v in json.load(open(inputs_file)).items()}
with torch.no_grad():
  logits = model(**inputs).logits
  prompt = {k: v for k, v in inputs.items() if not k.startswith("decoder_")}
  generated = model.generate(**prompt, max_new_tokens=4, do_sample=False)
cache = os.path.dirname(sys.modules[type(model).__module__].__file__)
json.dump({"module": type(model).__module__,
           "files": sorted(n for n in os.listdir(cache)
                           if n.endswith(".py") and n != "__init__.py"),
           "imported": sorted(m for m in sys.modules if m.startswith(
               ("mtf_synthesizer", "tensorflow", "mesh_tensorflow"))),
           "logits": logits.tolist(), "generated": generated.tolist()},
          open(out_file, "w"))
"""


def _exported_folder(model, folder):
  """The folder the export writes for a model: weights, config.json with
  `auto_map`, the model's code (`hf_export.write_model_code`)."""
  model.save_pretrained(folder)
  for name in os.listdir(folder):  # only the export's code
    if name.endswith(".py"):
      os.remove(folder / name)
  config = json.loads((folder / "config.json").read_text())
  config["auto_map"] = hf_export.auto_map(model.config.is_encoder_decoder)
  (folder / "config.json").write_text(json.dumps(config))
  config = model.config
  return hf_export.write_model_code(
      str(folder), list(config.encoder_synthesizers) +
      list(config.decoder_synthesizers))


@pytest.mark.parametrize("head", ["seq2seq", "causal_lm"])
def test_an_export_loads_and_runs_without_the_package(head, tmp_path):
  components = ("dense", "dot_product")
  if head == "causal_lm":
    model = tiny_models.causal_lm(components)
    ids = torch.tensor([[0, 5, 9, 3, 7], [0, 4, 4, 8, 2]])
    inputs = {"input_ids": ids}
  else:
    model = tiny_models.seq2seq(components)
    ids = torch.tensor([[5, 9, 3, 7, 1], [4, 4, 8, 1, 0]])
    inputs = {"input_ids": ids, "attention_mask": (ids != 0).long(),
              "decoder_input_ids": torch.tensor([[0, 6, 2], [0, 3, 3]])}
  model = tiny_models.perturb(model).eval()
  folder = tmp_path / ("exported_" + head)
  written = _exported_folder(model, folder)
  assert sorted(written) == _code_files()
  (tmp_path / "inputs.json").write_text(json.dumps(
      {k: v.tolist() for k, v in inputs.items()}))
  (tmp_path / "side.py").write_text(SIDE)
  env = dict(os.environ, HF_MODULES_CACHE=str(tmp_path / "modules"),
             OMP_NUM_THREADS="1")
  proc = subprocess.run(
      conftest.pytorch_python(tmp_path) + [
          str(tmp_path / "side.py"), str(folder), head,
          str(tmp_path / "inputs.json"), str(tmp_path / "out.json")],
      env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
  side = json.loads((tmp_path / "out.json").read_text())
  assert side["module"].startswith("transformers_modules"), side["module"]
  assert side["imported"] == []
  assert side["files"] == _code_files()
  with torch.no_grad():
    logits = model(**inputs).logits
    prompt = {k: v for k, v in inputs.items() if not k.startswith("decoder_")}
    generated = model.generate(**prompt, max_new_tokens=4, do_sample=False)
  torch.testing.assert_close(torch.tensor(side["logits"]), logits,
                             rtol=1e-5, atol=1e-5 * float(logits.abs().max()))
  assert side["generated"] == generated.tolist()
