# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Synthesizer attention layers for Mesh TensorFlow.

`--module_import=mtf_synthesizer` registers the gin configurables and adds the
package's gin folder to gin's search path, so `--gin_file=synthesizer/...`
resolves. Nothing else happens at import: the stock CLI's early flag checks
and `MTF_SYNTH_CPU_DEVICES` are applied by the start-up hook
(`_mtf_synthesizer_hooks.py`), only in the stock CLI (`stock_cli/`).

  attentions.py   THE table: the paper's variants, the baselines, mesh's own
  synthesizing_functions.py
                  each synthesizing function declared once (settings and
                  their defaults, properties, variables; standard library
                  only), read by mesh, PyTorch, JAX and the reference
  core/           the paper's core: the synthesizing functions (Equations
                  1-8), SynthesizerAttention, the NumPy reference
  ops/            the mtf operations with their gradients, each once
  baselines/      the attentions the paper compares against
  checkpoints/    variable names; starting from T5; the original release;
                  TensorFlow's checkpoint files read without TensorFlow
  training/       the lean Adafactor, deterministic steps, summaries
  mtf_model.py    T5's Python API (MtfModel) with a variant
  stock_cli/      what the stock t5_mesh_transformer runs at start-up
  jobs/           stock-CLI commands as data, the runner, Cloud TPU jobs
  commands/       the installed commands (export, TPU jobs, conversion)
  export/         a trained model out to PyTorch / transformers
  hf_model/       the PyTorch model (torch and transformers only): the
                  code an export writes beside the weights
  flax_model/     the Flax (JAX) model: T5X's names, gin/flax/ files
                  (JAX, Flax and gin only; docs/jax.md)
  hf_tools/       conversion from T5, mesh's optimizer, saving with the
                  model's code and a card (they import the model, not it
                  them)
  gin/            the gin files (installed from the checkout's gin/)

Which part needs which framework: `attentions`, `synthesizing_functions`
(the standard library only), `stock_cli/gin_path`,
`hf_model/` and `hf_tools/` (torch and transformers), `checkpoints/tf_format`
(NumPy, ml_dtypes, protobuf) and the commands' argument parsing import no
TensorFlow, so `import mtf_synthesizer.hf_model` loads neither TensorFlow
nor mesh-tensorflow. The mesh layers (and their gin names) are
imported as soon as both this package and `mesh_tensorflow.transformer` are,
in either order: at once when mesh is already imported (the stock CLI has
imported it before `--module_import` is read), or by the start-up hook when
mesh is imported later (`import mtf_synthesizer, t5.models`). `import_layers()`,
or an attribute such as `mtf_synthesizer.SynthesizerAttention`, imports
them at any time.

`mtf_synthesizer.MtfModel` is imported on first use, so that importing the
layers does not import `t5.models`.
"""

import importlib
import sys

import _mtf_synthesizer_hooks
import gin

from mtf_synthesizer import attentions  # the table (no TensorFlow)
from mtf_synthesizer.stock_cli import gin_path

GIN_DIR = gin_path.GIN_DIR
gin.add_config_file_search_path(GIN_DIR)

# What `import_layers` binds here, in this order: each mesh layer or module
# of theirs by name, and the module that is it (or holds it).
_LAYERS = {
    "checkpoints": "mtf_synthesizer.checkpoints",
    # init_from_t5.gin's names (`mtf_synthesizer.vanilla_to_synthesizer`).
    "vanilla_to_synthesizer": "mtf_synthesizer.checkpoints.from_t5",
    "restore_with_casts": "mtf_synthesizer.checkpoints.from_t5",
    "encoder_classifier": "mtf_synthesizer.baselines.encoder_classifier",
    "linformer": "mtf_synthesizer.baselines.linformer",
    "local_attention": "mtf_synthesizer.baselines.local_attention",
    "local_conv": "mtf_synthesizer.baselines.local_conv",
    "LinformerAttention": "mtf_synthesizer.baselines.linformer",
    "WindowedSelfAttention": "mtf_synthesizer.baselines.local_attention",
    "DecodableLocalConvAttnBlock": "mtf_synthesizer.baselines.local_conv",
    "release": "mtf_synthesizer.checkpoints.release",
    "layer": "mtf_synthesizer.core.layer",
    "synthesizers": "mtf_synthesizer.core.synthesizers",
    "SynthesizerAttention": "mtf_synthesizer.core.layer",
    "Dense": "mtf_synthesizer.core.synthesizers",
    "DotProduct": "mtf_synthesizer.core.synthesizers",
    "FactorizedDense": "mtf_synthesizer.core.synthesizers",
    "FactorizedRandom": "mtf_synthesizer.core.synthesizers",
    "FixedRandom": "mtf_synthesizer.core.synthesizers",
    "Mixture": "mtf_synthesizer.core.mixture",
    "Random": "mtf_synthesizer.core.synthesizers",
    "determinism": "mtf_synthesizer.training.determinism",
    "optimize": "mtf_synthesizer.training.optimize",
    "LeanAdafactorOptimizer": "mtf_synthesizer.training.optimize",
}


_importing_layers = False
# The module whose import brings the layers.
LAYERS_WITH_MODULE = _mtf_synthesizer_hooks.LAYERS_WITH_MODULE


def import_layers() -> None:
  """Imports the mesh layers (and TensorFlow), registering their gin names.

  Done by itself once mesh-tensorflow is imported (the module docstring);
  a program that parses the package's gin files before it imports mesh
  calls it. A second call costs nothing.
  """
  global _importing_layers
  if _importing_layers:
    return
  _importing_layers = True
  try:
    _import_layers()
  finally:
    _importing_layers = False


def _import_layers() -> None:
  """import_layers()'s imports, each bound here by its name in _LAYERS."""
  # (By module path: `from mtf_synthesizer import x` would ask __getattr__.)
  for name, module_name in _LAYERS.items():
    module = importlib.import_module(module_name)
    globals()[name] = (module if module_name.endswith("." + name)
                       else getattr(module, name))

# The stock CLI, or any program that imported mesh first; otherwise the
# start-up hook calls import_layers() once `mesh_tensorflow.transformer` is.
if LAYERS_WITH_MODULE in sys.modules:
  import_layers()


def __getattr__(name):
  if name in _LAYERS and not _importing_layers:
    import_layers()  # mesh is not imported yet
    return globals()[name]
  if name == "MtfModel":
    from mtf_synthesizer.mtf_model import MtfModel  # pylint: disable=redefined-outer-name
    return MtfModel
  raise AttributeError("module 'mtf_synthesizer' has no attribute %r" % name)
