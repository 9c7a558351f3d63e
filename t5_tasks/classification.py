# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Document classification, the encoding-only tasks of paper Table 7.

* `synth_ag_news`: TFDS `ag_news_subset:1.0.0`, splits train/test;
  inputs `"ag_news: <title> <description>"`.
* `synth_imdb`: TFDS `imdb_reviews/plain_text:1.0.0`, splits train/test (the
  unlabelled split is left out); inputs `"imdb: <text>"`.

Targets are text, as in t5; a classifier head (encoder-only model) uses the
class id, which is the position of the target in `AG_NEWS_LABELS` /
`IMDB_LABELS` and equals the TFDS `label` (see `label_id`). The postprocessor
maps decoded text to that id (-1 for anything else) before the accuracy.
"""

import functools
from typing import Sequence

import seqio
import tensorflow.compat.v2 as tf

from t5.data import postprocessors
from t5.evaluation import metrics
from t5_tasks import registry

# Index = TFDS label id.
AG_NEWS_LABELS = ("world", "sports", "business", "sci/tech")
IMDB_LABELS = ("negative", "positive")


def label_id(target: str, labels: Sequence[str]) -> int:
  """Returns the class id of a target text (-1 when it is no label).

  Args:
    target: a target (or predicted) text.
    labels: `AG_NEWS_LABELS` or `IMDB_LABELS`.

  Returns:
    The index of `target` in `labels`, or -1.
  """
  return postprocessors.string_label_to_class_id(target, label_classes=labels)


@seqio.map_over_dataset
def _to_text(x, prefix, text_keys, labels):
  texts = [tf.strings.strip(x[k]) for k in text_keys]
  return {
      "inputs": tf.strings.join([prefix] + texts, separator=" "),
      "targets": tf.gather(tf.constant(labels), x["label"]),
  }


def classification_preprocessor(dataset: tf.data.Dataset, prefix: str,
                                text_keys: Sequence[str],
                                labels: Sequence[str]) -> tf.data.Dataset:
  """Maps {text fields, label} to {inputs, targets} text.

  Args:
    dataset: TFDS examples with an integer `label`.
    prefix: task prefix put before the text.
    text_keys: text fields joined (with spaces) after the prefix.
    labels: target text of each label id.

  Returns:
    A dataset of {"inputs", "targets"} strings.
  """
  return _to_text(dataset, prefix=prefix, text_keys=tuple(text_keys),
                  labels=tuple(labels))


def _add(name, tfds_name, prefix, text_keys, labels):
  registry.add_task(
      name,
      source=seqio.TfdsDataSource(tfds_name=tfds_name,
                                  splits=["train", "test"]),
      preprocessors=[
          functools.partial(classification_preprocessor, prefix=prefix,
                            text_keys=text_keys, labels=labels),
          *registry.tokenize_and_eos(),
      ],
      postprocess_fn=functools.partial(
          postprocessors.string_label_to_class_id, label_classes=labels),
      metric_fns=[metrics.accuracy])


_add("synth_ag_news", "ag_news_subset:1.0.0", "ag_news:",
     ("title", "description"), AG_NEWS_LABELS)
_add("synth_imdb", "imdb_reviews/plain_text:1.0.0", "imdb:", ("text",),
     IMDB_LABELS)
