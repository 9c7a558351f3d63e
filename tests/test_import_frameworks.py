# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Each part of the package imports only the framework it needs.

In fresh interpreters: the PyTorch model (`mtf_synthesizer.hf_model`) and
the tools around it (`mtf_synthesizer.hf_tools`) load neither TensorFlow
nor mesh-tensorflow; the checkpoint reader
(`mtf_synthesizer.checkpoints.tf_format`, for the JAX side) loads neither,
nor torch nor jax; the mesh layers register their gin
names once both the package and `mesh_tensorflow.transformer` are imported,
in either order (`mtf_synthesizer/__init__.py`, `_mtf_synthesizer_hooks.py`).
The stock CLI with `--module_import=mtf_synthesizer` is the first order;
every variant's run through it (test_variants_cli.py) depends on it.
"""

import json
import subprocess
import sys

import pytest

import conftest

FRAMEWORKS = ("tensorflow", "mesh_tensorflow")

TORCH_SIDE = """
import json, sys
import mtf_synthesizer.hf_model
from mtf_synthesizer.hf_model import MtfSynthesizerConfig
from mtf_synthesizer.hf_model import MtfSynthesizerForConditionalGeneration
from mtf_synthesizer.hf_tools import extensions, mesh_training, misspellings
from mtf_synthesizer.hf_tools import model_card, saving, t5_conversion
from mtf_synthesizer.hf_tools import weight_files
config = MtfSynthesizerConfig(
    vocab_size=16, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2,
    synthesizer_max_length=8, encoder_synthesizers=("dense", "dot_product"),
    decoder_synthesizers=("dense", "dot_product"))
MtfSynthesizerForConditionalGeneration(config)
print("RESULT " + json.dumps(sorted(
    m for m in %r if m in sys.modules)))
""" % (FRAMEWORKS,)

# The gin names of the mesh layers after the imports given by argv[1].
MESH_SIDE = """
import importlib, json, sys
import gin
for module in sys.argv[1].split(","):
  importlib.import_module(module)
import mtf_synthesizer
names = ("SynthesizerAttention", "Mixture", "LinformerAttention")
print("RESULT " + json.dumps({
    "gin": [gin.config._REGISTRY.get_match(n) is not None for n in names],
    "bound": [n in vars(mtf_synthesizer) for n in names]}))
"""


def _result(code: str, *argv: str):
  proc = subprocess.run([sys.executable, "-c", code] + list(argv),
                        cwd=conftest.REPO, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  (line,) = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
  return json.loads(line[len("RESULT "):])


def test_pytorch_model_imports_no_tensorflow_nor_mesh():
  assert _result(TORCH_SIDE) == []


@pytest.mark.parametrize("order", [
    "mtf_synthesizer,mesh_tensorflow.transformer",
    "mesh_tensorflow.transformer,mtf_synthesizer",
    "mtf_synthesizer,t5.models",  # docs/serving.md's order
])
def test_mesh_layers_register_with_mesh_in_either_order(order):
  assert _result(MESH_SIDE, order) == {"gin": [True] * 3,
                                       "bound": [True] * 3}


def test_checkpoint_reader_imports_no_framework():
  frameworks = FRAMEWORKS + ("torch", "jax")
  code = ("import json, sys\n"
          "import mtf_synthesizer.checkpoints.tf_format\n"
          "from mtf_synthesizer.checkpoints import tf_format\n"
          "tf_format.CheckpointReader, tf_format.load_checkpoint\n"
          "print('RESULT ' + json.dumps(sorted(m for m in %r "
          "if m in sys.modules)))" % (frameworks,))
  assert _result(code) == []


def test_package_alone_imports_no_tensorflow():
  code = ("import json, sys, mtf_synthesizer\n"
          "print('RESULT ' + json.dumps(sorted(m for m in %r "
          "if m in sys.modules)))" % (FRAMEWORKS,))
  assert _result(code) == []
