# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""C4 span-corruption pretraining (paper Table 4).

`synth_c4_span_corruption`: T5's final objective (15% of tokens in spans of
mean length 3 replaced by sentinels), with the preprocessors of t5's
`c4_v220_span_corruption` but read from TFDS `c4/en:3.1.0`
(`C4_TFDS_NAME`, the installed builder's version) where that task reads
`c4/en:2.2.0`. No metric: the paper reports the validation loss
(log-perplexity) of this objective.
"""

import seqio

from t5_tasks import registry

C4_TFDS_NAME = "c4/en:3.1.0"

registry.derive_from_t5(
    "synth_c4_span_corruption", "c4_v220_span_corruption",
    source=seqio.TfdsDataSource(tfds_name=C4_TFDS_NAME))
