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
    (`mtf-synthesizer-convert-release-checkpoint`).

`mtf_synthesizer.checkpoints.vanilla_to_synthesizer` and the other names
of `from_t5` are also read here, where gin files and users found them.
"""

# pylint: disable=g-importing-member
from mtf_synthesizer.checkpoints import from_t5
from mtf_synthesizer.checkpoints.from_t5 import ALLOW_FRESH
from mtf_synthesizer.checkpoints.from_t5 import candidate_names
from mtf_synthesizer.checkpoints.from_t5 import checkpoint_index
from mtf_synthesizer.checkpoints.from_t5 import checkpoint_name
from mtf_synthesizer.checkpoints.from_t5 import is_synthesizer_only
from mtf_synthesizer.checkpoints.from_t5 import LOG_PREFIX
from mtf_synthesizer.checkpoints.from_t5 import MAPPING
from mtf_synthesizer.checkpoints.from_t5 import plan
from mtf_synthesizer.checkpoints.from_t5 import Resolution
from mtf_synthesizer.checkpoints.from_t5 import resolve
from mtf_synthesizer.checkpoints.from_t5 import RESTORE
from mtf_synthesizer.checkpoints.from_t5 import restore_with_casts
from mtf_synthesizer.checkpoints.from_t5 import summary
from mtf_synthesizer.checkpoints.from_t5 import vanilla_to_synthesizer
from mtf_synthesizer.checkpoints.names import norm_aliases
