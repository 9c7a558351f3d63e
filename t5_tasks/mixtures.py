# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Mixtures that combine task families.

`synth_en_mix`: T5's `en_mix` recipe without SQuAD: C4 span corruption at
`t5.data.rate_unsupervised` (gin-configurable, default 1e6) plus GLUE and
SuperGLUE in proportion to their training-set sizes (the paper's "en-mix"
co-training, Tables 5-6). The supervised-only co-training mixture is
`synth_glue_super_glue_proportional` in `t5_tasks.glue`.
"""

import t5.data

from t5_tasks import c4  # pylint: disable=unused-import
from t5_tasks import glue
from t5_tasks import registry

registry.add_mixture(
    "synth_en_mix",
    [("synth_c4_span_corruption", t5.data.rate_unsupervised)] +
    list(glue.GLUE_WEIGHTS.items()) + list(glue.SUPER_GLUE_WEIGHTS.items()))
