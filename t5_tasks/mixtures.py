# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Mixtures that combine task families.

`synth_en_mix`: the paper's "en-mix" co-training (Tables 5-6), after T5's
`en_mix` but not the same mixture: C4 span corruption
(`synth_c4_span_corruption`, where `en_mix` has the prefix-LM objective
`c4_v020_unsupervised`) at `t5.data.rate_unsupervised` (gin-configurable,
default 1e6), plus GLUE and SuperGLUE at T5's fixed training-set sizes
(`t5.data.glue_utils`' weights, 0 for the evaluation-only sets, as in
`synth_glue_super_glue_proportional`), and no SQuAD. The supervised-only
mixture is `synth_glue_super_glue_proportional` in `t5_tasks.glue`.
"""

import t5.data

from t5_tasks import c4  # pylint: disable=unused-import
from t5_tasks import glue
from t5_tasks import registry

registry.add_mixture(
    "synth_en_mix",
    [("synth_c4_span_corruption", t5.data.rate_unsupervised)] +
    list(glue.GLUE_WEIGHTS.items()) + list(glue.SUPER_GLUE_WEIGHTS.items()))
