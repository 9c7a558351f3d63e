# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Synthesizer attention layers for Mesh TensorFlow.

`--module_import=mtf_synthesizer` registers the gin configurables and adds the
package's gin folder to gin's search path, so `--gin_file=synthesizer/...`
resolves.
"""

import os

import _mtf_synthesizer_hooks  # pylint: disable=unused-import
import gin

GIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gin")
gin.add_config_file_search_path(GIN_DIR)

# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer import checkpoints
from mtf_synthesizer import cli_checks
from mtf_synthesizer import cpu_devices
from mtf_synthesizer import encoder_classifier
from mtf_synthesizer import release
from mtf_synthesizer import synthesizers
from mtf_synthesizer.layer import SynthesizerAttention
from mtf_synthesizer.synthesizers import Dense
from mtf_synthesizer.synthesizers import DotProduct
from mtf_synthesizer.synthesizers import FactorizedDense
from mtf_synthesizer.synthesizers import FactorizedRandom
from mtf_synthesizer.synthesizers import FixedRandom
from mtf_synthesizer.synthesizers import Mixture
from mtf_synthesizer.synthesizers import Random

# Under the stock CLI (flags already parsed), say clearly what is wrong with
# --model_dir or a --gin_file=synthesizer/... before TensorFlow or gin would.
cli_checks.check_cli_flags()
# MTF_SYNTH_CPU_DEVICES=N: N logical CPU devices for the CLI's sessions.
cpu_devices.install_from_env()
