# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Tests of the `t5_tasks` package: vocabulary, tasks, mixtures, metrics.

Everything runs offline: TFDS datasets are replaced by generated examples
(`tfds.testing.mock_data`) and the vocabulary by `seqio.ByteVocabulary`
(id = byte + 3, EOS = 1) or the SentencePiece model shipped inside seqio.
"""
# pylint: disable=redefined-outer-name

import importlib
import json
import math
import os
import pickle

import gin
import numpy as np
import pytest
import seqio
import sentencepiece
import tensorflow as tf
import tensorflow_datasets as tfds

import t5_tasks
from t5_tasks import c4
from t5_tasks import classification
from t5_tasks import dialogue
from t5_tasks import glue
from t5_tasks import lm
from t5_tasks import metrics
from t5_tasks import mixtures
from t5_tasks import registry
from t5_tasks import summarization
from t5_tasks import translation
from t5_tasks import vocabulary

EOS = 1
BYTE_OFFSET = 3
BYTE_VOCAB_SIZE = 256 + 3 + 100
SEQ = {"inputs": 512, "targets": 128}

GLUE = ["cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "mnli_mismatched",
        "mnli_matched", "qnli", "rte", "wnli", "ax"]
SUPER_GLUE = ["boolq", "cb", "copa", "multirc", "record", "rte", "wic", "axb",
              "axg"]
EXPECTED_TASKS = (
    ["synth_glue_" + c for c in GLUE] +
    ["synth_super_glue_" + c for c in SUPER_GLUE] +
    ["synth_super_glue_wsc_simple_train", "synth_super_glue_wsc_simple_eval",
     "synth_dpr_simple", "synth_c4_span_corruption", "synth_ag_news",
     "synth_imdb", "synth_lm1b", "synth_wmt14_ende", "synth_wmt14_enfr",
     "synth_cnn_dailymail", "synth_personachat", "listops"])
EXPECTED_MIXTURES = ["synth_glue_proportional",
                     "synth_super_glue_proportional",
                     "synth_glue_super_glue_proportional", "synth_en_mix"]


def _set_env(name, value):
  if value is None:
    os.environ.pop(name, None)
  else:
    os.environ[name] = value


@pytest.fixture
def clean_vocab():
  """Unset env and gin choice; restore both afterwards."""
  old = os.environ.get(vocabulary.ENV_VAR)
  os.environ.pop(vocabulary.ENV_VAR, None)
  vocabulary.reset_vocabulary()
  yield
  gin.bind_parameter("t5_tasks.vocabulary.get_vocabulary.name", None)
  gin.bind_parameter("t5_tasks.vocabulary.get_vocabulary.extra_ids",
                     vocabulary.DEFAULT_EXTRA_IDS)
  _set_env(vocabulary.ENV_VAR, old)
  vocabulary.reset_vocabulary()


@pytest.fixture(scope="module")
def mock_tfds(byte_vocab):
  del byte_vocab
  with tfds.testing.mock_data(num_examples=3):
    yield


def _spm_path():
  return seqio.test_utils.sentencepiece_vocab().sentencepiece_model_file


def _byte_text(ids):
  return bytes(int(i) - BYTE_OFFSET for i in ids).decode("utf-8", "replace")


def _examples(task_name, split, seq=None, task=None):
  task = task or seqio.get_mixture_or_task(task_name)
  ds = task.get_dataset(seq or SEQ, split=split, shuffle=False,
                        use_cached=False, try_in_mem_cache=False)
  return list(ds.as_numpy_iterator())


# ------------------------------- registry -----------------------------------


def test_registry_holds_every_task_and_mixture():
  tasks = set(seqio.TaskRegistry.names())
  for name in EXPECTED_TASKS:
    assert name in tasks, name
  mixtures = set(seqio.MixtureRegistry.names())
  for name in EXPECTED_MIXTURES:
    assert name in mixtures, name
  # t5's own tasks stay registered under their names.
  assert "glue_cola_v002" in tasks and "en_mix" in mixtures
  for name in EXPECTED_TASKS:
    features = seqio.get_mixture_or_task(name).output_features
    for feature in features.values():
      assert isinstance(feature.vocabulary, vocabulary.LazyVocabulary), name


@pytest.mark.usefixtures("clean_vocab")
def test_registration_does_not_choose_vocabulary():
  # With a vocabulary that cannot be built, registering the tasks again and
  # building every mixture (seqio compares the tasks' vocabularies) must not
  # touch it; the first real use must fail.
  import t5.models.utils  # pylint: disable=g-import-not-at-top
  os.environ[vocabulary.ENV_VAR] = "/nonexistent/spm.model"
  for module in (c4, classification, glue, lm, mixtures, summarization,
                 translation):
    importlib.reload(module)
  for name in EXPECTED_MIXTURES:
    assert seqio.get_mixture_or_task(name).tasks
  t5.models.utils.get_vocabulary("synth_glue_super_glue_proportional")
  assert not vocabulary.is_resolved()
  with pytest.raises(ValueError, match="/nonexistent/spm.model"):
    _ = vocabulary.VOCABULARY.vocab_size


def test_mixture_rates_are_training_set_sizes():
  mix = seqio.get_mixture_or_task("synth_glue_super_glue_proportional")
  rates = {t.name: mix.get_rate(t) for t in mix.tasks}
  # Training-set sizes of the datasets (GLUE / SuperGLUE papers, T5).
  assert rates["synth_glue_cola"] == 8551
  assert rates["synth_glue_sst2"] == 67349
  assert rates["synth_glue_rte"] == 2490
  assert rates["synth_super_glue_boolq"] == 9427
  assert rates["synth_super_glue_cb"] == 250
  assert rates["synth_super_glue_copa"] == 400
  assert rates["synth_super_glue_wic"] == 5428
  assert rates["synth_glue_mnli_matched"] == 0  # evaluation only
  assert "synth_glue_wnli" not in rates  # T5 trains on WSC/DPR instead
  assert len(rates) == 11 + 12
  en_mix = seqio.get_mixture_or_task("synth_en_mix")
  en_rates = {t.name: en_mix.get_rate(t) for t in en_mix.tasks}
  assert en_rates["synth_c4_span_corruption"] == 1e6
  assert {k: v for k, v in en_rates.items()
          if k != "synth_c4_span_corruption"} == rates


def test_glue_tasks_follow_the_tfds_builders_as_t5s_do():
  """A config TFDS adds to a builder gets its task where t5 defines one."""
  names = set(seqio.TaskRegistry.names())
  for prefix, builder, t5_name in (
      ("synth_glue_", tfds.text.glue.Glue, "glue_%s_v002"),
      ("synth_super_glue_", tfds.text.super_glue.SuperGlue,
       "super_glue_%s_v102")):
    for config in builder.builder_configs.values():
      assert (prefix + config.name in names) == (
          t5_name % config.name in names), config.name
  assert "synth_super_glue_wsc" not in names  # t5's simplified WSC instead


def test_one_naming_rule_for_every_task_and_mixture():
  offline = {"listops", "key_presence", "key_value_recall",
             "pydocs_span_corruption", "pydocs_lm"}
  for name in sorted(set(EXPECTED_TASKS + EXPECTED_MIXTURES) | offline):
    provider = seqio.get_mixture_or_task(name)
    registry.check_name(provider)
    defaults = {f.vocabulary.default
                for f in provider.output_features.values()}
    assert defaults == ({"byte"} if name in offline else {"t5"}), name
  source = seqio.get_mixture_or_task("synth_lm1b").source
  offline_features = vocabulary.output_features(
      vocab=vocabulary.OFFLINE_VOCABULARY)
  before = (set(seqio.TaskRegistry.names()),
            set(seqio.MixtureRegistry.names()))
  with pytest.raises(ValueError, match="must start with 'synth_'"):
    registry.add_task("lm1b_copy", source, [])
  with pytest.raises(ValueError, match="must start with 'synth_'"):
    registry.add_mixture("cola_mix", ["synth_glue_cola"], default_rate=1.0)
  with pytest.raises(ValueError, match="snake_case"):
    registry.add_task("Bytes", source, [], output_features=offline_features)
  for taken in ("glue_cola_v002", "en_mix"):  # t5's
    with pytest.raises(ValueError, match="registered by another package"):
      registry.add_task(taken, source, [], output_features=offline_features)
  assert (set(seqio.TaskRegistry.names()),
          set(seqio.MixtureRegistry.names())) == before
  # Re-registering one of ours replaces it.
  old = seqio.get_mixture_or_task("synth_lm1b")
  new = registry.register(old.replace(name="synth_lm1b"))
  assert seqio.get_mixture_or_task("synth_lm1b") is new is not old


# ------------------------------ vocabulary ----------------------------------


@pytest.mark.usefixtures("clean_vocab")
def test_default_is_t5_sentencepiece():
  vocab = vocabulary.get_vocabulary()
  assert isinstance(vocab, seqio.SentencePieceVocabulary)
  assert vocab.sentencepiece_model_file == (
      "gs://t5-data/vocabs/cc_all.32000/sentencepiece.model")
  assert vocab._extra_ids == 100  # pylint: disable=protected-access


@pytest.mark.usefixtures("clean_vocab")
def test_env_byte():
  os.environ[vocabulary.ENV_VAR] = "byte"
  lazy = vocabulary.VOCABULARY
  assert lazy.vocab_size == BYTE_VOCAB_SIZE
  assert lazy.eos_id == 1 and lazy.pad_id == 0 and lazy.unk_id == 2
  assert list(lazy.encode("Hi")) == [ord("H") + 3, ord("i") + 3]
  assert lazy.decode([ord("o") + 3, ord("k") + 3, 1, 50]) == "ok"
  ids = lazy.encode_tf(tf.constant("ab")).numpy().tolist()
  assert ids == [100, 101]
  assert lazy == seqio.ByteVocabulary(extra_ids=100)
  assert lazy != seqio.ByteVocabulary(extra_ids=0)


@pytest.mark.usefixtures("clean_vocab")
def test_env_path_matches_sentencepiece():
  path = _spm_path()
  os.environ[vocabulary.ENV_VAR] = path
  processor = sentencepiece.SentencePieceProcessor(model_file=path)
  text = "the quick brown fox"
  lazy = vocabulary.VOCABULARY
  assert list(lazy.encode(text)) == processor.encode(text)
  assert lazy.vocab_size == processor.get_piece_size() + 100
  assert lazy.sentencepiece_model_file == path  # attribute of the delegate
  ids = processor.encode(text)
  assert lazy.decode(ids + [1, 5]) == processor.decode(ids)


@pytest.mark.usefixtures("clean_vocab")
def test_gin_overrides_env():
  os.environ[vocabulary.ENV_VAR] = _spm_path()
  gin.bind_parameter("t5_tasks.vocabulary.get_vocabulary.name", "byte")
  gin.bind_parameter("t5_tasks.vocabulary.get_vocabulary.extra_ids", 7)
  assert vocabulary.VOCABULARY.vocab_size == 256 + 3 + 7
  assert isinstance(vocabulary.VOCABULARY.delegate, seqio.ByteVocabulary)


@pytest.mark.usefixtures("clean_vocab")
def test_gin_file_syntax():
  gin.parse_config(
      f"t5_tasks.vocabulary.get_vocabulary.name = '{_spm_path()}'")
  assert isinstance(vocabulary.VOCABULARY.delegate,
                    seqio.SentencePieceVocabulary)


@pytest.mark.usefixtures("clean_vocab")
def test_choice_is_made_once_and_reset():
  os.environ[vocabulary.ENV_VAR] = "byte"
  assert vocabulary.VOCABULARY.vocab_size == BYTE_VOCAB_SIZE
  os.environ[vocabulary.ENV_VAR] = _spm_path()
  assert vocabulary.VOCABULARY.vocab_size == BYTE_VOCAB_SIZE  # kept
  vocabulary.reset_vocabulary()
  assert vocabulary.VOCABULARY.vocab_size != BYTE_VOCAB_SIZE


@pytest.mark.usefixtures("clean_vocab")
def test_bad_path_fails_clearly():
  os.environ[vocabulary.ENV_VAR] = "/no/such/file.model"
  with pytest.raises(ValueError, match="MTF_SYNTH_VOCAB"):
    _ = vocabulary.VOCABULARY.eos_id


@pytest.mark.usefixtures("clean_vocab")
def test_equality_hash_and_pickle():
  a, b = vocabulary.LazyVocabulary(), vocabulary.LazyVocabulary()
  assert a == b and not a != b  # pylint: disable=unneeded-not
  assert not vocabulary.is_resolved()
  assert hash(a) == hash(b)
  feature = seqio.get_mixture_or_task("synth_glue_cola").output_features[
      "targets"]
  assert hash(feature) == hash(feature)
  assert not vocabulary.is_resolved()
  # Unresolved pickles stay lazy.
  assert pickle.loads(pickle.dumps(a))._pinned is None  # pylint: disable=protected-access
  os.environ[vocabulary.ENV_VAR] = "byte"
  assert a.vocab_size == BYTE_VOCAB_SIZE
  copy = pickle.loads(pickle.dumps(a))
  # The copy keeps the byte vocabulary after the process-wide choice changes.
  vocabulary.reset_vocabulary()
  os.environ[vocabulary.ENV_VAR] = _spm_path()
  assert copy.vocab_size == BYTE_VOCAB_SIZE
  assert a.vocab_size != BYTE_VOCAB_SIZE
  assert copy != a


@pytest.mark.usefixtures("clean_vocab")
def test_mesh_get_vocabulary():
  import mesh_tensorflow.transformer.utils as mtf_utils  # pylint: disable=g-import-not-at-top
  import t5.models.utils  # pylint: disable=g-import-not-at-top
  os.environ[vocabulary.ENV_VAR] = "byte"
  pair = t5.models.utils.get_vocabulary("synth_glue_super_glue_proportional")
  assert isinstance(pair, tuple)
  assert mtf_utils.inputs_vocabulary(pair).vocab_size == BYTE_VOCAB_SIZE
  assert mtf_utils.targets_vocabulary(pair).vocab_size == BYTE_VOCAB_SIZE
  single = t5.models.utils.get_vocabulary("synth_lm1b")
  assert single.vocab_size == BYTE_VOCAB_SIZE
  decoded = single.decode_tf(tf.constant([[ord("a") + 3, 1, 9]]))
  assert decoded.numpy().tolist() == [b"a"]


# ------------------------ preprocessing on mock data -------------------------


MOCK_TASKS = (
    [("synth_glue_" + c, "validation") for c in GLUE if c != "ax"] +
    [("synth_glue_ax", "test")] +
    [("synth_super_glue_" + c, "validation") for c in SUPER_GLUE
     if c not in ("axb", "axg")] +
    [("synth_super_glue_axb", "test"), ("synth_super_glue_axg", "test"),
     ("synth_dpr_simple", "test"),
     ("synth_ag_news", "test"), ("synth_imdb", "test"), ("synth_lm1b", "test"),
     ("synth_wmt14_ende", "validation"), ("synth_wmt14_enfr", "validation"),
     ("synth_cnn_dailymail", "validation")])


@pytest.mark.parametrize("name,split", MOCK_TASKS)
@pytest.mark.usefixtures("mock_tfds")
def test_preprocessing_on_mock_data(name, split):
  task = seqio.get_mixture_or_task(name)
  examples = _examples(name, split)
  assert examples, name
  for ex in examples:
    for key in task.output_features:
      if key not in ex:
        assert not task.output_features[key].required, (name, key)
        continue
      ids = ex[key]
      assert ids.dtype == np.int32 and ids.ndim == 1
      assert 1 < len(ids) <= SEQ[key]
      assert ids[-1] == EOS  # EOS last, also after truncation
      assert EOS not in ids[:-1] and 0 not in ids
      assert ids.max() < BYTE_VOCAB_SIZE
      text = ex[key + "_pretokenized"].decode()
      body = ids[:-1]
      assert text.encode().startswith(bytes(int(i) - 3 for i in body))
      if len(ids) < SEQ[key]:
        assert _byte_text(body) == text


@pytest.mark.usefixtures("mock_tfds")
def test_glue_and_translation_formats():
  for ex in _examples("synth_glue_cola", "validation"):
    assert ex["inputs_pretokenized"].startswith(b"cola sentence: ")
    assert ex["targets_pretokenized"] in (b"acceptable", b"unacceptable")
  for ex in _examples("synth_glue_stsb", "validation"):
    value = float(ex["targets_pretokenized"])
    assert 0 <= value <= 5 and abs(value * 5 - round(value * 5)) < 1e-6
  for ex in _examples("synth_super_glue_cb", "validation"):
    assert ex["targets_pretokenized"] in (
        b"entailment", b"contradiction", b"neutral")
  for ex in _examples("synth_wmt14_ende", "validation"):
    assert ex["inputs_pretokenized"].startswith(
        b"translate English to German: ")
  for ex in _examples("synth_wmt14_enfr", "validation"):
    assert ex["inputs_pretokenized"].startswith(
        b"translate English to French: ")
  for ex in _examples("synth_cnn_dailymail", "validation"):
    assert ex["inputs_pretokenized"].startswith(b"summarize: ")


@pytest.mark.usefixtures("mock_tfds")
def test_lm1b_is_targets_only():
  task = seqio.get_mixture_or_task("synth_lm1b")
  assert set(task.output_features) == {"targets"}
  raw = list(task.source.get_dataset("test", shuffle=False)
             .as_numpy_iterator())
  for ex, source in zip(_examples("synth_lm1b", "test"), raw):
    assert "inputs" not in ex
    assert ex["targets_pretokenized"] == source["text"]


@pytest.mark.parametrize("name,labels,keys", [
    ("synth_ag_news", ["world", "sports", "business", "sci/tech"],
     ["title", "description"]),
    ("synth_imdb", ["negative", "positive"], ["text"]),
])
@pytest.mark.usefixtures("mock_tfds")
def test_classification_label_mapping(name, labels, keys):
  # TFDS class order: ag_news_subset World, Sports, Business, Sci/Tech;
  # imdb_reviews neg, pos.
  task = seqio.get_mixture_or_task(name)
  assert set(task.splits) == {"train", "test"}
  raw = list(task.source.get_dataset("test", shuffle=False)
             .as_numpy_iterator())
  processed = _examples(name, "test", seq={"inputs": 4096, "targets": 32})
  assert len(raw) == len(processed) > 0
  prefix = name.split("_", 1)[1] + ":"
  for source, ex in zip(raw, processed):
    target = ex["targets_pretokenized"].decode()
    assert target == labels[source["label"]]
    assert classification.label_id(target, tuple(labels)) == source["label"]
    expected = " ".join([prefix] + [source[k].decode().strip() for k in keys])
    assert ex["inputs_pretokenized"].decode() == expected
    assert task.postprocess_fn(target, example=ex, is_target=True) == (
        source["label"])


def test_classification_preprocessor_on_known_rows():
  ds = tf.data.Dataset.from_tensor_slices({
      "title": ["Cup final", " Chips "], "description": ["Won 2-1", "up"],
      "label": [1, 3]})
  out = list(classification.classification_preprocessor(
      ds, "ag_news:", ("title", "description"),
      classification.AG_NEWS_LABELS).as_numpy_iterator())
  assert out == [
      {"inputs": b"ag_news: Cup final Won 2-1", "targets": b"sports"},
      {"inputs": b"ag_news: Chips up", "targets": b"sci/tech"}]


@pytest.mark.usefixtures("mock_tfds")
def test_c4_span_corruption_reconstructs_text():
  task = seqio.get_mixture_or_task("synth_c4_span_corruption")
  assert task.source.tfds_dataset.name == "c4/en:3.1.0"
  raw = [ex["text"] for ex in task.source.get_dataset(
      "validation", shuffle=False).as_numpy_iterator()]
  examples = _examples("synth_c4_span_corruption", "validation",
                       seq={"inputs": 64, "targets": 32})
  assert examples
  first_sentinel = BYTE_VOCAB_SIZE - 1
  for ex in examples:
    for key in ("inputs", "targets"):
      assert ex[key].dtype == np.int32 and ex[key][-1] == EOS
      assert EOS not in ex[key][:-1] and 0 not in ex[key]
      assert ex[key].max() < BYTE_VOCAB_SIZE
    inputs, targets = list(ex["inputs"][:-1]), list(ex["targets"][:-1])
    sentinels = [i for i in inputs if i >= 259]
    assert sentinels and sentinels[0] == first_sentinel
    assert sentinels == list(range(first_sentinel,
                                   first_sentinel - len(sentinels), -1))
    assert targets[0] == first_sentinel
    # Put the target spans back in place of the sentinels.
    spans, current = {}, None
    for i in targets:
      if i >= 259:
        current = i
        spans[current] = []
      else:
        spans[current].append(i)
    rebuilt = []
    for i in inputs:
      rebuilt.extend(spans[i] if i >= 259 else [i])
    noise = sum(len(s) for s in spans.values())
    assert 0 < noise / len(rebuilt) < 0.4  # about 15% masked
    text = bytes(i - 3 for i in rebuilt)
    # Span corruption concatenates documents before cutting them to length.
    assert text in b"".join(raw)


@pytest.mark.usefixtures("byte_vocab")
def test_wsc_simple_on_known_example():
  sentence = ("Mark told Pete many lies about himself, which Pete included "
              "in his book. He should have been more truthful.")

  def dataset_fn(split, shuffle_files, seed=None):
    del split, shuffle_files, seed
    return tf.data.Dataset.from_tensors({
        "text": sentence, "span1_index": 0, "span1_text": "Mark",
        "span2_index": 13, "span2_text": "He", "label": 1, "idx": 0})

  source = seqio.FunctionDataSource(dataset_fn, splits=["train"])
  task = seqio.get_mixture_or_task("synth_super_glue_wsc_simple_train")
  (ex,) = _examples(None, "train", task=task.replace(source=source))
  assert ex["inputs_pretokenized"].decode() == (
      "wsc: Mark told Pete many lies about himself, which Pete included in "
      "his book. *He* should have been more truthful.")
  assert ex["targets_pretokenized"] == b"Mark"
  assert list(ex["targets"]) == [ord(c) + 3 for c in "Mark"] + [EOS]


# ------------------------------ PersonaChat ---------------------------------


@pytest.fixture
def persona_dir(tmp_path):
  rows = [
      {"persona": ["i like cats.", "i am a nurse."],
       "context": ["hi !", "hello , how are you ?"],
       "response": "great , just fed my cat ."},
      {"context": "what do you do ?", "response": "i am a nurse ."},
  ]
  (tmp_path / "train.jsonl").write_text(
      "\n".join(json.dumps(r) for r in rows) + "\n\n")
  (tmp_path / "validation.tsv").write_text(
      "hi there | how is it going ?\tfine , thanks .\n")
  old = os.environ.get(dialogue.ENV_VAR)
  os.environ[dialogue.ENV_VAR] = str(tmp_path)
  yield tmp_path
  _set_env(dialogue.ENV_VAR, old)


@pytest.mark.usefixtures("byte_vocab")
def test_personachat_formats(persona_dir):
  train = _examples("synth_personachat", "train")
  assert [ex["inputs_pretokenized"].decode() for ex in train] == [
      "persona: i like cats. i am a nurse. context: hi ! | hello , how are "
      "you ?",
      "context: what do you do ?"]
  assert [ex["targets_pretokenized"].decode() for ex in train] == [
      "great , just fed my cat .", "i am a nurse ."]
  assert list(train[1]["targets"]) == [
      ord(c) + 3 for c in "i am a nurse ."] + [EOS]
  (val,) = _examples("synth_personachat", "validation")
  assert val["inputs_pretokenized"] == b"context: hi there | how is it going ?"
  assert val["targets_pretokenized"] == b"fine , thanks ."
  with pytest.raises(FileNotFoundError, match="test.jsonl"):
    _examples("synth_personachat", "test")


def test_personachat_errors(persona_dir):
  (persona_dir / "test.tsv").write_text("only one field\n")
  with pytest.raises(ValueError, match="test.tsv:1"):
    dialogue.read_examples(str(persona_dir / "test.tsv"))
  (persona_dir / "test.jsonl").write_text('{"context": "x"}\n')
  with pytest.raises(ValueError, match="test.jsonl:1"):
    dialogue.read_examples(str(persona_dir / "test.jsonl"))
  os.environ.pop(dialogue.ENV_VAR)
  with pytest.raises(FileNotFoundError, match="MTF_SYNTH_PERSONACHAT_DIR"):
    dialogue.split_file("train")
  os.environ[dialogue.ENV_VAR] = str(persona_dir / "missing")
  with pytest.raises(FileNotFoundError, match="does not exist"):
    dialogue.split_file("train")


# -------------------------------- metrics -----------------------------------


def _score(name, targets, predictions):
  """Postprocesses like seqio's evaluator and runs the task's metrics."""
  task = seqio.get_mixture_or_task(name)
  post = lambda s, **kw: task.postprocess_fn(s, example={}, **kw)
  t = [post(x, is_target=True) for x in targets]
  p = [post(x, is_target=False) for x in predictions]
  out = {}
  for fn in task.predict_metric_fns:
    out.update(fn(t, p))
  return out


def test_glue_metrics_by_hand():
  # CoLA: TP=1 FN=1 TN=2 FP=0 -> MCC = 2 / sqrt(1*2*2*3).
  out = _score("synth_glue_cola",
               ["acceptable", "acceptable", "unacceptable", "unacceptable"],
               ["acceptable", "unacceptable", "unacceptable", "unacceptable"])
  assert out["matthews_corrcoef"] == pytest.approx(100 * 2 / math.sqrt(12))
  # MRPC: an unparsable prediction counts as wrong -> TP=1 FP=1 FN=1.
  out = _score("synth_glue_mrpc",
               ["equivalent", "equivalent", "not_equivalent",
                "not_equivalent"],
               ["equivalent", "not_equivalent", "not_equivalent", "banana"])
  assert out["f1"] == pytest.approx(50.0)
  assert out["accuracy"] == pytest.approx(50.0)
  # STS-B: Pearson of (1,2,3) and (1,2,4) = 3 / (sqrt(2) * sqrt(42)/3).
  out = _score("synth_glue_stsb", ["1.0", "2.0", "3.0"], ["1.0", "2.0", "4.0"])
  assert out["pearson_corrcoef"] == pytest.approx(
      100 * 9 / math.sqrt(84), rel=1e-6)
  assert out["spearman_corrcoef"] == pytest.approx(100.0)
  out = _score("synth_super_glue_boolq", ["True", "False", "True"],
               ["True", "True", "True"])
  assert out["accuracy"] == pytest.approx(200 / 3)


def test_classification_accuracy():
  out = _score("synth_ag_news", ["world", "sports", "business", "sci/tech"],
               ["world", "business", "business", "Sci/Tech"])
  assert out == {"accuracy": pytest.approx(50.0)}  # case matters
  out = _score("synth_imdb", ["positive", "negative"], ["positive", "pos"])
  assert out == {"accuracy": pytest.approx(50.0)}


def test_bleu_and_rouge_by_hand():
  out = _score("synth_wmt14_ende", ["ein kleiner test ."],
               ["ein kleiner test ."])
  assert out["bleu"] == pytest.approx(100.0)
  # All n-gram precisions 1, brevity penalty exp(1 - 6/4).
  out = _score("synth_personachat", ["a b c d e f"], ["a b c d"])
  assert out["bleu"] == pytest.approx(100 * math.exp(-0.5), abs=1e-3)
  # ROUGE-L: LCS 5 of 6 reference / 5 predicted words -> F = 10/11.
  out = _score("synth_cnn_dailymail", ["the cat sat on the mat"],
               ["the cat on the mat"])
  assert out["rougeL"] == pytest.approx(100 * 10 / 11, abs=1e-3)
  assert out["rouge1"] == pytest.approx(100 * 10 / 11, abs=1e-3)
  # ROUGE-2: bigrams ref 5, pred 4, common 3 (the cat, on the, the mat).
  assert out["rouge2"] == pytest.approx(100 * 2 * 3 / 9, abs=1e-3)


def test_personachat_reports_the_papers_metrics():
  # Table 3: BLEU-4, ROUGE-L, METEOR, CIDEr (hand-worked values of the last
  # two are in test_metrics.py).
  task = seqio.get_mixture_or_task("synth_personachat")
  assert metrics.meteor in task.predict_metric_fns
  assert metrics.cider in task.predict_metric_fns
  targets, predictions = ["a b c d", "e f g h"], ["d c b a", "e f g h"]
  out = _score("synth_personachat", targets, predictions)
  # METEOR 1.5 with Java, else its exact-match module under its own name.
  meteor = "meteor" if metrics.java_available() else "meteor_exact"
  assert {"bleu", "rougeL", meteor, "cider"} <= set(out)
  assert out[meteor] == pytest.approx(
      metrics.meteor(targets, predictions)[meteor])
  # CIDEr-D, x100: reversed shares only unigrams (cosine 1, orders 2-4: 0);
  # identical: 1 for all four orders.
  assert out["cider"] == pytest.approx(100 * (10 / 4 + 10) / 2)


@pytest.mark.usefixtures("clean_vocab")
def test_perplexity_by_hand():
  os.environ[vocabulary.ENV_VAR] = "byte"
  task = seqio.get_mixture_or_task("synth_lm1b")
  assert task.score_metric_fns == [metrics.perplexity]
  assert not task.predict_metric_fns
  # "abc" = 3 bytes + EOS, "de" = 2 + EOS: 7 tokens, each with p = 1/2.
  out = metrics.perplexity(["abc", "de"], [-4 * math.log(2), -3 * math.log(2)])
  assert out["perplexity"] == pytest.approx(2.0)
  assert out["neg_log_perplexity"] == pytest.approx(-math.log(2))
  assert out["num_tokens"] == 7
  with pytest.raises(ValueError):
    metrics.perplexity(["a"], [])


def test_package_exports_modules():
  for module in ("c4", "classification", "dialogue", "glue", "listops", "lm",
                 "mixtures", "summarization", "translation", "vocabulary"):
    assert hasattr(t5_tasks, module)
