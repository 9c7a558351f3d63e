# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Synthesizer attention layers for Mesh TensorFlow.

`--module_import=mtf_synthesizer` registers the gin configurables and adds the
package's gin folder to gin's search path, so `--gin_file=synthesizer/...`
resolves. Nothing else happens at import: the stock CLI's early flag checks
and `MTF_SYNTH_CPU_DEVICES` are applied by the start-up hook
(`_mtf_synthesizer_hooks.py`), only in the stock CLI (see `cli_entry.py`).

`mtf_synthesizer.MtfModel` is T5's Python API with a variant
(`mtf_model.py`); it is imported on first use, so that importing the layers
does not import `t5.models`.
"""

import _mtf_synthesizer_hooks  # pylint: disable=unused-import
import gin

from mtf_synthesizer import gin_path

GIN_DIR = gin_path.GIN_DIR
gin.add_config_file_search_path(GIN_DIR)

# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer import attentions
from mtf_synthesizer import checkpoints
from mtf_synthesizer import determinism
from mtf_synthesizer import encoder_classifier
from mtf_synthesizer import linformer
from mtf_synthesizer import local_attention
from mtf_synthesizer import local_conv
from mtf_synthesizer import optimize
from mtf_synthesizer import release
from mtf_synthesizer import synthesizers
from mtf_synthesizer.layer import SynthesizerAttention
from mtf_synthesizer.linformer import LinformerAttention
from mtf_synthesizer.local_attention import WindowedSelfAttention
from mtf_synthesizer.local_conv import DecodableLocalConvAttnBlock
from mtf_synthesizer.optimize import LeanAdafactorOptimizer
from mtf_synthesizer.synthesizers import Dense
from mtf_synthesizer.synthesizers import DotProduct
from mtf_synthesizer.synthesizers import FactorizedDense
from mtf_synthesizer.synthesizers import FactorizedRandom
from mtf_synthesizer.synthesizers import FixedRandom
from mtf_synthesizer.synthesizers import Mixture
from mtf_synthesizer.synthesizers import Random


def __getattr__(name):
  if name == "MtfModel":
    from mtf_synthesizer.mtf_model import MtfModel  # pylint: disable=redefined-outer-name
    return MtfModel
  raise AttributeError("module 'mtf_synthesizer' has no attribute %r" % name)
