# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Offline default data: the documentation text that ships with CPython.

Every CPython install carries `pydoc_data.topics.topics`, the text behind the
interactive `help()` (79 topics, about 465,000 characters in 3.11). This module
turns it into a small corpus that needs no download and no vocabulary file, and
registers two seqio tasks on it:

  * `pydocs_span_corruption`: T5's span corruption objective
    (`t5.data.preprocessors.span_corruption`: noise density 0.15, mean span
    length 3, documents concatenated and split to fill the inputs length), for
    encoder-decoder models;
  * `pydocs_lm`: left-to-right language modelling, `targets` only, for
    decoder-only models (documents concatenated and split to the targets
    length).

Both use `VOCABULARY`, a `t5_tasks.vocabulary.LazyVocabulary` whose default
is `"byte"`: unless a vocabulary is chosen explicitly for all tasks (the gin
binding `t5_tasks.vocabulary.get_vocabulary.name` or the environment variable
`MTF_SYNTH_VOCAB`, see `t5_tasks.vocabulary`), it is a `seqio.ByteVocabulary`
with `EXTRA_IDS` extra ids, so the tasks need no file and no network. Then 0
is padding, 1 is EOS, 2 is UNK, the UTF-8 byte b is id b + 3 (3..258), and
the extra ids 259..358 are the span corruption sentinels, used from the top
down (the first masked span of an example is 358, the next 357, ...). Keeping
the sentinels above the byte range means a sentinel can never be mistaken for
a byte of the text. With an explicit choice (e.g. `MTF_SYNTH_VOCAB=t5` or a
SentencePiece `.model` path) the tasks use that vocabulary, and its extra
ids, like every other task.

Documents. Each topic's text is cut into chunks at blank lines: paragraphs are
packed greedily, in order, into chunks of at most `max_chars` characters; a
paragraph longer than that is cut at its last whitespace before the limit (or
at the limit if it has none). Chunking loses nothing: the chunks of a topic,
joined, give back the topic's text exactly.

Split. A chunk belongs to the validation split when the first 8 hex digits of
the SHA-256 of its UTF-8 text, read as an integer, modulo 100, are below
`validation_percent` (default 5); otherwise to the train split. The rule
depends only on the chunk's text, so it is the same on every machine, run and
process, and identical chunks always land in the same split. Documents come
in a fixed order: topics sorted by name, chunks in text order.

Both options can be changed from gin, e.g.
`--gin_param=pydocs.corpus_options.validation_percent = 10`. A split with no
document (e.g. `validation_percent = 0` for "validation") raises
`EmptySplitError` when its dataset is built.
"""

import functools
import hashlib
import re
from typing import Dict, List, NamedTuple, Optional

import gin
import seqio
from t5.data import preprocessors as t5_preprocessors
import tensorflow.compat.v2 as tf

from t5_tasks import registry
from t5_tasks import vocabulary

SPLITS = ("train", "validation")
DEFAULT_VALIDATION_PERCENT = 5
DEFAULT_MAX_CHARS = 2000
# The vocabulary when none is chosen explicitly (see the module docstring).
DEFAULT_VOCABULARY = vocabulary.OFFLINE_NAME
EXTRA_IDS = vocabulary.DEFAULT_EXTRA_IDS
VOCABULARY = vocabulary.OFFLINE_VOCABULARY
NOISE_DENSITY = 0.15
MEAN_NOISE_SPAN_LENGTH = 3.0

_PARAGRAPH = re.compile(r".*?(?:\n[ \t]*\n\s*|\Z)", re.S)


class EmptySplitError(ValueError):
  """A split of the pydocs corpus has no document."""


class Document(NamedTuple):
  """One chunk of a topic: `id` is "<topic>:<chunk index>"."""
  id: str
  text: str


def topics() -> Dict[str, str]:
  """Returns CPython's help topics, name -> text (`pydoc_data.topics`)."""
  from pydoc_data import topics as pydoc_topics  # pylint: disable=g-import-not-at-top
  return dict(pydoc_topics.topics)


def _paragraphs(text: str) -> List[str]:
  """Cuts `text` after each run of blank lines; the pieces join to `text`."""
  return [p for p in _PARAGRAPH.findall(text) if p]


def _cut_long(piece: str, max_chars: int) -> List[str]:
  """Cuts a piece longer than `max_chars` at whitespace, losing nothing."""
  out = []
  while len(piece) > max_chars:
    cut = max(piece.rfind(" ", 0, max_chars), piece.rfind("\n", 0, max_chars))
    cut = cut + 1 if cut > 0 else max_chars
    out.append(piece[:cut])
    piece = piece[cut:]
  if piece:
    out.append(piece)
  return out


def chunk_text(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> List[str]:
  """Packs the paragraphs of `text` into chunks of at most `max_chars`.

  Args:
    text: the text of one topic.
    max_chars: the largest chunk, in characters (> 0).

  Returns:
    Non-empty chunks, in order, whose concatenation is `text`.
  """
  if max_chars <= 0:
    raise ValueError("max_chars must be positive, got %r" % (max_chars,))
  chunks = []
  current = ""
  for paragraph in _paragraphs(text):
    for piece in _cut_long(paragraph, max_chars):
      if current and len(current) + len(piece) > max_chars:
        chunks.append(current)
        current = ""
      current += piece
  if current:
    chunks.append(current)
  return chunks


def split_of(text: str, validation_percent: float) -> str:
  """The split ("train" or "validation") that a chunk of text belongs to."""
  bucket = int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) % 100
  return "validation" if bucket < validation_percent else "train"


def documents(split: str,
              validation_percent: float = DEFAULT_VALIDATION_PERCENT,
              max_chars: int = DEFAULT_MAX_CHARS) -> List[Document]:
  """The documents of one split, in their fixed order.

  Args:
    split: "train" or "validation".
    validation_percent: the share (0..100) of chunks that go to "validation".
    max_chars: the largest chunk, in characters.

  Returns:
    The split's documents: topics sorted by name, chunks in text order. May be
    empty.
  """
  if split not in SPLITS:
    raise ValueError("pydocs has splits %s, not %r" % (SPLITS, split))
  out = []
  for name, text in sorted(topics().items()):
    for i, chunk in enumerate(chunk_text(text, max_chars)):
      if split_of(chunk, validation_percent) == split:
        out.append(Document("%s:%d" % (name, i), chunk))
  return out


@gin.configurable(module="pydocs")
def corpus_options(
    validation_percent: float = DEFAULT_VALIDATION_PERCENT,
    max_chars: int = DEFAULT_MAX_CHARS) -> Dict[str, float]:
  """The corpus options that the tasks use; bind them with gin.

  Args:
    validation_percent: the share (0..100) of chunks that go to "validation".
    max_chars: the largest chunk, in characters.

  Returns:
    Keyword arguments for `documents` and `corpus_dataset`.
  """
  return {"validation_percent": validation_percent, "max_chars": max_chars}


def corpus_dataset(split: str,
                   validation_percent: float = DEFAULT_VALIDATION_PERCENT,
                   max_chars: int = DEFAULT_MAX_CHARS) -> tf.data.Dataset:
  """A dataset of {"id", "text"} string features, one per document.

  Args:
    split: "train" or "validation".
    validation_percent: the share (0..100) of chunks that go to "validation".
    max_chars: the largest chunk, in characters.

  Returns:
    The split's documents in their fixed order.

  Raises:
    EmptySplitError: the split has no document.
  """
  docs = documents(split, validation_percent, max_chars)
  if not docs:
    raise EmptySplitError(
        "The pydocs corpus split %r is empty: no chunk of pydoc_data.topics "
        "falls into it with validation_percent=%r (max_chars=%r). Choose "
        "0 < pydocs.corpus_options.validation_percent < 100 (default %d)."
        % (split, validation_percent, max_chars, DEFAULT_VALIDATION_PERCENT))
  return tf.data.Dataset.from_tensor_slices({
      "id": [d.id for d in docs],
      "text": [d.text for d in docs],
  })


def _source_fn(split: str, shuffle_files: bool,
               seed: Optional[int] = None) -> tf.data.Dataset:
  """seqio dataset_fn: the corpus split with the gin-bound options."""
  del shuffle_files, seed  # One "file"; seqio shuffles the examples.
  return corpus_dataset(split, **corpus_options())


def max_noise_spans(inputs_length: int) -> int:
  """The most masked spans span corruption makes for `inputs_length`."""
  tokens_length, _ = t5_preprocessors.random_spans_helper(
      inputs_length=inputs_length, noise_density=NOISE_DENSITY,
      mean_noise_span_length=MEAN_NOISE_SPAN_LENGTH,
      extra_tokens_per_span_inputs=1, extra_tokens_per_span_targets=1)
  num_noise = max(1, int(round(tokens_length * NOISE_DENSITY)))
  return max(1, int(round(num_noise / MEAN_NOISE_SPAN_LENGTH)))


def span_corruption(dataset: tf.data.Dataset,
                    sequence_length: Dict[str, int],
                    output_features: Dict[str, seqio.Feature]
                    ) -> tf.data.Dataset:
  """T5 span corruption, after checking the sentinels fit in the extra ids."""
  spans = max_noise_spans(sequence_length["inputs"])
  extra_ids = output_features["targets"].vocabulary.extra_ids
  if spans > extra_ids:
    raise ValueError(
        "pydocs_span_corruption: inputs length %d makes up to %d masked spans "
        "but the vocabulary has only %d sentinel ids."
        % (sequence_length["inputs"], spans, extra_ids))
  return t5_preprocessors.span_corruption(
      dataset, sequence_length, output_features,
      mean_noise_span_length=MEAN_NOISE_SPAN_LENGTH,
      noise_density=NOISE_DENSITY)


registry.add_task(
    "pydocs_span_corruption",
    source=seqio.FunctionDataSource(_source_fn, splits=SPLITS),
    preprocessors=[
        functools.partial(seqio.preprocessors.rekey,
                          key_map={"inputs": None, "targets": "text"}),
        seqio.preprocessors.tokenize,
        span_corruption,
        seqio.preprocessors.append_eos_after_trim,
    ],
    output_features=vocabulary.output_features(vocab=VOCABULARY))

registry.add_task(
    "pydocs_lm",
    source=seqio.FunctionDataSource(_source_fn, splits=SPLITS),
    preprocessors=[
        functools.partial(seqio.preprocessors.rekey,
                          key_map={"targets": "text"}),
        seqio.preprocessors.tokenize,
        functools.partial(t5_preprocessors.reduce_concat_tokens,
                          feature_key="targets", batch_size=128),
        t5_preprocessors.split_tokens_to_targets_length,
        seqio.preprocessors.append_eos_after_trim,
    ],
    output_features=vocabulary.output_features(inputs=False,
                                               vocab=VOCABULARY))
