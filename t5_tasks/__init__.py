# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""seqio tasks and mixtures for the Synthesizer paper's experiments.

`--module_import=t5_tasks` registers them together with t5's own tasks and
mixtures (the stock CLI imports `t5.data.mixtures` only when no
`--module_import` is given).
"""

import t5.data.mixtures  # pylint: disable=unused-import
from t5_tasks import pydocs  # pylint: disable=unused-import
