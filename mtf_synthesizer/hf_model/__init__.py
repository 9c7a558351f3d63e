# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch model that `mtf_synthesizer.export` writes beside weights.

The modules of this folder but this file are the model's code, which an
export copies beside the weights and transformers loads with
`trust_remote_code`; what the package does with the model beyond loading
and running it is in `mtf_synthesizer/hf_tools/`. Importing this package
registers the model with transformers' Auto classes (`AutoConfig`,
`AutoModel`, `AutoModelForSeq2SeqLM`, `AutoModelForCausalLM`), so that a
saved or exported model loads with `from_pretrained(path)` and no
`trust_remote_code`. Without torch (`pip install torch`; README.md, recipe
3) only the configuration is registered.
"""

import importlib.util

from transformers import AutoConfig

# Relative imports: the workbench loads this folder by its path.
# pylint: disable=relative-beyond-top-level
from .configuration_mtf_synthesizer import MtfSynthesizerConfig

AutoConfig.register(MtfSynthesizerConfig.model_type, MtfSynthesizerConfig,
                    exist_ok=True)

if importlib.util.find_spec("torch") is not None:
  # pylint: disable=g-import-not-at-top
  from transformers import AutoModel
  from transformers import AutoModelForCausalLM
  from transformers import AutoModelForSeq2SeqLM

  from .modeling_mtf_synthesizer import MtfSynthesizerForCausalLM
  from .modeling_mtf_synthesizer import MtfSynthesizerForConditionalGeneration
  from .modeling_mtf_synthesizer import MtfSynthesizerModel

  AutoModel.register(MtfSynthesizerConfig, MtfSynthesizerModel,
                     exist_ok=True)
  AutoModelForSeq2SeqLM.register(
      MtfSynthesizerConfig, MtfSynthesizerForConditionalGeneration,
      exist_ok=True)
  AutoModelForCausalLM.register(MtfSynthesizerConfig,
                                MtfSynthesizerForCausalLM, exist_ok=True)
