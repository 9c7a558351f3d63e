# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What this package does with the PyTorch model beyond loading and running.

`mtf_synthesizer/hf_model/` is the model: the code an export writes beside
the weights, which transformers loads with `trust_remote_code`. The tools
around it import the model; the model imports none of them:

  t5_conversion   a Synthesizer around a transformers T5's weights
                  (`from_t5`; mtf-synthesizer-from-t5)
  mesh_training   mesh's Adafactor and learning-rate schedule
                  (`mesh_optimizer(model)`)
  saving          `save_pretrained(model, directory)` with the model's code,
                  its extensions and a model card
  extensions      synthesizing functions from outside the package:
                  `load_extension`, `write_extensions`
  model_card      the README.md of a saved or exported model
  weight_files    a truncated or corrupted safetensors file named before
                  it is loaded
  misspellings    the field a configuration keyword likely misspells

extensions, model_card and weight_files import the standard library only
(the export, which needs no torch, uses the first two); the others torch
and transformers. Import each module by its name: this file imports none.
"""
