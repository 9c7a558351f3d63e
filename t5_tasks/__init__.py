# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""seqio tasks and mixtures for the Synthesizer paper's experiments.

`--module_import=t5_tasks` registers them together with t5's own tasks and
mixtures (the stock CLI imports `t5.data.mixtures` only when no
`--module_import` is given). Every task takes its vocabulary from
`t5_tasks.vocabulary` (chosen lazily, see there); the list of tasks and
mixtures is in docs/tasks.md.
"""

import t5.data.mixtures  # pylint: disable=unused-import

from t5_tasks import c4  # pylint: disable=unused-import
from t5_tasks import classification  # pylint: disable=unused-import
from t5_tasks import dialogue  # pylint: disable=unused-import
from t5_tasks import glue  # pylint: disable=unused-import
from t5_tasks import listops  # pylint: disable=unused-import
from t5_tasks import lm  # pylint: disable=unused-import
from t5_tasks import mixtures  # pylint: disable=unused-import
from t5_tasks import pydocs  # pylint: disable=unused-import
from t5_tasks import recall  # pylint: disable=unused-import
from t5_tasks import summarization  # pylint: disable=unused-import
from t5_tasks import translation  # pylint: disable=unused-import
from t5_tasks import vocabulary  # pylint: disable=unused-import
