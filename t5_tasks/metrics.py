# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""seqio metric functions not provided by `t5.evaluation.metrics`.

Accuracy, F1, MCC, Pearson/Spearman and BLEU are t5's own
(`t5.evaluation.metrics`), used as is by the tasks. This module adds ROUGE
with sentence-free ROUGE-L, perplexity from scores, and METEOR and CIDEr-D
(the paper's PersonaChat metrics, Table 3) from pycocoevalcap, the
implementations nlg-eval runs, with METEOR's exact-match module in pure
Python for machines without Java (`meteor_exact`).
"""

import collections
import math
import re
import shutil
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np
from pycocoevalcap.cider import cider as coco_cider
from pycocoevalcap.meteor import meteor as coco_meteor
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


# ------------------------- METEOR and CIDEr-D --------------------------------

_TOKEN = re.compile(r"\w+|[^\w\s]")

METEOR_ALPHA = 0.9
METEOR_BETA = 3.0
METEOR_GAMMA = 0.5
# Alignment choices explored per sentence pair before settling for the best
# alignment found so far (reached only by long texts with many repeated words).
METEOR_SEARCH_BUDGET = 20000


def tokenize(text: str) -> List[str]:
  """Lowercases `text` and splits it into words and punctuation marks.

  A token is a run of word characters (letters, digits, underscore: regex
  `\\w+`) or a single character that is neither a word character nor
  whitespace (a punctuation mark or symbol). Whitespace only separates.

  Args:
    text: the text.

  Returns:
    The tokens, e.g. "I'm here." -> ["i", "'", "m", "here", "."].
  """
  return _TOKEN.findall(text.lower())


def _check_lengths(targets: Sequence[str], predictions: Sequence[str]) -> None:
  if len(targets) != len(predictions):
    raise ValueError(
        f"{len(targets)} targets but {len(predictions)} predictions")


def meteor_alignment(candidate: Sequence[str],
                     reference: Sequence[str]) -> Tuple[int, int]:
  """Aligns two token lists by exact match with as few chunks as possible.

  Every token is linked to at most one identical token of the other list and
  the alignment has the largest possible number of links (for each word type,
  the smaller of its counts in the two lists). Among those alignments, the one
  with the fewest chunks is chosen; a chunk is a maximal run of linked tokens
  that are adjacent in the candidate and linked to adjacent reference tokens
  in the same order. The search is a depth-first branch and bound that tries
  continuing the current chunk first; it is exact unless a pair needs more
  than `METEOR_SEARCH_BUDGET` choices (long texts with many repeated words),
  in which case the best alignment found by then is used.

  Args:
    candidate: the candidate's tokens.
    reference: the reference's tokens.

  Returns:
    (matches, chunks): the number of links and of chunks.
  """
  ref_positions = collections.defaultdict(list)
  for j, word in enumerate(reference):
    ref_positions[word].append(j)
  cand_counts = collections.Counter(candidate)
  matches = sum(min(count, len(ref_positions.get(word, ())))
                for word, count in cand_counts.items())
  if not matches:
    return 0, 0
  # How many more occurrences of each word may stay unlinked.
  may_skip = {word: max(0, count - len(ref_positions.get(word, ())))
              for word, count in cand_counts.items()}
  links: List[Optional[int]] = [None] * len(candidate)
  skipped = [False] * len(candidate)
  used = set()

  def options(i: int) -> List[Optional[int]]:
    word = candidate[i]
    free = [j for j in ref_positions.get(word, ()) if j not in used]
    previous = links[i - 1] if i else None
    if previous is not None and previous + 1 in free:
      free.remove(previous + 1)
      free.insert(0, previous + 1)
    if may_skip[word]:
      free.append(None)
    return free

  def undo(i: int) -> None:
    if links[i] is not None:
      used.discard(links[i])
      links[i] = None
    elif skipped[i]:
      may_skip[candidate[i]] += 1
      skipped[i] = False

  best = matches + 1  # Any complete alignment has at most `matches` chunks.
  steps = 0
  # frames[i] = [untried options at position i, chunks before position i].
  frames = [[options(0), 0]]
  while frames:
    i = len(frames) - 1
    untried, chunks_before = frames[-1]
    undo(i)
    if not untried or (steps >= METEOR_SEARCH_BUDGET and best <= matches):
      frames.pop()
      continue
    j = untried.pop(0)
    steps += 1
    chunks = chunks_before
    if j is not None and not (i and links[i - 1] is not None and
                              links[i - 1] == j - 1):
      chunks += 1
    if chunks >= best:
      continue
    if j is None:
      may_skip[candidate[i]] -= 1
      skipped[i] = True
    else:
      links[i] = j
      used.add(j)
    if i + 1 == len(candidate):
      best = chunks
    else:
      frames.append([options(i + 1), chunks])
  return matches, best


def meteor_sentence(candidate: str, reference: str) -> float:
  """METEOR of one candidate against one reference, exact matches only.

  Args:
    candidate: predicted text.
    reference: reference text.

  Returns:
    The score in [0, 1): Fmean * (1 - penalty), 0 when nothing matches or
    either text has no token.
  """
  cand, ref = tokenize(candidate), tokenize(reference)
  matches, chunks = meteor_alignment(cand, ref)
  if not matches:
    return 0.0
  precision = matches / len(cand)
  recall = matches / len(ref)
  fmean = precision * recall / (
      METEOR_ALPHA * precision + (1 - METEOR_ALPHA) * recall)
  penalty = METEOR_GAMMA * (chunks / matches) ** METEOR_BETA
  return fmean * (1 - penalty)


def meteor_exact(targets: Sequence[str],
           predictions: Sequence[str]) -> Dict[str, float]:
  """METEOR's exact-match module alone (an approximation of METEOR), x100.

  Both texts are tokenized by `tokenize` (lowercased words and punctuation
  marks). Unigrams are aligned by exact match only: the stemming and WordNet
  synonym modules of the original metric are left out, since WordNet is not
  available offline, so scores are somewhat lower than the full metric's.
  Among the alignments with the most matches, the one with the fewest chunks
  is used (`meteor_alignment`). With m matches, candidate and reference
  lengths c and r, and the parameters of Lavie & Agarwal (2007), alpha = 0.9,
  beta = 3, gamma = 0.5:

    P = m / c,  R = m / r,  Fmean = P * R / (alpha * P + (1 - alpha) * R),
    penalty = gamma * (chunks / m) ** beta,  score = Fmean * (1 - penalty).

  The sentence scores are averaged over the examples and multiplied by 100,
  the scale of the other metrics (BLEU, ROUGE). Identical texts of n tokens
  score 100 * (1 - 0.5 / n**3).

  Args:
    targets: reference texts, one per example.
    predictions: predicted texts.

  Returns:
    {"meteor_exact": mean score in [0, 100)} (0 for no examples).

  Raises:
    ValueError: `targets` and `predictions` differ in length.
  """
  _check_lengths(targets, predictions)
  if not targets:
    return {"meteor_exact": 0.0}
  scores = [meteor_sentence(p, t) for t, p in zip(targets, predictions)]
  return {"meteor_exact": 100.0 * float(np.mean(scores))}


def java_available() -> bool:
  """Whether a Java runtime (`java` on PATH) can run METEOR 1.5's jar."""
  return shutil.which("java") is not None


def meteor(targets: Sequence[str],
           predictions: Sequence[str]) -> Dict[str, float]:
  """METEOR 1.5 as nlg-eval computes it (the paper's Table 3), x100.

  pycocoevalcap's wrapper of the METEOR 1.5 jar (English, `-norm`: exact,
  stem, synonym and paraphrase modules), whose corpus score is that of all
  the examples' statistics together. It runs in a Java runtime. Without
  one, this logs one line and returns `meteor_exact` (the exact-match
  approximation, under its own name) instead.

  Args:
    targets: reference texts, one per example.
    predictions: predicted texts.

  Returns:
    {"meteor": score in [0, 100]}, or {"meteor_exact": ...} without Java
    (0 for no examples).

  Raises:
    ValueError: `targets` and `predictions` differ in length.
  """
  _check_lengths(targets, predictions)
  if not java_available():
    logging.warning("METEOR needs a Java runtime (no `java` on PATH): "
                    "reporting meteor_exact, its exact-match module alone.")
    return meteor_exact(targets, predictions)
  if not targets:
    return {"meteor": 0.0}
  references, candidates = _as_coco(targets, predictions)
  scorer = coco_meteor.Meteor()
  try:
    score, _ = scorer.compute_score(references, candidates)
  finally:
    scorer.meteor_p.kill()
    scorer.meteor_p.wait()
  return {"meteor": 100.0 * float(score)}


def _as_coco(targets: Sequence[str], predictions: Sequence[str]
             ) -> Tuple[Dict[int, List[str]], Dict[int, List[str]]]:
  """The texts as pycocoevalcap takes them: one line each, by example."""
  def line(text):
    return " ".join(text.split())
  return ({i: [line(t)] for i, t in enumerate(targets)},
          {i: [line(p)] for i, p in enumerate(predictions)})


def cider(targets: Sequence[str],
          predictions: Sequence[str]) -> Dict[str, float]:
  """CIDEr-D as nlg-eval computes it (the paper's Table 3), x100.

  pycocoevalcap's CIDEr-D (Vedantam et al. 2015: n = 1..4, TF-IDF weights
  with document frequencies from this call's references, candidate weights
  clipped by the reference's, a Gaussian length penalty with sigma 6, 10
  times the mean over n), on the texts as given, split at whitespace, one
  reference per example. The mean over examples is reported x100, the
  paper's scale (its Table 3 gives 18.94 for the Transformer).

  Args:
    targets: reference texts, one per example.
    predictions: predicted texts.

  Returns:
    {"cider": score} (0 for no examples).

  Raises:
    ValueError: `targets` and `predictions` differ in length.
  """
  _check_lengths(targets, predictions)
  if not targets:
    return {"cider": 0.0}
  score, _ = coco_cider.Cider().compute_score(*_as_coco(targets, predictions))
  return {"cider": 100.0 * float(score)}
