# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A synthesizing function added from outside the package, end to end.

The function: R's table times a learned temperature per head that starts at
1 (S_h = tau_h R_h). Its mesh class is defined here, its PyTorch class in
tests/data/extension/tempered_random_mtf_synthesizer.py, loaded with
`mtf_synthesizer.hf_tools.extensions.load_extension`; no file of the
package names it. Through the machinery a
function of the package goes through, as docs/architecture.md's "How to
add a synthesizing function" lists it:

- a gin binding builds mesh's model with it, and a training step runs;
- the export of that checkpoint trains in PyTorch with mesh's losses (the
  logits equal mesh's at every step);
- `from_config` draws each of its weights as mesh draws it (the
  temperature exactly 1);
- the fused path equals eager with every weight randomized, alone and in
  a mixture with the dot product;
- a saved model carries its module and loads with trust_remote_code where
  neither this package nor TensorFlow can be imported.

The extension is registered for this module's tests only (a fixture), so
the other modules' enumerations of the functions never see it.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import conftest
import model_code
import test_torch_follows_mesh as follows
import tiny_models
from mtf_synthesizer import synthesizers
from mtf_synthesizer import synthesizing_functions as declarations
from mtf_synthesizer.export import hf_export
from mtf_synthesizer.hf_tools import extensions
from mtf_synthesizer.hf_tools import saving

# Trains a mesh model and exports it: `make test-fast` skips it.
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NAME = "tempered_random"
EXTENSION = os.path.join(conftest.REPO, "tests", "data", "extension",
                         "tempered_random_mtf_synthesizer.py")
MODULE = os.path.splitext(os.path.basename(EXTENSION))[0]
# mesh's class, imported by --module_import as in training.
MESH_EXTENSION = os.path.join(os.path.dirname(EXTENSION),
                              "tempered_random_mesh.py")
MESH_MODULE = os.path.splitext(os.path.basename(MESH_EXTENSION))[0]
GIN_FILES = ["synthesizer/_all_stacks.gin"]
BINDINGS = ["SynthesizerAttention.synthesizers = [@extension.TemperedRandom()]"]


def _define_mesh_function():
  """mesh's side: tau R, registered in BY_NAME and with gin when imported."""
  spec = importlib.util.spec_from_file_location(MESH_MODULE, MESH_EXTENSION)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.TemperedRandom


def _forget(configuration, functions):
  """Removes the extension from one copy of the model code's registries."""
  configuration.FUNCTION_SETTINGS.pop(NAME, None)
  configuration.DECLARED.pop(NAME, None)
  functions.FUNCTIONS.pop(NAME, None)


@pytest.fixture(scope="module")
def extension():
  """The function on both sides, in the package and in the export's copy.

  Yields:
    The export's copy of the model code's configuration module.
  """
  _define_mesh_function()
  installed = extensions.load_extension(EXTENSION)
  copy = model_code.load("configuration")
  copied = extensions.load_extension(EXTENSION, copy.__package__)
  try:
    yield copy
  finally:
    synthesizers.BY_NAME.pop(NAME, None)
    declarations.FUNCTIONS.pop(NAME, None)
    extensions.EXTENSION_FILES.pop(NAME, None)
    for module in (installed, copied):
      package = module.__name__.rpartition(".")[0]
      sys.modules.pop(module.__name__, None)
      _forget(sys.modules[package + ".configuration_mtf_synthesizer"],
              sys.modules[package + ".functions_mtf_synthesizer"])


@pytest.fixture(scope="module")
def run(extension, tmp_path_factory):
  """mesh trains it, the export of its start trains in PyTorch."""
  del extension
  root = tmp_path_factory.mktemp("extension")
  model_dir, mesh_losses, draws = follows.mesh_training(
      root, NAME, GIN_FILES, BINDINGS)
  export_dir = root / "exported"
  hf_export.export(str(model_dir), str(export_dir), vocabulary="byte")
  model, torch_losses = follows.torch_training(str(export_dir))
  return {"mesh": mesh_losses, "torch": torch_losses, "model": model,
          "config": model.config, "start": str(export_dir),
          "mesh_draws": draws, "root": root}


def test_mesh_builds_it_from_gin_and_pytorch_follows(run):
  mesh_losses, torch_losses = np.array(run["mesh"]), np.array(run["torch"])
  assert mesh_losses[-1] < mesh_losses[0]
  np.testing.assert_allclose(torch_losses, mesh_losses,
                             rtol=follows.LOSS_TOLERANCE)
  layer = run["model"].model.encoder.block[0].layer[0].SelfAttention
  assert layer.function_names == (NAME,)
  # Its own weight trained on both sides (mesh's losses equal PyTorch's).
  assert not torch.allclose(layer.tempered_random.temperature,
                            torch.ones(2))


def test_export_carries_its_module(run):
  exported = run["start"]
  with open(os.path.join(exported, "config.json")) as f:
    config = json.load(f)
  assert config["encoder_synthesizers"] == [NAME]
  with open(os.path.join(exported, MODULE + ".py")) as f, open(
      EXTENSION) as g:
    assert f.read() == g.read()
  with open(os.path.join(exported, "extensions_mtf_synthesizer.py")) as f:
    assert "from .%s import" % MODULE in f.read()


def test_the_export_command_loads_it(run, tmp_path):
  """mtf-synthesizer-export-hf in a fresh process: --module_import for
  mesh's class, --extension for PyTorch's module; the same export as
  Python's."""
  out = tmp_path / "out"
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [os.path.dirname(MESH_EXTENSION), env.get("PYTHONPATH", "")])
  proc = subprocess.run(
      [sys.executable, "-m", "mtf_synthesizer.commands.export_hf",
       str(run["root"] / NAME), str(out), "--vocabulary=byte",
       "--module_import=" + MESH_MODULE, "--extension=" + EXTENSION],
      capture_output=True, text=True, timeout=600, cwd=conftest.REPO,
      env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  for name in ("config.json", MODULE + ".py", "extensions_mtf_synthesizer.py",
               "model.safetensors"):
    with open(os.path.join(run["start"], name), "rb") as f, open(
        out / name, "rb") as g:
      assert f.read() == g.read(), name


def test_the_export_command_needs_the_extension(run, tmp_path):
  """Without --extension the command names the function it lacks."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [os.path.dirname(MESH_EXTENSION), env.get("PYTHONPATH", "")])
  proc = subprocess.run(
      [sys.executable, "-m", "mtf_synthesizer.commands.export_hf",
       str(run["root"] / NAME), str(tmp_path / "out"), "--vocabulary=byte",
       "--module_import=" + MESH_MODULE],
      capture_output=True, text=True, timeout=600, cwd=conftest.REPO,
      env=env)
  assert proc.returncode != 0
  assert NAME in proc.stderr, proc.stderr[-3000:]


def test_the_flop_count_reads_it(extension):
  """The benchmark's FLOP count takes it with no edit: R's count (the
  temperature multiplies the table: no product of its own)."""
  del extension
  # pylint: disable=g-import-not-at-top
  from workbench.pytorch import benchmark
  from workbench.pytorch import flops
  # pylint: enable=g-import-not-at-top
  configuration = benchmark.load_model_code("configuration")
  module = extensions.load_extension(EXTENSION, configuration.__package__)
  try:
    dims = benchmark.Dims(
        d_model=32, num_heads=2, d_kv=8, d_ff=64, num_layers=1,
        num_decoder_layers=1, vocab_size=64, batch=2, input_length=16,
        target_length=8, new_tokens=4)
    counts = [flops.training_flops(
        dims, (name,), configuration.MtfSynthesizerConfig(
            d_model=32, d_kv=8, num_heads=2, synthesizer_max_length=16,
            encoder_synthesizers=(name,), decoder_synthesizers=(name,)))
              for name in (NAME, "random")]
    assert counts[0] == counts[1]
  finally:
    package = module.__name__.rpartition(".")[0]
    sys.modules.pop(module.__name__, None)
    _forget(configuration,
            sys.modules[package + ".functions_mtf_synthesizer"])


def test_from_config_draws_its_weights_as_mesh(run):
  failures, exported = follows.init_draw_failures(run)
  assert not failures, "\n".join(failures)
  keys = [k for k in exported if ".%s." % NAME in k]
  assert sorted({k.rsplit(".", 1)[1] for k in keys}) == ["R", "temperature"]


@pytest.mark.parametrize("components", [(NAME,), (NAME, "dot_product")],
                         ids="+".join)
def test_fused_equals_eager_every_weight_randomized(extension, components):
  del extension
  model = tiny_models.perturb(tiny_models.seq2seq(components))
  model.eval()
  layer = model.model.encoder.block[0].layer[0].SelfAttention
  assert not torch.allclose(layer.tempered_random.temperature,
                            torch.ones(2))
  input_ids, mask, labels = tiny_models.padded_inputs()
  logits = {}
  for implementation in ("eager", "sdpa"):
    model.set_attn_implementation(implementation)
    with torch.no_grad():
      logits[implementation] = model(input_ids=input_ids,
                                     attention_mask=mask,
                                     labels=labels).logits
  difference = (logits["sdpa"] - logits["eager"]).abs().max()
  assert float(difference / logits["eager"].abs().max()) < 1e-5


SIDE = """
import json, sys
import numpy as np
import torch
import transformers
folder, ids_file, out_file = sys.argv[1:]
for forbidden in ("mtf_synthesizer", "tensorflow", "mesh_tensorflow"):
  try:
    __import__(forbidden)
  except ImportError:
    continue
  raise SystemExit(forbidden + " is importable")
model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
    folder, trust_remote_code=True)
ids = torch.tensor(json.load(open(ids_file)))
with torch.no_grad():
  logits = model(input_ids=ids, decoder_input_ids=ids[:, :3]).logits
np.save(out_file, logits.numpy())
"""


def test_saved_model_loads_without_the_package(run, tmp_path):
  model = run["model"]
  model.eval()
  saved = tmp_path / "saved"
  saving.save_pretrained(model, saved)
  assert (saved / (MODULE + ".py")).exists()
  ids = [[5, 9, 3, 7, 1], [4, 4, 8, 2, 1]]
  (tmp_path / "ids.json").write_text(json.dumps(ids))
  with torch.no_grad():
    expected = model(input_ids=torch.tensor(ids),
                     decoder_input_ids=torch.tensor(ids)[:, :3]).logits
  script = tmp_path / "side.py"
  script.write_text(SIDE)
  env = dict(os.environ, HF_MODULES_CACHE=str(tmp_path / "modules"),
             OMP_NUM_THREADS="1")
  proc = subprocess.run(
      conftest.pytorch_python(tmp_path) + [
          str(script), str(saved), str(tmp_path / "ids.json"),
          str(tmp_path / "logits.npy")],
      env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
  np.testing.assert_allclose(np.load(tmp_path / "logits.npy"),
                             expected.numpy(), rtol=1e-5, atol=1e-5)


def test_a_name_of_the_package_is_refused(extension):
  with pytest.raises(ValueError, match="declared already"):
    extension.register_function(extension.DECLARED["random"])
