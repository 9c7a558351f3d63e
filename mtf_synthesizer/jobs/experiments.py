# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The paper's experiments and tables, as data (no TensorFlow).

Each experiment is a gin file in gin/experiments/ (task, lengths, steps,
learning rate, model type) and the T5 mixtures it trains and evaluates on
(`t5_tasks`); `EXPERIMENTS` repeats what a job needs to compose and check
its commands without parsing gin (tests/test_experiments.py checks that both
agree). `TABLE_EXPERIMENTS` names the experiments behind each of the paper's
tables; `TABLE_VARIANTS` and `TABLE_BASELINES` the rows each table reports,
read from the attention table (mtf_synthesizer/attentions.py). The Cloud
TPU jobs that run them: mtf_synthesizer/jobs/cloud_tpu.py.
"""

import dataclasses
from typing import Mapping, Optional, Tuple

from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import mesh_defaults

STAGES = ("pretrain", "finetune", "eval")

# T5 model gin files, per T5 version. T5 1.1 names its 3B and 11B "xl" and
# "xxl". The paper (2020) uses T5 1.0.
MODEL_GIN = {
    "1.0": {s: "models/t5.1.0.%s.gin" % s for s in mesh_defaults.MODEL_SIZES},
    "1.1": {"small": "models/t5.1.1.small.gin",
            "base": "models/t5.1.1.base.gin",
            "large": "models/t5.1.1.large.gin",
            "3B": "models/t5.1.1.xl.gin",
            "11B": "models/t5.1.1.xxl.gin"},
}

# (num_heads, d_ff) of each model gin, to check them against the mesh.
MODEL_DIMS = {
    "1.0": {"small": (8, 2048), "base": (12, 3072), "large": (16, 4096),
            "3B": (32, 16384), "11B": (128, 65536)},
    "1.1": {"small": (6, 1024), "base": (12, 2048), "large": (16, 2816),
            "3B": (32, 5120), "11B": (64, 10240)},
}
# T5's SentencePiece vocabulary (32100 ids) padded by mesh's vocab_divisor
# (128).
VOCAB_SIZE = 32128


@dataclasses.dataclass(frozen=True)
class Experiment:
  """One experiment of the paper.

  The gin files in `gin/experiments/` hold the settings (task,
  lengths, steps, learning rate, model type); the fields below repeat what
  the tool needs to compose and check commands without parsing gin, and
  tests/test_experiments.py checks that both agree.

  Attributes:
    gin_file: the experiment file of the first (training) stage.
    train_mixture: mixture or task of that stage.
    train_lengths: its sequence lengths (inputs, targets); inputs None for a
      language model.
    train_steps: its step count.
    model_type: `utils.run.model_type`: "bitransformer", "lm" or "aligned"
      (the encoder-only classifier).
    finetune_gin_file: the experiment file of the finetune stage (None: no
      finetuning).
    finetune_mixture: mixture of the finetune stage.
    finetune_lengths: its sequence lengths.
    eval_split: the split evaluated ("test" where the data set has no
      validation split).
    paper: where the paper reports it.
    baseline_gin_params: baseline name -> the bindings a job of that
      baseline adds to every command of this experiment (the paper's
      settings for it).
  """
  gin_file: str
  train_mixture: str
  train_lengths: tuple
  train_steps: int = 262144
  model_type: str = "bitransformer"
  finetune_gin_file: Optional[str] = None
  finetune_mixture: Optional[str] = None
  finetune_lengths: tuple = (512, 128)
  eval_split: str = "validation"
  paper: str = ""
  baseline_gin_params: Mapping[str, Tuple[str, ...]] = dataclasses.field(
      default_factory=dict)

  @property
  def mixtures(self) -> Tuple[str, ...]:
    """The mixtures its stages read: the training one, then finetuning's."""
    return tuple(filter(None, (self.train_mixture, self.finetune_mixture)))


# Table 7: "We use k=32 for both factorized models". FactorizedRandom's k is
# bound in experiments/_encoder_classifier.gin; Linformer's is bound here,
# since the layer's gin file keeps its own default (128).
_ENCODER_CLASSIFIER_BASELINE_PARAMS = {
    "linformer": ("LinformerAttention.k = 32",)}


# Mixture and task names as `t5_tasks` registers them.
EXPERIMENTS = {
    "c4_glue_superglue": Experiment(
        "experiments/c4_span_corruption.gin", "synth_c4_span_corruption",
        (512, 114), 524288,
        finetune_gin_file="experiments/glue_super_glue_finetune.gin",
        finetune_mixture="synth_glue_super_glue_proportional",
        paper="Tables 4-6: C4 span corruption, then GLUE + SuperGLUE "
        "co-trained"),
    "wmt_ende": Experiment("experiments/wmt14_ende.gin", "synth_wmt14_ende",
                           (256, 256), paper="Table 2: WMT'14 En-De"),
    "wmt_enfr": Experiment("experiments/wmt14_enfr.gin", "synth_wmt14_enfr",
                           (256, 256), paper="Table 2: WMT'14 En-Fr"),
    "lm1b": Experiment("experiments/lm1b.gin", "synth_lm1b", (None, 256),
                       model_type="lm", eval_split="test",
                       paper="Table 2: LM1B, decoder-only language model"),
    "cnn_dm": Experiment("experiments/cnn_dailymail.gin",
                         "synth_cnn_dailymail", (512, 128),
                         paper="Table 3: CNN/Dailymail summarization"),
    "personachat": Experiment("experiments/personachat.gin",
                              "synth_personachat", (512, 128),
                              paper="Table 3: PersonaChat dialogue"),
    "ag_news": Experiment("experiments/ag_news.gin", "synth_ag_news",
                          (512, 512), 65536, model_type="aligned",
                          eval_split="test",
                          paper="Table 7: AG News classification, "
                          "encoder only",
                          baseline_gin_params=(
                              _ENCODER_CLASSIFIER_BASELINE_PARAMS)),
    "imdb": Experiment("experiments/imdb.gin", "synth_imdb", (512, 512),
                       65536, model_type="aligned", eval_split="test",
                       paper="Table 7: IMDb sentiment classification, "
                       "encoder only",
                       baseline_gin_params=_ENCODER_CLASSIFIER_BASELINE_PARAMS),
}


# The experiments behind each table.
TABLE_EXPERIMENTS = {
    "Table 2-3": ("wmt_ende", "wmt_enfr", "lm1b", "cnn_dm", "personachat"),
    "Table 4": ("c4_glue_superglue",),
    "Tables 5-6": ("c4_glue_superglue",),
    "Table 7": ("ag_news", "imdb"),
}
# The variants and the baselines each table reports: `paper_tables` of the
# attention table (mtf_synthesizer/attentions.py), the one place that says
# so. The paper's Tables 2-3 report no baseline.
TABLE_VARIANTS = {
    table: tuple(a.name for a in attentions.VARIANTS
                 if table in a.paper_tables)
    for table in TABLE_EXPERIMENTS}
TABLE_BASELINES = {
    table: tuple(a.name for a in attentions.BASELINES
                 if table in a.paper_tables)
    for table in TABLE_EXPERIMENTS}
# Table 4 is the pretraining stage of the C4 + GLUE/SuperGLUE job.
TABLE_STAGES = {"Table 4": "pretrain"}

DEFAULT_FINETUNE_STEPS = 262144  # 2**18, T5's finetuning length.
TOKENS_PER_BATCH = 65536  # T5: 128 sequences of 512 tokens.
