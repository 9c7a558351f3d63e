# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The single source of the vocabulary used by every `t5_tasks` task.

Tasks are registered when `t5_tasks` is imported, but the stock
`t5_mesh_transformer` CLI parses gin only after its `--module_import`s. The
tasks therefore hold a `LazyVocabulary`, which decides which concrete
vocabulary it stands for the first time anything asks it for a token id, a
size or an encoding. The choice, in order of precedence:

1. the gin binding `t5_tasks.vocabulary.get_vocabulary.name`,
2. the environment variable `MTF_SYNTH_VOCAB`,
3. the default of the `LazyVocabulary`: T5's SentencePiece model
   `gs://t5-data/vocabs/cc_all.32000/sentencepiece.model` for every task
   except those that ask for another default (the offline tasks, which use
   `OFFLINE_VOCABULARY`, default to `byte`).

An explicit choice (1 or 2) applies to every task; only the fallback differs
between tasks.

A name is one of `t5` (the default model), `byte` (`seqio.ByteVocabulary`,
needs no file) or the path of a SentencePiece `.model` file (local or any
filesystem `tf.io.gfile` reads). The number of extra ids (sentinels) is
`t5_tasks.vocabulary.get_vocabulary.extra_ids` (default 100 for every kind).

The choice is made once per process and default; `reset_vocabulary()` forgets
it (tests).
"""

import os
import threading
from typing import Any, Dict, Iterable, Optional, Sequence

from absl import logging
import gin
import seqio
import tensorflow.compat.v2 as tf

DEFAULT_SPM_PATH = "gs://t5-data/vocabs/cc_all.32000/sentencepiece.model"
DEFAULT_EXTRA_IDS = 100
DEFAULT_NAME = "t5"
# The fallback of the offline tasks (no file, no network).
OFFLINE_NAME = "byte"
ENV_VAR = "MTF_SYNTH_VOCAB"

_lock = threading.RLock()
# The chosen vocabulary of each default name (the fallback of a LazyVocabulary).
_resolved: Dict[str, seqio.Vocabulary] = {}


def make_vocabulary(name: str,
                    extra_ids: int = DEFAULT_EXTRA_IDS) -> seqio.Vocabulary:
  """Builds the concrete vocabulary that `name` designates.

  Args:
    name: `"t5"` for T5's SentencePiece model, `"byte"` for
      `seqio.ByteVocabulary`, otherwise the path of a SentencePiece model.
    extra_ids: number of extra (sentinel) ids appended to the vocabulary.

  Returns:
    A `seqio.Vocabulary`.

  Raises:
    ValueError: `name` is empty, or a local path that does not exist.
  """
  key = (name or "").strip()
  if not key:
    raise ValueError("Empty vocabulary name; use 't5', 'byte' or a path to a "
                     "SentencePiece .model file.")
  if key.lower() == "t5":
    return seqio.SentencePieceVocabulary(DEFAULT_SPM_PATH, extra_ids)
  if key.lower() == "byte":
    return seqio.ByteVocabulary(extra_ids=extra_ids)
  path = os.path.expanduser(key)
  if "://" not in path and not tf.io.gfile.exists(path):
    raise ValueError(
        f"Vocabulary {key!r} is neither 't5', 'byte' nor an existing "
        "SentencePiece model file (set by the gin binding "
        f"t5_tasks.vocabulary.get_vocabulary.name or ${ENV_VAR}).")
  return seqio.SentencePieceVocabulary(path, extra_ids)


@gin.configurable(denylist=["default"])
def get_vocabulary(name: Optional[str] = None,
                   extra_ids: int = DEFAULT_EXTRA_IDS,
                   default: str = DEFAULT_NAME) -> seqio.Vocabulary:
  """Returns the concrete vocabulary that the current configuration selects.

  Unlike the tasks' `LazyVocabulary`, this builds a fresh object on every call
  and reflects the gin bindings and environment of the moment.

  Args:
    name: vocabulary name or path (see `make_vocabulary`); when None, the
      environment variable `MTF_SYNTH_VOCAB`, and when that is unset or empty,
      `default`.
    extra_ids: number of extra (sentinel) ids.
    default: the name used when neither `name` nor the environment chooses
      (set by the caller, e.g. a task's `LazyVocabulary`; not a gin
      parameter).

  Returns:
    A `seqio.Vocabulary`.
  """
  if not name:
    name = os.environ.get(ENV_VAR, "").strip() or default
  return make_vocabulary(name, extra_ids)


def resolved_vocabulary(default: str = DEFAULT_NAME) -> seqio.Vocabulary:
  """Returns the process-wide vocabulary, choosing it on the first call.

  Args:
    default: the fallback name of the asking `LazyVocabulary`; each default
      is chosen (and cached) separately, so that an explicit gin or
      environment choice gives every default the same vocabulary.

  Returns:
    The concrete `seqio.Vocabulary` the `LazyVocabulary` objects with this
    default delegate to.
  """
  with _lock:
    if default not in _resolved:
      _resolved[default] = get_vocabulary(default=default)
      logging.info("t5_tasks vocabulary (default %r): %s", default,
                   _resolved[default])
    return _resolved[default]


def is_resolved(default: str = DEFAULT_NAME) -> bool:
  """Returns whether the vocabulary for `default` has been chosen yet."""
  return default in _resolved


def reset_vocabulary() -> None:
  """Forgets every process-wide choice, so that the next use chooses again."""
  with _lock:
    _resolved.clear()


def _delegated(name: str) -> property:
  """A read-only property that returns `self.delegate.<name>`."""
  return property(lambda self: getattr(self.delegate, name),
                  doc=f"The chosen vocabulary's `{name}`.")


class LazyVocabulary(seqio.Vocabulary):
  """A `seqio.Vocabulary` that stands for the configured vocabulary.

  Every attribute and method delegates to `resolved_vocabulary(default)`,
  which is chosen on first use. `default` is the name used when neither gin
  nor the environment chooses: `"t5"` for most tasks, `"byte"` for the
  offline tasks (`OFFLINE_VOCABULARY`).

  Two unpinned `LazyVocabulary` objects with the same default are equal
  without choosing anything (so seqio's mixture checks at import time stay
  lazy); with different defaults, or against a concrete vocabulary, a
  comparison chooses and compares the delegates.

  Pickling (and deep copies, e.g. by gin) carries the concrete vocabulary if it
  was already chosen, so that a worker process uses the same one: such a copy
  is "pinned" to it.
  """

  def __init__(self, pinned: Optional[seqio.Vocabulary] = None,
               default: str = DEFAULT_NAME):
    """Creates the proxy.

    Args:
      pinned: if given, the proxy always delegates to this vocabulary instead
        of the process-wide one.
      default: the vocabulary name (see `make_vocabulary`) to use when
        neither the gin binding nor `MTF_SYNTH_VOCAB` chooses one.
    """
    super().__init__(extra_ids=0)
    self._pinned = pinned
    self._default = default

  @property
  def default(self) -> str:
    """The name used when no explicit choice is configured."""
    return self._default

  @property
  def delegate(self) -> seqio.Vocabulary:
    """The concrete vocabulary (chooses it if needed)."""
    if self._pinned is not None:
      return self._pinned
    return resolved_vocabulary(self._default)

  # Ids and sizes (seqio.Vocabulary's properties, read off the delegate).
  bos_id = _delegated("bos_id")
  eos_id = _delegated("eos_id")
  pad_id = _delegated("pad_id")
  unk_id = _delegated("unk_id")
  extra_ids = _delegated("extra_ids")
  vocab_size = _delegated("vocab_size")
  _base_vocab_size = _delegated("_base_vocab_size")

  # Encoding and decoding: the public methods delegate whole, so that the
  # concrete class's own clean-up (EOS, UNK, extra ids) applies.
  def encode(self, s: Any) -> Sequence[int]:
    return self.delegate.encode(s)

  def decode(self, ids: Iterable[int]) -> Any:
    return self.delegate.decode(ids)

  def encode_tf(self, s: tf.Tensor) -> tf.Tensor:
    return self.delegate.encode_tf(s)

  def decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
    return self.delegate.decode_tf(ids)

  def _encode(self, s):
    return self.delegate._encode(s)  # pylint: disable=protected-access

  def _decode(self, ids):
    return self.delegate._decode(ids)  # pylint: disable=protected-access

  def _encode_tf(self, s):
    return self.delegate._encode_tf(s)  # pylint: disable=protected-access

  def _decode_tf(self, ids):
    return self.delegate._decode_tf(ids)  # pylint: disable=protected-access

  def __getattr__(self, name: str) -> Any:
    # Only called for attributes the proxy lacks (e.g. `sp_model`,
    # `sentencepiece_model_file`, `tokenizer` of a SentencePiece vocabulary).
    if name.startswith("__") or name in ("_pinned", "_extra_ids",
                                         "_default"):
      raise AttributeError(name)
    return getattr(self.delegate, name)

  # Equality, hashing, pickling.
  def __eq__(self, other: Any) -> bool:
    if isinstance(other, LazyVocabulary):
      if (self._pinned is None and other._pinned is None and
          self._default == other._default):
        return True
      return self.delegate == other.delegate
    if isinstance(other, seqio.Vocabulary):
      return self.delegate == other
    return NotImplemented

  def __ne__(self, other: Any) -> bool:
    equal = self.__eq__(other)
    return equal if equal is NotImplemented else not equal

  def __hash__(self) -> int:
    return hash(LazyVocabulary)

  def __getstate__(self) -> Dict[str, Any]:
    pinned = self._pinned
    if pinned is None and is_resolved(self._default):
      pinned = resolved_vocabulary(self._default)
    return {"_pinned": pinned, "_extra_ids": 0, "_default": self._default}

  def __setstate__(self, state: Dict[str, Any]) -> None:
    self.__dict__.update(state)
    self.__dict__.setdefault("_default", DEFAULT_NAME)

  def __str__(self) -> str:
    if self._pinned is not None:
      return f"LazyVocabulary(pinned={self._pinned})"
    default = "" if self._default == DEFAULT_NAME else (
        f"default={self._default!r}, ")
    if is_resolved(self._default):
      return (f"LazyVocabulary({default}"
              f"resolved={_resolved[self._default]})")
    return f"LazyVocabulary({default}unresolved)"

  __repr__ = __str__


VOCABULARY = LazyVocabulary()
# The vocabulary of the offline tasks (`listops`, `key_presence`,
# `key_value_recall`, `pydocs_*`): bytes unless a choice is made explicitly.
OFFLINE_VOCABULARY = LazyVocabulary(default=OFFLINE_NAME)


def output_features(
    inputs: bool = True, add_eos: bool = True,
    vocab: Optional[LazyVocabulary] = None) -> Dict[str, seqio.Feature]:
  """Returns seqio output features that use a lazy vocabulary.

  Args:
    inputs: whether to include an `inputs` feature (encoder-decoder tasks) in
      addition to `targets`.
    add_eos: whether EOS is appended to each feature.
    vocab: the lazy vocabulary of both features; `VOCABULARY` (default T5's
      SentencePiece) when None.

  Returns:
    A dict from feature name to `seqio.Feature`.
  """
  vocab = VOCABULARY if vocab is None else vocab
  features = {}
  if inputs:
    features["inputs"] = seqio.Feature(
        vocabulary=vocab, add_eos=add_eos, required=False)
  features["targets"] = seqio.Feature(vocabulary=vocab, add_eos=add_eos)
  return features
