# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The offline pydocs corpus and its two seqio tasks.

References are independent of the code under test: the text comes straight
from `pydoc_data.topics`, byte ids are checked as UTF-8 byte + 3, and span
corruption is undone by hand from its sentinels. The tasks' vocabulary is the
default (bytes) unless a test chooses another with gin or `MTF_SYNTH_VOCAB`.
"""

import hashlib
import json
import os
import pickle
import subprocess
import sys

import gin
import numpy as np
from pydoc_data import topics as pydoc_topics
import pytest
import seqio
import sentencepiece
import t5_tasks  # pylint: disable=unused-import
from t5_tasks import pydocs
from t5_tasks import vocabulary

SEQ = {"inputs": 64, "targets": 64}
BASE = 3 + 256          # PAD, EOS, UNK, then the 256 bytes.
VOCAB_SIZE = BASE + 100  # 100 sentinels above the bytes.
EOS = 1


def _forget_vocabulary_choice():
  os.environ.pop(vocabulary.ENV_VAR, None)
  with gin.unlock_config():
    gin.bind_parameter("t5_tasks.vocabulary.get_vocabulary.name", None)
    gin.bind_parameter("t5_tasks.vocabulary.get_vocabulary.extra_ids",
                       vocabulary.DEFAULT_EXTRA_IDS)
  vocabulary.reset_vocabulary()


@pytest.fixture(autouse=True, scope="module")
def no_explicit_vocabulary():
  """No gin or environment choice: the tasks' default vocabulary applies."""
  old = os.environ.get(vocabulary.ENV_VAR)
  _forget_vocabulary_choice()
  yield
  _forget_vocabulary_choice()
  if old is not None:
    os.environ[vocabulary.ENV_VAR] = old


@pytest.fixture
def fresh_vocabulary():
  """Starts with no choice made; forgets the test's choice afterwards."""
  _forget_vocabulary_choice()
  yield
  _forget_vocabulary_choice()


def _all_documents(**kwargs):
  return (pydocs.documents("train", **kwargs) +
          pydocs.documents("validation", **kwargs))


def _as_numpy(task_name, split, seq=None):
  task = seqio.get_mixture_or_task(task_name)
  ds = task.get_dataset(seq or SEQ, split=split, shuffle=False,
                        use_cached=False, seed=7)
  return list(ds.as_numpy_iterator())


def _undo_span_corruption(inputs, targets):
  """Rebuilds the uncorrupted ids from one span corruption example."""
  assert inputs[-1] == EOS and targets[-1] == EOS
  inputs, targets = list(inputs[:-1]), list(targets[:-1])
  spans, current = {}, None
  for t in targets:
    if t >= BASE:
      current = t
      spans[current] = []
    else:
      assert current is not None, "targets must start with a sentinel"
      spans[current].append(t)
  out = []
  for t in inputs:
    out.extend(spans.pop(t) if t >= BASE else [t])
  assert not spans, "every target span is used once"
  return out


def _ids_to_bytes(ids):
  assert all(3 <= i < BASE for i in ids), "only byte ids expected"
  return bytes(i - 3 for i in ids)


# --- documents and splits ------------------------------------------------


def test_chunks_join_back_to_every_topic():
  by_topic = {}
  for doc in _all_documents():
    name, index = doc.id.rsplit(":", 1)
    by_topic.setdefault(name, {})[int(index)] = doc.text
  reference = pydoc_topics.topics
  assert sorted(by_topic) == sorted(reference)
  for name, chunks in by_topic.items():
    assert sorted(chunks) == list(range(len(chunks))), name
    assert "".join(chunks[i] for i in range(len(chunks))) == reference[name]


@pytest.mark.parametrize("max_chars", [300, 2000])
def test_chunks_are_bounded_and_end_at_whitespace(max_chars):
  docs = _all_documents(max_chars=max_chars)
  assert all(0 < len(d.text) <= max_chars for d in docs)
  for name, text in pydoc_topics.topics.items():
    chunks = pydocs.chunk_text(text, max_chars)
    for a in chunks[:-1]:
      # A cut is after a blank line, after whitespace, or (for a run without
      # whitespace) exactly at the limit.
      assert a.endswith("\n\n") or a[-1].isspace() or len(a) == max_chars, (
          name, a[-40:])


def test_chunk_text_cuts_at_blank_lines_then_whitespace():
  assert pydocs.chunk_text("aaa\n\nbbb\n\nccc", 6) == [
      "aaa\n\n", "bbb\n\n", "ccc"]
  assert pydocs.chunk_text("aaa\n\nbbb\n\nccc", 10) == [
      "aaa\n\nbbb\n\n", "ccc"]
  assert pydocs.chunk_text("one two three", 8) == ["one two ", "three"]
  assert pydocs.chunk_text("x" * 10, 4) == ["xxxx", "xxxx", "xx"]
  with pytest.raises(ValueError):
    pydocs.chunk_text("abc", 0)


def test_splits_are_disjoint_and_cover_the_corpus():
  train = pydocs.documents("train")
  validation = pydocs.documents("validation")
  assert train and validation
  assert not {d.id for d in train} & {d.id for d in validation}
  assert not {d.text for d in train} & {d.text for d in validation}
  assert 0.01 < len(validation) / (len(train) + len(validation)) < 0.12
  total = sum(len(t) for t in pydoc_topics.topics.values())
  assert sum(len(d.text) for d in train + validation) == total


def test_split_follows_the_documented_hash_rule():
  for split in pydocs.SPLITS:
    for doc in pydocs.documents(split, validation_percent=30):
      digest = hashlib.sha256(doc.text.encode("utf-8")).hexdigest()
      bucket = int(digest[:8], 16) % 100
      assert (bucket < 30) == (split == "validation"), doc.id


def test_split_is_the_same_in_another_process():
  code = ("import json; from t5_tasks import pydocs; print(json.dumps("
          "[d.id for d in pydocs.documents('validation')]))")
  env = dict(os.environ, PYTHONHASHSEED="12345")
  out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                       capture_output=True, text=True).stdout
  ids = json.loads(out.strip().splitlines()[-1])
  assert ids == [d.id for d in pydocs.documents("validation")]


def test_order_is_sorted_topics_then_chunks():
  ids = [d.id for d in pydocs.documents("train")]
  keys = [(i.rsplit(":", 1)[0], int(i.rsplit(":", 1)[1])) for i in ids]
  assert keys == sorted(keys)


@pytest.mark.parametrize("split,percent", [("validation", 0),
                                           ("train", 100)])
def test_empty_split_raises_a_clear_error(split, percent):
  assert not pydocs.documents(split, validation_percent=percent)
  with pytest.raises(pydocs.EmptySplitError) as err:
    pydocs.corpus_dataset(split, validation_percent=percent)
  message = str(err.value)
  assert repr(split) in message and "empty" in message
  assert "validation_percent" in message


def test_gin_binding_reaches_the_task():
  with gin.unlock_config():
    gin.bind_parameter("pydocs.corpus_options.validation_percent", 0)
  try:
    with pytest.raises(pydocs.EmptySplitError):
      _as_numpy("pydocs_span_corruption", "validation")
  finally:
    with gin.unlock_config():
      gin.bind_parameter("pydocs.corpus_options.validation_percent",
                         pydocs.DEFAULT_VALIDATION_PERCENT)


def test_unknown_split_is_rejected():
  with pytest.raises(ValueError, match="test"):
    pydocs.documents("test")


# --- tasks ----------------------------------------------------------------


def test_vocabulary_is_bytes_plus_sentinels():
  vocab = pydocs.VOCABULARY
  assert vocab.vocab_size == VOCAB_SIZE
  assert vocab.eos_id == EOS
  text = "déjà vu"
  assert list(vocab.encode(text)) == [b + 3 for b in text.encode("utf-8")]
  for name in ("pydocs_span_corruption", "pydocs_lm"):
    features = seqio.get_mixture_or_task(name).output_features
    assert all(f.vocabulary.vocab_size == VOCAB_SIZE and f.add_eos
               for f in features.values())


def test_span_corruption_features():
  examples = _as_numpy("pydocs_span_corruption", "validation")
  assert len(examples) > 100
  noise = total = 0
  for ex in examples:
    assert set(ex) == {"inputs", "targets"}
    inputs, targets = ex["inputs"], ex["targets"]
    assert inputs.dtype == np.int32 and targets.dtype == np.int32
    assert 2 < len(inputs) <= SEQ["inputs"]
    assert 2 < len(targets) <= SEQ["targets"]
    for seq in (inputs, targets):
      assert seq[-1] == EOS and EOS not in seq[:-1]
      assert seq.min() >= 3 or seq.argmin() == len(seq) - 1
      assert seq.max() < VOCAB_SIZE
    in_sentinels = [t for t in inputs if t >= BASE]
    out_sentinels = [t for t in targets if t >= BASE]
    # Sentinels come from the top of the vocabulary, one per span, in order.
    assert in_sentinels == list(range(VOCAB_SIZE - 1,
                                      VOCAB_SIZE - 1 - len(in_sentinels), -1))
    assert out_sentinels == in_sentinels
    assert targets[0] == VOCAB_SIZE - 1
    noise += len(targets) - 1 - len(out_sentinels)
    total += len(targets) + len(inputs) - 2 - 2 * len(in_sentinels)
  assert 0.10 < noise / total < 0.20


def test_span_corruption_gives_back_the_validation_text():
  examples = _as_numpy("pydocs_span_corruption", "validation")
  rebuilt = b"".join(
      _ids_to_bytes(_undo_span_corruption(ex["inputs"], ex["targets"]))
      for ex in examples)
  expected = b"".join(d.text.encode("utf-8")
                      for d in pydocs.documents("validation"))
  assert rebuilt == expected
  # And the same text is, piece by piece, in CPython's own documentation.
  first = _ids_to_bytes(_undo_span_corruption(examples[0]["inputs"],
                                              examples[0]["targets"]))
  corpus = "".join(pydoc_topics.topics.values()).encode("utf-8")
  assert len(first) > 40 and first in corpus


def test_span_corruption_train_split_starts_with_the_first_topic():
  task = seqio.get_mixture_or_task("pydocs_span_corruption")
  ds = task.get_dataset(SEQ, split="train", shuffle=False, use_cached=False)
  ex = next(ds.as_numpy_iterator())
  first = _ids_to_bytes(_undo_span_corruption(ex["inputs"], ex["targets"]))
  name = sorted(pydoc_topics.topics)[0]
  train_text = "".join(d.text for d in pydocs.documents("train"))
  assert train_text.encode("utf-8").startswith(first)
  assert pydoc_topics.topics[name].encode("utf-8").startswith(first) or (
      not pydocs.documents("train")[0].id.startswith(name + ":"))


def test_span_corruption_rejects_more_spans_than_sentinels():
  with pytest.raises(ValueError, match="sentinel"):
    _as_numpy("pydocs_span_corruption", "validation",
              {"inputs": 4096, "targets": 1024})


def test_lm_features_and_text():
  examples = _as_numpy("pydocs_lm", "validation", {"targets": 64})
  assert examples
  for ex in examples:
    assert set(ex) == {"targets"}
    targets = ex["targets"]
    assert 1 < len(targets) <= 64
    assert targets[-1] == EOS and EOS not in targets[:-1]
  assert all(len(ex["targets"]) == 64 for ex in examples[:-1])
  rebuilt = b"".join(_ids_to_bytes(ex["targets"][:-1]) for ex in examples)
  expected = b"".join(d.text.encode("utf-8")
                      for d in pydocs.documents("validation"))
  assert rebuilt == expected


# --- vocabulary choice ----------------------------------------------------


def _spm_path():
  return seqio.test_utils.sentencepiece_vocab().sentencepiece_model_file


@pytest.mark.usefixtures("fresh_vocabulary")
def test_default_vocabulary_is_bytes_for_pydocs_only():
  assert not vocabulary.is_resolved("byte")
  lazy_copy = pickle.loads(pickle.dumps(pydocs.VOCABULARY))
  assert lazy_copy.default == "byte"
  for name in ("pydocs_span_corruption", "pydocs_lm"):
    for feature in seqio.get_mixture_or_task(name).output_features.values():
      assert isinstance(feature.vocabulary, vocabulary.LazyVocabulary)
      assert isinstance(feature.vocabulary.delegate, seqio.ByteVocabulary)
      assert feature.vocabulary.extra_ids == 100
  # The paper's tasks keep T5's SentencePiece model (not loaded here).
  other = seqio.get_mixture_or_task("synth_glue_cola").output_features
  delegate = other["targets"].vocabulary.delegate
  assert isinstance(delegate, seqio.SentencePieceVocabulary)
  assert delegate.sentencepiece_model_file == vocabulary.DEFAULT_SPM_PATH
  assert other["targets"].vocabulary != pydocs.VOCABULARY
  # A pickle made after the choice carries the byte vocabulary along.
  assert lazy_copy == seqio.ByteVocabulary(extra_ids=100)
  pinned = pickle.loads(pickle.dumps(pydocs.VOCABULARY))
  os.environ[vocabulary.ENV_VAR] = _spm_path()
  vocabulary.reset_vocabulary()
  assert isinstance(pinned.delegate, seqio.ByteVocabulary)
  assert not isinstance(pydocs.VOCABULARY.delegate, seqio.ByteVocabulary)


@pytest.mark.usefixtures("fresh_vocabulary")
def test_environment_choice_reaches_the_pydocs_tasks():
  import mesh_tensorflow.transformer.utils as mtf_utils  # pylint: disable=g-import-not-at-top
  import t5.models.utils  # pylint: disable=g-import-not-at-top
  path = _spm_path()
  os.environ[vocabulary.ENV_VAR] = path
  processor = sentencepiece.SentencePieceProcessor(model_file=path)
  size = processor.get_piece_size() + 100
  assert pydocs.VOCABULARY.sentencepiece_model_file == path
  # What dataset.gin hands to mesh's utils.run.
  pair = t5.models.utils.get_vocabulary("pydocs_span_corruption")
  assert mtf_utils.inputs_vocabulary(pair).vocab_size == size
  assert mtf_utils.targets_vocabulary(pair).vocab_size == size
  # The same choice as every other task.
  glue = seqio.get_mixture_or_task("synth_glue_cola").output_features
  assert glue["targets"].vocabulary == pydocs.VOCABULARY
  # The LM targets are the SentencePiece ids of the documents, concatenated.
  examples = _as_numpy("pydocs_lm", "validation", {"targets": 64})
  ids = [i for ex in examples for i in ex["targets"][:-1]]
  expected = [i for d in pydocs.documents("validation")
              for i in processor.encode(d.text)]
  assert ids == expected


@pytest.mark.usefixtures("fresh_vocabulary")
def test_gin_choice_reaches_the_pydocs_tasks():
  os.environ[vocabulary.ENV_VAR] = "t5"  # gin wins over the environment
  with gin.unlock_config():
    gin.bind_parameter("t5_tasks.vocabulary.get_vocabulary.name", "byte")
    gin.bind_parameter("t5_tasks.vocabulary.get_vocabulary.extra_ids", 7)
  assert pydocs.VOCABULARY.vocab_size == BASE + 7
  examples = _as_numpy("pydocs_span_corruption", "validation")
  for ex in examples[:20]:
    sentinels = [t for t in ex["inputs"] if t >= BASE]
    assert sentinels == list(range(BASE + 6, BASE + 6 - len(sentinels), -1))
  # 64 inputs make at most 3 spans; 7 sentinels are not enough for 512.
  with pytest.raises(ValueError, match="only 7 sentinel ids"):
    _as_numpy("pydocs_span_corruption", "validation",
              {"inputs": 512, "targets": 128})
