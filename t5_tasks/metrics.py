# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""seqio metric functions not provided by `t5.evaluation.metrics`.

Accuracy, F1, MCC, Pearson/Spearman and BLEU are t5's own
(`t5.evaluation.metrics`), used as is by the tasks. This module adds ROUGE
with sentence-free ROUGE-L, perplexity from scores, and METEOR and CIDEr-D
(the paper's PersonaChat metrics, Table 3) in pure Python.
"""

import collections
import math
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
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

CIDER_MAX_N = 4
CIDER_SIGMA = 6.0
CIDER_SCALE = 10.0


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


def meteor(targets: Sequence[str],
           predictions: Sequence[str]) -> Dict[str, float]:
  """METEOR (Banerjee & Lavie 2005), exact-match module only, x100.

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
    {"meteor": mean score in [0, 100)} (0 for no examples).

  Raises:
    ValueError: `targets` and `predictions` differ in length.
  """
  _check_lengths(targets, predictions)
  if not targets:
    return {"meteor": 0.0}
  scores = [meteor_sentence(p, t) for t, p in zip(targets, predictions)]
  return {"meteor": 100.0 * float(np.mean(scores))}


def _ngram_counts(tokens: Sequence[str],
                  n: int) -> collections.Counter:
  return collections.Counter(
      tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def cider(targets: Sequence[str],
          predictions: Sequence[str]) -> Dict[str, float]:
  """CIDEr-D (Vedantam et al. 2015) with one reference per example.

  Texts are tokenized by `tokenize`. For n = 1..4, each text becomes a TF-IDF
  vector over its n-grams: the weight of n-gram g is count(g) * log(N /
  max(1, df(g))), where N is the number of examples and df(g) the number of
  references (the targets of this call) that contain g; an n-gram found in
  no reference gets the largest weight, log N, and one found in every
  reference weight 0. The similarity of order n is

    sum_g min(w_cand(g), w_ref(g)) * w_ref(g) / (|w_cand| * |w_ref|)
      * exp(-(len_cand - len_ref)**2 / (2 * sigma**2)),

  with sigma = 6 and lengths in tokens: candidate weights are clipped by the
  reference's (repeating a word earns nothing), and the Gaussian penalty
  punishes a length different from the reference's. It is 0 when either
  vector is empty or all zero. An example scores 10 times the mean over
  n = 1..4, and the result is the mean over examples. This is CIDEr-D's own
  scale (as in the coco-caption toolkit), not a percentage: an example scores
  at most 10, and an identical candidate exactly 10 when, for each n, it has
  an n-gram that is not in every reference.

  Args:
    targets: reference texts, one per example.
    predictions: predicted texts.

  Returns:
    {"cider": mean CIDEr-D} (0 for no examples).

  Raises:
    ValueError: `targets` and `predictions` differ in length.
  """
  _check_lengths(targets, predictions)
  if not targets:
    return {"cider": 0.0}
  refs = [tokenize(t) for t in targets]
  cands = [tokenize(p) for p in predictions]
  log_n = math.log(len(refs))
  totals = np.zeros(len(refs))
  for n in range(1, CIDER_MAX_N + 1):
    ref_counts = [_ngram_counts(r, n) for r in refs]
    df = collections.Counter(g for counts in ref_counts for g in counts)

    def weights(counts, df=df):
      return {g: c * (log_n - math.log(max(1, df[g])))
              for g, c in counts.items()}

    for k, (cand, ref) in enumerate(zip(cands, ref_counts)):
      w_cand, w_ref = weights(_ngram_counts(cand, n)), weights(ref)
      norm = (math.sqrt(sum(v * v for v in w_cand.values())) *
              math.sqrt(sum(v * v for v in w_ref.values())))
      if not norm:
        continue
      dot = sum(min(v, w_ref.get(g, 0.0)) * w_ref.get(g, 0.0)
                for g, v in w_cand.items())
      delta = len(cand) - len(refs[k])
      totals[k] += dot / norm * math.exp(-delta**2 / (2 * CIDER_SIGMA**2))
  return {"cider": float(np.mean(CIDER_SCALE * totals / CIDER_MAX_N))}
