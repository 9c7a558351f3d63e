# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""WMT'14 translation (paper Table 2, BLEU).

t5's tasks with our vocabulary: `synth_wmt14_ende` (from `wmt14_ende_v003`,
TFDS `wmt14_translate/de-en:1.0.0`) and `synth_wmt14_enfr` (from
`wmt14_enfr_v003`, `wmt14_translate/fr-en:1.0.0`). Inputs
`"translate English to German: <en>"`, targets the translation; metric
sacreBLEU (t5's `bleu`, corpus BLEU-4, "intl" tokenizer).
"""

from t5_tasks import registry

registry.derive_from_t5("synth_wmt14_ende", "wmt14_ende_v003")
registry.derive_from_t5("synth_wmt14_enfr", "wmt14_enfr_v003")
