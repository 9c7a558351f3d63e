# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A trained mesh model out to PyTorch / transformers.

  hf_export.py     `export(model_dir, out_dir)`: the run's model built
                   from its operative config and described (or, with
                   plain_t5, as transformers' T5Config), the checkpoint's
                   weights as safetensors, the modeling code and the
                   tokenizer (the command: mtf-synthesizer-export-hf)
  mesh_layers.py   that description: mesh's layers read back as
                   MtfSynthesizerConfig's fields, through the
                   configuration's table of functions (`flat_config`)
  torch_names.py   each mesh variable's PyTorch name and layout, one rule
                   per kind (NumPy only; mesh's names parsed by
                   `checkpoints.names`)

The PyTorch model the export copies is `mtf_synthesizer/hf_model/`.
"""
