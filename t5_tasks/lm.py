# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Language modelling on LM1B (paper Table 2, perplexity).

`synth_lm1b`: TFDS `lm1b:1.1.0` (splits train/test), one sentence per example
as `targets` only (a decoder-only `lm` model; no `inputs`), EOS appended.
Metric: per-token perplexity from the model's scores
(`t5_tasks.metrics.perplexity`); evaluate with scoring (`eval_with_score`).
"""

import functools

import seqio

from t5_tasks import metrics
from t5_tasks import registry
from t5_tasks import vocabulary

registry.add_task(
    "synth_lm1b",
    source=seqio.TfdsDataSource(tfds_name="lm1b:1.1.0"),
    preprocessors=[
        functools.partial(seqio.preprocessors.rekey,
                          key_map={"targets": "text"}),
        *registry.tokenize_and_eos(),
    ],
    output_features=vocabulary.output_features(inputs=False),
    metric_fns=[metrics.perplexity])
