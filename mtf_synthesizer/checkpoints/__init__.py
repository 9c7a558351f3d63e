# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Checkpoints in and out: names, starting from T5, the original release.

  * `names`: mesh's checkpoint variable names, their grammar in one place
    (layers, norms and T5.1.0's legacy norm names, slots);
  * `from_t5`: starting a Synthesizer from a T5 (or Synthesizer)
    checkpoint: the name mapping `vanilla_to_synthesizer` and the restore
    step `restore_with_casts`, both bound by `synthesizer/init_from_t5.gin`;
  * `release`: the original release's `synthesize_mode` strings and its
    variables under this package's names;
  * `release_checkpoint`: converting a release checkpoint's files
    (`mtf-synthesizer-convert-release-checkpoint`);
  * `tf_format`: TensorFlow's checkpoint files read without TensorFlow
    (NumPy, ml_dtypes and protobuf only), for the JAX side.

`mtf_synthesizer.checkpoints.vanilla_to_synthesizer` and the other names
of `from_t5` are also read here, where gin files and users found them;
they are imported on first use, so that importing this package (for
`tf_format`) imports no TensorFlow.
"""

import importlib

# The names of `from_t5` read here, imported on first use: `from_t5` imports
# TensorFlow, and `tf_format` must be importable without it.
_FROM_T5 = ("ALLOW_FRESH", "candidate_names", "checkpoint_index",
            "checkpoint_name", "is_synthesizer_only", "LOG_PREFIX", "MAPPING",
            "plan", "Resolution", "resolve", "RESTORE", "restore_with_casts",
            "summary", "vanilla_to_synthesizer")


# Submodules that this package's attributes reach (`checkpoints.from_t5`).
_SUBMODULES = ("from_t5", "names", "release")


def __getattr__(name):
  if name in _SUBMODULES:
    return importlib.import_module(__name__ + "." + name)
  if name in _FROM_T5:
    return getattr(importlib.import_module(__name__ + ".from_t5"), name)
  if name == "norm_aliases":
    return importlib.import_module(__name__ + ".names").norm_aliases
  raise AttributeError("module %r has no attribute %r" % (__name__, name))
