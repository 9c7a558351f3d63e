# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Name mapping from vanilla T5 (or Synthesizer) checkpoints."""

import logging
import os

import gin
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from mtf_synthesizer import checkpoints

ENC = "encoder/block_000/layer_000/"
SYN = ENC + "SynthesizerAttention/"
SELF = ENC + "SelfAttention/"


@pytest.mark.parametrize("graph_name,expected", [
    (ENC + "SynthesizerAttention/q", ENC + "SelfAttention/q"),
    (ENC + "SynthesizerAttention/o_slot_vc", ENC + "SelfAttention/o_slot_vc"),
    (ENC + "SynthesizerAttention/kv", ENC + "SelfAttention/v"),
    (ENC + "SynthesizerAttention/kv_slot_v", ENC + "SelfAttention/v_slot_v"),
    (ENC + "SynthesizerAttention/relative_attention_bias",
     ENC + "SelfAttention/relative_attention_bias"),
    (ENC + "SynthesizerAttention/random/R",
     ENC + "SynthesizerAttention/random/R"),
    (ENC + "SynthesizerAttention/mixture/alpha_logits",
     ENC + "SynthesizerAttention/mixture/alpha_logits"),
    ("decoder/block_000/layer_001/EncDecAttention/q",
     "decoder/block_000/layer_001/EncDecAttention/q"),
    ("shared/embedding", "shared/embedding"),
])
def test_checkpoint_name(graph_name, expected):
  assert checkpoints.checkpoint_name(graph_name) == expected


@pytest.mark.parametrize("graph_name,expected", [
    (SYN + "random/R", True),
    (SYN + "random/R_slot_v", True),
    (SYN + "mixture/alpha_logits", True),
    (SYN + "q", False),
    (SYN + "kv_slot_vr", False),
    ("shared/embedding", False),
])
def test_is_synthesizer_only(graph_name, expected):
  assert checkpoints.is_synthesizer_only(graph_name) == expected


def _save(path, values):
  g = tf.Graph()
  with g.as_default():
    for name, value in values.items():
      tf.get_variable(name, initializer=tf.constant(value))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return tf.train.Saver().save(sess, path)


# A vanilla T5 checkpoint's attention layer (with an Adafactor slot) and the
# graph of a value-only synthesizer mixture (R + kv) that starts from it.
VANILLA = {
    SELF + "q": np.full((4, 6), 1.0, np.float32),
    SELF + "v": np.full((4, 6), 2.0, np.float32),
    SELF + "v_slot_vr": np.full((4,), 3.0, np.float32),
    SELF + "o": np.full((6, 4), 4.0, np.float32),
    "shared/embedding": np.full((10, 4), 5.0, np.float32),
    "global_step": np.int64(7),
}
GRAPH = {
    SYN + "q": [4, 6],
    SYN + "kv": [4, 6],
    SYN + "kv_slot_vr": [4],
    SYN + "o": [6, 4],
    SYN + "random/R": [2, 3, 3],
    SYN + "random/R_slot_v": [2, 3, 3],
    SYN + "mixture/alpha_logits": [2],
    "shared/embedding": [10, 4],
    "global_step": [],
}


def _graph(shapes):
  g = tf.Graph()
  with g.as_default():
    for name, shape in shapes.items():
      if name == "global_step":
        tf.train.get_or_create_global_step()
      else:
        tf.get_variable(name, shape=shape)
  return g


def _map_all(graph, checkpoint, **kwargs):
  """Asks for every variable, as mesh does; returns graph -> ckpt names."""
  with graph.as_default():
    return {v.op.name: checkpoints.vanilla_to_synthesizer(
        v.op.name, checkpoint=checkpoint, **kwargs)
            for v in tf.global_variables()}


@pytest.fixture
def vanilla_ckpt(tmp_path):
  return _save(os.path.join(tmp_path, "vanilla", "model.ckpt"), VANILLA)


@pytest.fixture
def log(caplog):
  caplog.set_level(logging.INFO)
  return caplog


def _summary(caplog):
  lines = [r.getMessage() for r in caplog.records
           if " restored from " in r.getMessage()]
  assert len(lines) == 1, lines
  return lines[0]


def test_vanilla_checkpoint_maps_and_reports(vanilla_ckpt, log):
  names = _map_all(_graph(GRAPH), vanilla_ckpt)
  assert names == {
      SYN + "q": SELF + "q",
      SYN + "kv": SELF + "v",
      SYN + "kv_slot_vr": SELF + "v_slot_vr",
      SYN + "o": SELF + "o",
      SYN + "random/R": SYN + "random/R",
      SYN + "random/R_slot_v": SYN + "random/R_slot_v",
      SYN + "mixture/alpha_logits": SYN + "mixture/alpha_logits",
      "shared/embedding": "shared/embedding",
      "global_step": "global_step",
  }
  fresh = [SYN + "mixture/alpha_logits", SYN + "random/R",
           SYN + "random/R_slot_v"]
  assert _summary(log) == (
      "init_from_t5: 6 restored from %s, 3 fresh: %s" % (
          vanilla_ckpt, ", ".join(fresh)))
  messages = [r.getMessage() for r in log.records]
  assert "init_from_t5: %skv <- %sv" % (SYN, SELF) in messages
  assert ("init_from_t5: %srandom/R is fresh (synthesizer-only, not in %s)"
          % (SYN, vanilla_ckpt)) in messages
  # A new graph (e.g. the next estimator.train call) is resolved again.
  count = len(log.records)
  _map_all(_graph(GRAPH), vanilla_ckpt)
  assert len(log.records) == 2 * count


def test_resolves_once_per_graph(vanilla_ckpt, log):
  graph = _graph(GRAPH)
  _map_all(graph, vanilla_ckpt)
  count = len(log.records)
  _map_all(graph, vanilla_ckpt)  # mesh asks three times about each name
  assert len(log.records) == count


def test_every_missing_name_is_listed(tmp_path):
  """Names the mapping expects, and other graph names, must be restored."""
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      k: v for k, v in VANILLA.items()
      if k not in (SELF + "v_slot_vr", SELF + "q", "shared/embedding")})
  with pytest.raises(ValueError) as error:
    _map_all(_graph(GRAPH), ckpt)
  message = str(error.value)
  assert "3 variable(s) would silently keep their initializers" in message
  for name, looked_for in (
      (SYN + "q", SELF + "q or " + SYN + "q"),
      (SYN + "kv_slot_vr", SELF + "v_slot_vr or " + SYN + "kv_slot_vr"),
      ("shared/embedding", "shared/embedding")):
    assert "  %s (looked for %s)\n" % (name, looked_for) in message
  assert "random/R" not in message  # fresh by design
  assert checkpoints.ALLOW_FRESH in message
  assert "'_slot_'" in message


def test_missing_slots_suggest_allowing_slots(tmp_path):
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      k: v for k, v in VANILLA.items() if "_slot_" not in k})
  with pytest.raises(ValueError, match="--gin_param=\"%s = \\['_slot_'\\]\""
                     % checkpoints.ALLOW_FRESH):
    _map_all(_graph(GRAPH), ckpt)


def test_allow_fresh_opts_in(tmp_path, log):
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      k: v for k, v in VANILLA.items()
      if k not in (SELF + "v_slot_vr", "shared/embedding")})
  names = _map_all(_graph(GRAPH), ckpt,
                   allow_fresh=["_slot_", "^shared/embedding$"])
  assert names[SYN + "kv_slot_vr"] == SELF + "v_slot_vr"  # mesh skips it
  assert _summary(log).startswith(
      "init_from_t5: 4 restored from %s, 5 fresh: " % ckpt)
  assert ("init_from_t5: shared/embedding is fresh (not in %s; allowed by "
          "%s '^shared/embedding$')" % (ckpt, checkpoints.ALLOW_FRESH)) in [
              r.getMessage() for r in log.records]


def test_allow_fresh_through_gin(tmp_path):
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      k: v for k, v in VANILLA.items() if "_slot_" not in k})
  with gin.unlock_config():
    gin.bind_parameter(checkpoints.ALLOW_FRESH, ["_slot_"])
  try:
    names = _map_all(_graph(GRAPH), ckpt)
  finally:
    with gin.unlock_config():
      gin.bind_parameter(checkpoints.ALLOW_FRESH, [])
  assert names[SYN + "q"] == SELF + "q"


def test_synthesizer_checkpoint_restores_under_own_names(tmp_path, log):
  """E.g. GLUE finetuning after Synthesizer pretraining on C4."""
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      name: np.zeros(shape, np.float32) if name != "global_step"
      else np.int64(3) for name, shape in GRAPH.items()})
  names = _map_all(_graph(GRAPH), ckpt)
  assert names == {name: name for name in GRAPH}
  assert _summary(log) == "init_from_t5: 9 restored from %s, 0 fresh" % ckpt


def test_init_variable_filter_and_should_load_variable(vanilla_ckpt):
  resolution = checkpoints.resolve(
      GRAPH, tf.train.load_checkpoint(vanilla_ckpt).get_variable_to_shape_map(),
      vanilla_ckpt, restorable=[SELF + "q", SELF + "o", "global_step"],
      not_asked=["global_step"])
  assert sorted(resolution.restored) == [SYN + "o", SYN + "q"]
  assert resolution.fresh[SYN + "kv"] == (
      SELF + "v is excluded by init_variable_filter")
  assert resolution.fresh["global_step"] == "should_load_variable is False"


def test_shape_mismatch_is_a_clear_error(tmp_path):
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"),
               {ENC + "SelfAttention/q": np.zeros((4, 6), np.float32),
                ENC + "SelfAttention/k": np.zeros((4, 6), np.float32)})
  g = tf.Graph()
  with g.as_default():
    tf.get_variable(ENC + "SynthesizerAttention/q", shape=[4, 8])
    tf.get_variable(ENC + "SynthesizerAttention/k", shape=[4, 6])
    tf.get_variable(ENC + "SynthesizerAttention/random/R", shape=[2, 3, 3])
    # The first question resolves the whole graph, so it already fails.
    with pytest.raises(ValueError, match=r"\[4, 8\].*shape is \[4, 6\]"):
      checkpoints.vanilla_to_synthesizer(
          ENC + "SynthesizerAttention/random/R", checkpoint=ckpt)


def test_name_outside_the_graph_is_resolved_alone(vanilla_ckpt):
  with tf.Graph().as_default():
    assert checkpoints.vanilla_to_synthesizer(
        SYN + "q", checkpoint=vanilla_ckpt) == SELF + "q"
    with pytest.raises(ValueError, match=SYN + "k "):
      checkpoints.vanilla_to_synthesizer(SYN + "k", checkpoint=vanilla_ckpt)


def test_without_a_checkpoint_is_an_error():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="no checkpoint"):
      checkpoints.vanilla_to_synthesizer(SYN + "q")
