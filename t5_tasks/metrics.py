# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""seqio metric functions not provided by `t5.evaluation.metrics`.

Accuracy, F1, MCC, Pearson/Spearman and BLEU are t5's own
(`t5.evaluation.metrics`), used as is by the tasks.
"""

import math
from typing import Dict, Sequence

from t5.evaluation import metrics as t5_metrics

from t5_tasks import vocabulary

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def rouge(targets: Sequence[str],
          predictions: Sequence[str]) -> Dict[str, float]:
  """ROUGE-1, -2, -L and -Lsum F-measures (x100), t5's implementation.

  t5's default `rouge` omits sentence-free ROUGE-L, which the paper reports
  (Table 3, "RL"); this adds it.

  Args:
    targets: reference texts.
    predictions: predicted texts.

  Returns:
    {"rouge1", "rouge2", "rougeL", "rougeLsum"} -> score in [0, 100].
  """
  return t5_metrics.rouge(targets, predictions, score_keys=ROUGE_KEYS)


def perplexity(targets: Sequence[str],
               scores: Sequence[float]) -> Dict[str, float]:
  """Per-token perplexity from per-example log-likelihoods (a score metric).

  seqio calls a metric function whose arguments are `(targets, scores)` with
  the model's score of each target: the natural-log likelihood of the whole
  target sequence, EOS included (what `MtfModel.eval(eval_with_score=True)`
  computes). The number of tokens is counted by encoding each target with
  the tasks' vocabulary, plus one for EOS; targets longer than the evaluation
  sequence length are scored truncated, so keep `targets` length sufficient.

  perplexity = exp(-sum(scores) / sum(tokens)). This is the exponential of the
  mean per-token cross-entropy, which is also the training loss mesh reports,
  so `exp(loss)` of an evaluation run is the same quantity (loss-based).

  Args:
    targets: target texts (postprocessed, i.e. the strings).
    scores: log-likelihood of each target.

  Returns:
    {"perplexity", "neg_log_perplexity" (mean log-likelihood per token),
    "num_tokens"}.
  """
  if len(targets) != len(scores):
    raise ValueError(f"{len(targets)} targets but {len(scores)} scores")
  num_tokens = sum(len(vocabulary.VOCABULARY.encode(t)) + 1 for t in targets)
  mean_ll = float(sum(scores)) / num_tokens
  return {
      "perplexity": math.exp(-mean_ll),
      "neg_log_perplexity": mean_ll,
      "num_tokens": float(num_tokens),
  }
