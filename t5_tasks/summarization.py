# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""CNN/DailyMail abstractive summarization (paper Table 3, ROUGE-L).

`synth_cnn_dailymail`: t5's `cnn_dailymail_v002` (TFDS `cnn_dailymail:3.4.0`,
inputs `"summarize: <article>"`, targets the highlights) with our vocabulary
and ROUGE-1/2/L/Lsum (`t5_tasks.metrics.rouge`).
"""

from t5_tasks import metrics
from t5_tasks import registry

registry.derive_from_t5("synth_cnn_dailymail", "cnn_dailymail_v002",
                        metric_fns=[metrics.rouge])
