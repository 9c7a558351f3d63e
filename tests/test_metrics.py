# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""METEOR and CIDEr-D of `t5_tasks.metrics` against hand-worked values.

The expected numbers are worked out in the comments from the published
formulas with explicit counts (on CIDEr-D's own scale, times 100: the
metric reports x100, as the paper does); the alignment search is checked against a brute-force
enumeration of every alignment, and pycocoevalcap's CIDEr-D against an
implementation of the formula written here, on dialogue turns.
"""

import collections
import itertools
import math
import random

import pytest

from t5_tasks import metrics

ALPHA, BETA, GAMMA = 0.9, 3.0, 0.5


def _meteor_by_hand(matches, chunks, cand_len, ref_len):
  p, r = matches / cand_len, matches / ref_len
  fmean = p * r / (ALPHA * p + (1 - ALPHA) * r)
  return 100 * fmean * (1 - GAMMA * (chunks / matches) ** BETA)


# --------------------------------- METEOR -----------------------------------


def test_tokenize_lowercases_and_splits_punctuation():
  assert metrics.tokenize("Great, just FED my cat!") == [
      "great", ",", "just", "fed", "my", "cat", "!"]
  assert metrics.tokenize("  i'm  ok ") == ["i", "'", "m", "ok"]
  assert not metrics.tokenize(" \t\n")


def test_meteor_exact_worked_example():
  # Candidate "the cat sat on the mat" (6 tokens), reference "the cat was sat
  # on the mat" (7 tokens). Matches: the x2, cat, sat, on, mat = 6. The best
  # alignment links both "the" in order: chunks [the cat] [sat on the mat]
  # = 2 (linking the first "the" to the second one would give 4).
  # P = 6/6 = 1, R = 6/7, Fmean = (6/7) / (0.9 + 0.1 * 6/7) = 6/6.9,
  # penalty = 0.5 * (2/6)^3 = 1/54, score = 6/6.9 * 53/54 = 0.85346.
  out = metrics.meteor_exact(["the cat was sat on the mat"],
                       ["the cat sat on the mat"])
  assert out["meteor_exact"] == pytest.approx(100 * 6 / 6.9 * 53 / 54)
  assert out["meteor_exact"] == pytest.approx(_meteor_by_hand(6, 2, 6, 7))
  assert out["meteor_exact"] == pytest.approx(85.3462, abs=1e-4)


def test_meteor_exact_identical_is_one_chunk():
  # n = 7 tokens (i am a nurse , you ?), all matched in one chunk:
  # P = R = Fmean = 1, penalty = 0.5 * (1/7)^3, score = 1 - 0.5/343.
  text = "i am a nurse , you ?"
  out = metrics.meteor_exact([text], [text])
  n = 7
  assert out["meteor_exact"] == pytest.approx(100 * (1 - 0.5 / n**3))
  # Case does not matter.
  assert metrics.meteor_exact(["Hello World"], ["hello world"])["meteor_exact"] == (
      pytest.approx(100 * (1 - 0.5 / 8)))


def test_meteor_exact_no_overlap_is_zero():
  assert metrics.meteor_exact(["a b c"], ["d e f"]) == {"meteor_exact": 0.0}
  assert metrics.meteor_exact(["a b c"], [""]) == {"meteor_exact": 0.0}
  assert metrics.meteor_exact([], []) == {"meteor_exact": 0.0}


def test_meteor_exact_scrambled_order_is_penalized():
  # Same 4 words: in order 1 chunk, reversed 4 chunks (P = R = Fmean = 1).
  in_order = metrics.meteor_exact(["a b c d"], ["a b c d"])["meteor_exact"]
  swapped = metrics.meteor_exact(["a b c d"], ["c d a b"])["meteor_exact"]
  reversed_ = metrics.meteor_exact(["a b c d"], ["d c b a"])["meteor_exact"]
  assert in_order == pytest.approx(100 * (1 - 0.5 / 64))
  assert swapped == pytest.approx(100 * (1 - 0.5 * (2 / 4) ** 3))  # 2 chunks
  assert reversed_ == pytest.approx(50.0)  # 0.5 * (4/4)^3
  assert in_order > swapped > reversed_


def test_meteor_exact_prefers_the_alignment_with_fewest_chunks():
  # Candidate "the cat the dog", reference "the dog": 2 matches. Linking the
  # first "the" gives 2 chunks, the second "the" 1 chunk ([the dog]).
  # P = 2/4, R = 1, Fmean = 0.5 / (0.45 + 0.1) = 10/11,
  # penalty = 0.5 * (1/2)^3 = 1/16.
  assert metrics.meteor_alignment("the cat the dog".split(),
                                  "the dog".split()) == (2, 1)
  out = metrics.meteor_exact(["the dog"], ["the cat the dog"])
  assert out["meteor_exact"] == pytest.approx(100 * 10 / 11 * 15 / 16)


def test_meteor_exact_averages_sentences():
  out = metrics.meteor_exact(["a b c d", "x y"], ["d c b a", "q r"])
  assert out["meteor_exact"] == pytest.approx((50.0 + 0.0) / 2)
  with pytest.raises(ValueError):
    metrics.meteor_exact(["a"], [])


def _brute_force_chunks(cand, ref):
  """Fewest chunks over every maximum exact-match alignment."""
  groups = []
  for word in set(cand) & set(ref):
    c = [i for i, w in enumerate(cand) if w == word]
    r = [j for j, w in enumerate(ref) if w == word]
    if len(c) <= len(r):
      options = [list(zip(c, p)) for p in itertools.permutations(r, len(c))]
    else:
      options = [list(zip(p, r)) for p in itertools.permutations(c, len(r))]
    groups.append(options)
  best = None
  for choice in itertools.product(*groups):
    link = dict(pair for group in choice for pair in group)
    chunks = sum(1 for i, j in link.items() if link.get(i - 1) != j - 1)
    best = chunks if best is None else min(best, chunks)
  return sum(len(g[0]) for g in groups), best or 0


def test_meteor_alignment_matches_brute_force():
  rng = random.Random(3)
  for _ in range(200):
    cand = [rng.choice("aabbcde") for _ in range(rng.randint(1, 8))]
    ref = [rng.choice("aabbcdf") for _ in range(rng.randint(1, 8))]
    assert metrics.meteor_alignment(cand, ref) == _brute_force_chunks(
        cand, ref), (cand, ref)


def test_meteor_exact_long_repetitive_text_finishes():
  words = ["the"] * 40 + ["a"] * 40
  random.Random(0).shuffle(words)
  matches, chunks = metrics.meteor_alignment(words, sorted(words))
  assert matches == 80 and 2 <= chunks <= 80


# --------------------------------- CIDEr-D ----------------------------------


def test_cider_identical_two_example_corpus():
  # References "a b c" and "a d e", N = 2. Unigrams: "a" is in both
  # references, idf = log(2/2) = 0; b, c, d, e idf = log 2. Example 1:
  # w = (a: 0, b: log2, c: log2) for both texts, cosine 1. Bigrams and the
  # trigram are in one reference each: cosine 1. No 4-grams: 0.
  # Score = 10 * (1 + 1 + 1 + 0) / 4 = 7.5 for each example.
  out = metrics.cider(["a b c", "a d e"], ["a b c", "a d e"])
  assert out["cider"] == pytest.approx(750.0)
  # With 4-grams and no n-gram in every reference, identical scores 10.
  out = metrics.cider(["a b c d", "e f g h"], ["a b c d", "e f g h"])
  assert out["cider"] == pytest.approx(1000.0)


def test_cider_no_overlap_is_zero():
  assert metrics.cider(["a b c", "d e f"], ["x y z", "u v w"]) == {
      "cider": 0.0}
  assert metrics.cider([], []) == {"cider": 0.0}


def test_cider_length_penalty():
  # References "a b c", "d e f" (N = 2, every n-gram in one reference: idf
  # log 2; "g" is in none: idf log(2 / max(1, 0)) = log 2 too).
  # Example 2, candidate "d e f g" (4 tokens) vs "d e f" (3):
  #   n=1: dot 3, |cand| 2, |ref| sqrt(3) (units of log2^2) -> sqrt(3)/2
  #   n=2: {de, ef, fg} vs {de, ef}: 2 / (sqrt(3) sqrt(2)) = sqrt(2/3)
  #   n=3: {def, efg} vs {def}: 1 / sqrt(2)
  #   n=4: the reference has no 4-gram -> 0
  #   length penalty exp(-(4 - 3)^2 / (2 * 6^2)) = exp(-1/72).
  # Example 1 is identical with trigrams at most: 7.5.
  second = 10 * math.exp(-1 / 72) * (
      math.sqrt(3) / 2 + math.sqrt(2 / 3) + 1 / math.sqrt(2)) / 4
  out = metrics.cider(["a b c", "d e f"], ["a b c", "d e f g"])
  assert out["cider"] == pytest.approx(100 * (7.5 + second) / 2)
  # The penalty depends on the length difference only: sigma = 6.
  long_ref = "a b c d e f g h i j k l"  # 12 tokens
  other = "m n o p"
  short = metrics.cider([long_ref, other], ["a b c d e f", other])
  # Candidate = first 6 tokens: dot and norms as for identical texts cut to
  # the candidate's n-grams: cos_n = sqrt((7 - n) / (13 - n)).
  cosines = [math.sqrt((7 - n) / (13 - n)) for n in range(1, 5)]
  first = 10 * math.exp(-36 / 72) * sum(cosines) / 4
  assert short["cider"] == pytest.approx(100 * (first + 10.0) / 2)


def test_cider_clips_repeated_words():
  # References "a b c", "d e f". Candidate 1 "b b b": unigram weights
  # (b: 3 log2) vs reference (a: log2, b: log2, c: log2); the dot product
  # is min(3, 1) * 1 = 1 (units of log2^2), norms 3 and sqrt(3): 1/(3 sqrt3).
  # Its bigram "b b" and trigram are in no reference: 0.
  out = metrics.cider(["a b c", "d e f"], ["b b b", "x"])
  expected = 10 * (1 / (3 * math.sqrt(3))) / 4 / 2  # example 2 scores 0
  assert out["cider"] == pytest.approx(100 * expected)
  unclipped = 10 * (3 / (3 * math.sqrt(3))) / 4 / 2
  assert out["cider"] < 100 * unclipped


def test_cider_document_frequency_over_references():
  # "a" is in every reference: its idf is 0, so a candidate sharing only
  # "a" with its reference scores 0.
  out = metrics.cider(["a b", "a c"], ["a x", "a y"])
  assert out["cider"] == 0.0
  with pytest.raises(ValueError):
    metrics.cider(["a"], ["a", "b"])



# CIDEr-D written from Vedantam et al. (2015), section 3.2, independently of
# pycocoevalcap: whitespace tokens, n = 1..4, idf log(N / max(1, df)) over
# the references, clipped candidate weights, penalty exp(-delta^2 / 72),
# 10 x the mean over n, mean over examples.
def _cider_d_by_formula(targets, predictions):
  refs = [t.split() for t in targets]
  cands = [p.split() for p in predictions]
  log_n = math.log(len(refs))
  totals = [0.0] * len(refs)
  for n in range(1, 5):
    def grams(tokens, n=n):
      return collections.Counter(
          tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    ref_grams = [grams(r) for r in refs]
    df = collections.Counter(g for counts in ref_grams for g in counts)

    def weights(counts, df=df):
      return {g: c * (log_n - math.log(max(1, df[g])))
              for g, c in counts.items()}
    for k, (cand, ref) in enumerate(zip(cands, ref_grams)):
      w_cand, w_ref = weights(grams(cand)), weights(ref)
      norm = (math.sqrt(sum(v * v for v in w_cand.values())) *
              math.sqrt(sum(v * v for v in w_ref.values())))
      if norm:
        dot = sum(min(v, w_ref.get(g, 0.0)) * w_ref.get(g, 0.0)
                  for g, v in w_cand.items())
        delta = len(cand) - len(refs[k])
        totals[k] += dot / norm * math.exp(-delta ** 2 / 72)
  return 100 * sum(10 * t / 4 for t in totals) / len(totals)


# PersonaChat-style turns (lowercased and tokenized as its files are) and
# replies a small model might give.
DIALOGUE_TARGETS = [
    "i love to go hiking with my two dogs on the weekends .",
    "that sounds fun ! what kind of music do you like ?",
    "i work as a nurse at the local hospital , long hours .",
    "no , i have never been to france but i would love to .",
    "my favorite food is pizza , especially with extra cheese .",
    "i am a student , i study history at the university .",
    "yes , i have a cat named whiskers . she is very lazy .",
    "i like to read books about space and the stars .",
]
DIALOGUE_PREDICTIONS = [
    "i love to go hiking with my dog .",
    "what kind of music do you like ?",
    "i am a nurse . i work long hours .",
    "i have never been to france .",
    "i love pizza . what is your favorite food ?",
    "i am a student at the university .",
    "i have a cat . she is lazy .",
    "i like to read books .",
]


def test_cider_is_the_formula_on_dialogue_turns():
  ours = _cider_d_by_formula(DIALOGUE_TARGETS, DIALOGUE_PREDICTIONS)
  coco = metrics.cider(DIALOGUE_TARGETS, DIALOGUE_PREDICTIONS)["cider"]
  assert coco == pytest.approx(ours, rel=1e-9)
  assert 10 < coco < 500
  # Whitespace runs and line ends do not change the score.
  spaced = [" %s \n" % t.replace(" ", "  ") for t in DIALOGUE_TARGETS]
  assert metrics.cider(spaced, DIALOGUE_PREDICTIONS)["cider"] == (
      pytest.approx(coco))


needs_java = pytest.mark.skipif(
    not metrics.java_available(),
    reason="METEOR 1.5 needs a Java runtime (the no-Java path is tested)")


@needs_java
def test_meteor_runs_meteor_1_5():
  out = metrics.meteor(DIALOGUE_TARGETS, DIALOGUE_PREDICTIONS)
  assert list(out) == ["meteor"]
  exact = metrics.meteor_exact(DIALOGUE_TARGETS, DIALOGUE_PREDICTIONS)
  assert 0 < out["meteor"] < 100
  # METEOR 1.5's stem module matches "dogs" and "dog", which the exact
  # module does not.
  stems = metrics.meteor(["i walk my dogs"], ["i walk my dog"])["meteor"]
  assert stems > metrics.meteor_exact(
      ["i walk my dogs"], ["i walk my dog"])["meteor_exact"]
  assert out["meteor"] != pytest.approx(exact["meteor_exact"])
  assert metrics.meteor([], []) == {"meteor": 0.0}


def test_meteor_without_java_is_reported_as_meteor_exact(monkeypatch,
                                                         caplog):
  monkeypatch.setenv("PATH", "")
  assert not metrics.java_available()
  out = metrics.meteor(DIALOGUE_TARGETS, DIALOGUE_PREDICTIONS)
  assert out == metrics.meteor_exact(DIALOGUE_TARGETS, DIALOGUE_PREDICTIONS)
  assert list(out) == ["meteor_exact"]
  lines = [r.getMessage() for r in caplog.records
           if "Java" in r.getMessage()]
  assert lines == ["METEOR needs a Java runtime (no `java` on PATH): "
                   "reporting meteor_exact, its exact-match module alone."]
