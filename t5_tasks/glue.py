# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""GLUE and SuperGLUE (paper Tables 5 and 6) with the `t5_tasks` vocabulary.

Each task is t5's own definition (`t5.data.tasks`: TFDS source and version,
text-to-text preprocessor, postprocessor and metrics) with only the
vocabulary replaced:

* `synth_glue_<config>` from `glue_<config>_v002` for every config of
  TFDS's GLUE builder (cola, sst2, mrpc, qqp, stsb, mnli, mnli_mismatched,
  mnli_matched, qnli, rte, wnli, ax), TFDS `glue/<config>:1.0.0`;
* `synth_super_glue_<config>` from `super_glue_<config>_v102` for every
  config of TFDS's SuperGLUE builder but WSC's (boolq, cb, copa, multirc,
  record, rte, wic, axb, axg), TFDS `super_glue/...:1.0.2`, as t5 reads
  both lists from the builders;
* `synth_super_glue_wsc_simple_train`, `synth_super_glue_wsc_simple_eval` and
  `synth_dpr_simple`: t5's simplified WSC and DPR, which replace SuperGLUE's
  WSC in T5's training mixtures.

Metrics (t5's): CoLA MCC; SST-2, MNLI, QNLI, RTE, WNLI accuracy; MRPC and QQP
F1 and accuracy; STS-B Pearson and Spearman; BoolQ, COPA, RTE, WiC, WSC
accuracy; CB mean F1 over 3 classes and accuracy; MultiRC F1 over answers and
exact match; ReCoRD F1 and exact match. Diagnostic sets (ax, axb, axg) have
only a test split and no metric.
"""

from typing import Dict

import t5.data.glue_utils
import tensorflow_datasets as tfds

from t5_tasks import registry

GLUE_CONFIGS = tuple(b.name for b in tfds.text.glue.Glue.builder_configs
                     .values())
# t5 defines no task of SuperGLUE's WSC: its simplified WSC replaces it.
SUPER_GLUE_CONFIGS = tuple(
    b.name for b in tfds.text.super_glue.SuperGlue.builder_configs.values()
    if "wsc" not in b.name)

# synth name -> t5 name
T5_NAMES: Dict[str, str] = {}
for _config in GLUE_CONFIGS:
  T5_NAMES[f"synth_glue_{_config}"] = f"glue_{_config}_v002"
for _config in SUPER_GLUE_CONFIGS:
  T5_NAMES[f"synth_super_glue_{_config}"] = f"super_glue_{_config}_v102"
T5_NAMES["synth_super_glue_wsc_simple_train"] = (
    "super_glue_wsc_v102_simple_train")
T5_NAMES["synth_super_glue_wsc_simple_eval"] = (
    "super_glue_wsc_v102_simple_eval")
T5_NAMES["synth_dpr_simple"] = "dpr_v001_simple"

for _name, _t5_name in T5_NAMES.items():
  registry.derive_from_t5(_name, _t5_name)


def _weights(t5_weights: Dict[str, float]) -> Dict[str, float]:
  """Maps t5's {t5 task: number of training examples} to our task names."""
  ours = {t5_name: name for name, t5_name in T5_NAMES.items()}
  return {ours[t5_name]: rate for t5_name, rate in t5_weights.items()}


# Mixing rates: T5's fixed training-set sizes (0 for evaluation-only sets),
# as T5's glue_v002_proportional / super_glue_v102_proportional / en_mix.
GLUE_WEIGHTS = _weights(t5.data.glue_utils.get_glue_weight_mapping())
SUPER_GLUE_WEIGHTS = _weights(
    t5.data.glue_utils.get_super_glue_weight_mapping())

registry.add_mixture("synth_glue_proportional", list(GLUE_WEIGHTS.items()))
registry.add_mixture("synth_super_glue_proportional",
                     list(SUPER_GLUE_WEIGHTS.items()))
# Tables 5-6: GLUE and SuperGLUE co-trained, each task in proportion to its
# number of training examples.
registry.add_mixture(
    "synth_glue_super_glue_proportional",
    list(GLUE_WEIGHTS.items()) + list(SUPER_GLUE_WEIGHTS.items()))
