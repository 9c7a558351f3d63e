# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Starting from T5 (t5_attention) or Synthesizer checkpoints: the name
mapping and the restore step (`checkpoints/from_t5.py`)."""

import inspect
import logging
import os

import gin
from mesh_tensorflow.transformer import utils as mtf_utils
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


# A T5 (t5_attention) checkpoint's attention layer (with an Adafactor slot)
# and the graph of a value-only synthesizer mixture (R + kv) that starts from
# it.
T5_ATTENTION = {
    SELF + "q": np.full((4, 6), 1.0, np.float32),
    SELF + "v": np.full((4, 6), 2.0, np.float32),
    SELF + "v_slot_vr": np.full((4,), 3.0, np.float32),
    SELF + "o_slot_vc": np.full((4,), 3.5, np.float32),  # not in GRAPH
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


def _graph(shapes, dtype=tf.float32, resource=None):
  """A graph of `shapes`' variables (global_step as TF makes it)."""
  g = tf.Graph()
  with g.as_default():
    for name, shape in shapes.items():
      if name == "global_step":
        tf.train.get_or_create_global_step()
      else:
        tf.get_variable(name, shape=shape, dtype=dtype, use_resource=resource)
  return g


def _map_all(graph, checkpoint, **kwargs):
  """Asks the restore step, then the mapping, about every variable, as mesh
  does (with init_from_t5.gin); returns graph -> ckpt names."""
  with graph.as_default():
    names = [v.op.name for v in tf.global_variables()]
    for name in names:
      checkpoints.restore_with_casts(name, checkpoint=checkpoint, **kwargs)
    return {name: checkpoints.vanilla_to_synthesizer(
        name, checkpoint=checkpoint) for name in names}


def _collections(graph):
  """Every collection of a graph, by key, and its number of operations."""
  return ({key: list(graph.get_collection(key))
           for key in graph.get_all_collection_keys()},
          len(graph.get_operations()))


def test_the_mapping_is_a_pure_mapping(t5_attention_ckpt):
  """Asked twice, in any order, it answers the same and changes no graph
  collection (nor adds an op)."""
  graph = _graph(GRAPH)
  with graph.as_default():
    names = [v.op.name for v in tf.global_variables()]
    before = _collections(graph)
    first = {n: checkpoints.vanilla_to_synthesizer(
        n, checkpoint=t5_attention_ckpt) for n in names}
    second = {n: checkpoints.vanilla_to_synthesizer(
        n, checkpoint=t5_attention_ckpt) for n in reversed(names)}
    assert _collections(graph) == before
    assert not tf.get_collection(tf.GraphKeys.INIT_OP)
  assert first == second
  assert first[SYN + "kv"] == SELF + "v"
  assert first[SYN + "random/R"] == SYN + "random/R"
  # Outside any graph, the same answers.
  with tf.Graph().as_default():
    assert checkpoints.vanilla_to_synthesizer(
        SYN + "kv", checkpoint=t5_attention_ckpt) == SELF + "v"


def test_the_restore_step_sets_the_init_op_once(t5_attention_ckpt):
  graph = _graph(GRAPH)
  with graph.as_default():
    for _ in range(2):
      assert checkpoints.restore_with_casts(
          SYN + "q", checkpoint=t5_attention_ckpt) is True
    ops = tf.get_collection(tf.GraphKeys.INIT_OP)
    assert len(ops) == 1
    count = len(graph.get_operations())
    checkpoints.restore_with_casts(SYN + "kv", checkpoint=t5_attention_ckpt)
    assert tf.get_collection(tf.GraphKeys.INIT_OP) == ops
    assert len(graph.get_operations()) == count


def test_the_restore_step_passes_a_filter_on(t5_attention_ckpt, log):
  """A filter of the user's (restore_with_casts.filter_fn): what it refuses
  starts fresh, and mesh is told so."""
  def refuse(name):
    return name != "global_step"

  with _graph(GRAPH).as_default():
    assert not checkpoints.restore_with_casts(
        "global_step", checkpoint=t5_attention_ckpt, filter_fn=refuse)
    assert checkpoints.restore_with_casts(
        SYN + "q", checkpoint=t5_attention_ckpt, filter_fn=refuse)
  assert "init_from_t5: global_step is fresh (should_load_variable is " \
      "False)" in [r.getMessage() for r in log.records]


@pytest.fixture
def t5_attention_ckpt(tmp_path):
  return _save(os.path.join(tmp_path, "t5_attention", "model.ckpt"),
               T5_ATTENTION)


@pytest.fixture
def log(caplog):
  caplog.set_level(logging.INFO)
  return caplog


def _plan(caplog):
  """The one line logged while the graph is built."""
  lines = [r.getMessage() for r in caplog.records
           if r.getMessage().startswith("init_from_t5: restoring ")]
  assert len(lines) == 1, lines
  return lines[0]


def test_t5_attention_checkpoint_maps_and_reports(t5_attention_ckpt, log):
  names = _map_all(_graph(GRAPH), t5_attention_ckpt)
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
  assert _plan(log) == (
      "init_from_t5: restoring 6 from %s, 3 fresh: %s" % (
          t5_attention_ckpt, ", ".join(fresh)))
  messages = [r.getMessage() for r in log.records]
  assert "init_from_t5: %skv <- %sv" % (SYN, SELF) in messages
  assert ("init_from_t5: %srandom/R is fresh (synthesizer-only, not in %s)"
          % (SYN, t5_attention_ckpt)) in messages
  # A new graph (e.g. the next estimator.train call) is resolved again.
  count = len(log.records)
  _map_all(_graph(GRAPH), t5_attention_ckpt)
  assert len(log.records) == 2 * count


def test_resolves_once_per_graph(t5_attention_ckpt, log):
  graph = _graph(GRAPH)
  _map_all(graph, t5_attention_ckpt)
  count = len(log.records)
  _map_all(graph, t5_attention_ckpt)  # mesh asks three times about each name
  assert len(log.records) == count


def test_every_missing_name_is_listed(tmp_path):
  """Names the mapping expects, and other graph names, must be restored."""
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      k: v for k, v in T5_ATTENTION.items()
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
      k: v for k, v in T5_ATTENTION.items() if k != SELF + "v_slot_vr"})
  with pytest.raises(ValueError, match="--gin_param=\"%s = \\['_slot_'\\]\""
                     % checkpoints.ALLOW_FRESH):
    _map_all(_graph(GRAPH), ckpt)


def test_checkpoint_without_slots_starts_them_fresh(tmp_path, log):
  """Released checkpoints may hold no optimizer slots at all."""
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      k: v for k, v in T5_ATTENTION.items() if "_slot_" not in k})
  _map_all(_graph(GRAPH), ckpt)
  assert "init_from_t5: %skv_slot_vr is fresh (%s holds no optimizer slots)" % (
      SYN, ckpt) in [r.getMessage() for r in log.records]


@pytest.mark.parametrize("name,alias", [
    ("encoder/block_000/layer_001/rms_norm/scale",
     "encoder/block_000/layer_001/layer_norm/scale"),
    ("decoder/block_011/layer_002/layer_norm/scale_slot_v",
     "decoder/block_011/layer_002/rms_norm/scale_slot_v"),
    ("encoder/rms_norm/scale", "encoder/final_layer_norm/scale"),
    ("decoder/final_layer_norm/scale", "decoder/rms_norm/scale"),
    ("transformer/rms_norm/scale_slot_v",
     "transformer/final_layer_norm/scale_slot_v"),
])
def test_norm_aliases_both_ways(name, alias):
  assert checkpoints.norm_aliases(name) == [alias]
  assert checkpoints.norm_aliases(alias) == [name]


@pytest.mark.parametrize("name", [
    SYN + "q", "shared/embedding", "encoder/block_000/rms_norm/scale",
    "encoder/block_000/layer_000/rms_norm/offset", "decoder/logits/kernel"])
def test_norm_aliases_of_other_names(name):
  assert checkpoints.norm_aliases(name) == []


@pytest.mark.parametrize("stored,graph", [
    ("layer_norm", "rms_norm"), ("rms_norm", "layer_norm")])
def test_norm_scales_restore_under_either_name(tmp_path, stored, graph):
  """T5.1.0 as released (`layer_norm`, `final_layer_norm`) into today's
  mesh graph (`rms_norm`), and the other way round."""
  final = {"layer_norm": "final_layer_norm", "rms_norm": "rms_norm"}
  layer = "encoder/block_000/layer_000/%s/scale"
  values = {layer % stored: np.full((4,), 1.5, np.float32),
            "encoder/%s/scale" % final[stored]: np.full((4,), 2.5, np.float32)}
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), values)
  names = _map_all(_graph({layer % graph: [4],
                           "encoder/%s/scale" % final[graph]: [4]}), ckpt)
  assert names == {layer % graph: layer % stored,
                   "encoder/%s/scale" % final[graph]:
                       "encoder/%s/scale" % final[stored]}


def test_allow_fresh_opts_in(tmp_path, log):
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      k: v for k, v in T5_ATTENTION.items()
      if k not in (SELF + "v_slot_vr", "shared/embedding")})
  names = _map_all(_graph(GRAPH), ckpt,
                   allow_fresh=["_slot_", "^shared/embedding$"])
  assert names[SYN + "kv_slot_vr"] == SELF + "v_slot_vr"  # mesh skips it
  assert _plan(log).startswith(
      "init_from_t5: restoring 4 from %s, 5 fresh: " % ckpt)
  assert ("init_from_t5: shared/embedding is fresh (not in %s; allowed by "
          "%s '^shared/embedding$')" % (ckpt, checkpoints.ALLOW_FRESH)) in [
              r.getMessage() for r in log.records]


def test_allow_fresh_through_gin(tmp_path):
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"), {
      k: v for k, v in T5_ATTENTION.items() if "_slot_" not in k})
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
  assert _plan(log) == "init_from_t5: restoring 9 from %s, 0 fresh" % ckpt


def test_init_variable_filter_and_should_load_variable(t5_attention_ckpt):
  resolution = checkpoints.resolve(
      GRAPH,
      tf.train.load_checkpoint(t5_attention_ckpt).get_variable_to_shape_map(),
      t5_attention_ckpt, restorable=[SELF + "q", SELF + "o", "global_step"],
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
      checkpoints.restore_with_casts(
          ENC + "SynthesizerAttention/random/R", checkpoint=ckpt)


def test_a_name_in_neither_form_maps_to_its_mapped_name(t5_attention_ckpt):
  """mesh then restores nothing into it; the restore step is what refuses a
  graph with such a variable."""
  with tf.Graph().as_default():
    assert checkpoints.vanilla_to_synthesizer(
        SYN + "k", checkpoint=t5_attention_ckpt) == SELF + "k"
    tf.get_variable(SYN + "k", shape=[4, 6])
    with pytest.raises(ValueError, match=SYN + "k "):
      checkpoints.restore_with_casts(SYN + "k", checkpoint=t5_attention_ckpt)


def test_without_a_checkpoint_is_an_error():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="no checkpoint"):
      checkpoints.vanilla_to_synthesizer(SYN + "q")
    with pytest.raises(ValueError, match="no checkpoint"):
      checkpoints.restore_with_casts(SYN + "q")


# ------------------------------------- restoring, with casts, then the line

SUMMARY_LINE = "init_from_t5: 6 restored from %s, 3 fresh: "


def _restore_as_mesh(graph, checkpoint):
  """What mesh's model_fn does with the mapping, then the session's init.

  Args:
    graph: a graph of GRAPH's variables.
    checkpoint: the checkpoint to start from.

  Returns:
    The variables' values after initialisation, by graph name.
  """
  with graph.as_default():
    names = {v.op.name for v in tf.global_variables()}
    ckpt_vars = {n for n, _ in tf.train.list_variables(checkpoint)}
    mapping = _map_all(graph, checkpoint)
    tf.train.init_from_checkpoint(
        checkpoint, {mapping[n]: n for n in names if mapping[n] in ckpt_vars})
    with tf.Session() as sess:
      sess.run(_scaffold_init_op())
      return {v.op.name: sess.run(v) for v in tf.global_variables()}


def _scaffold_init_op():
  """What the Estimator's Scaffold runs to start a run from scratch."""
  scaffold = tf.train.Scaffold()
  scaffold.finalize()
  return scaffold.init_op


def _stored(path, dtype):
  """T5_ATTENTION's values stored in `dtype` (global_step as int64)."""
  values = {n: (v if n == "global_step" else v.astype(dtype))
            for n, v in T5_ATTENTION.items()}
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.Graph().as_default(), tf.Session() as sess:
    sess.run(tf.raw_ops.SaveV2(
        prefix=path, tensor_names=sorted(values),
        shape_and_slices=[""] * len(values),
        tensors=[tf.constant(values[n], dtype=tf.int64 if n == "global_step"
                             else tf.as_dtype(dtype)) for n in sorted(values)]))
  return path


@pytest.mark.parametrize("stored,graph_dtype", [
    (tf.bfloat16, tf.float32), (tf.float32, tf.bfloat16),
    (tf.float32, tf.float32)])
@pytest.mark.parametrize("resource", [False, True])
def test_restores_across_dtypes_then_prints_the_summary(
    tmp_path, log, capfd, stored, graph_dtype, resource):
  ckpt = _stored(str(tmp_path / "model.ckpt"), stored.as_numpy_dtype)
  values = _restore_as_mesh(_graph(GRAPH, graph_dtype, resource), ckpt)
  # Every mapped variable holds the checkpoint's value (cast: the values
  # are exact in both dtypes), in the graph's dtype.
  for graph_name, source in (("q", "q"), ("kv", "v"), ("kv_slot_vr",
                                                       "v_slot_vr"),
                             ("o", "o")):
    value = values[SYN + graph_name]
    assert value.dtype == graph_dtype.as_numpy_dtype, graph_name
    np.testing.assert_array_equal(value.astype(np.float32),
                                  T5_ATTENTION[SELF + source],
                                  err_msg=graph_name)
  np.testing.assert_array_equal(values["shared/embedding"].astype(np.float32),
                                T5_ATTENTION["shared/embedding"])
  assert values["global_step"] == 7
  # The summary line is printed by the initialisation, after the restores.
  printed = capfd.readouterr().err
  assert (SUMMARY_LINE % ckpt) in printed
  casts = [r.getMessage() for r in log.records if "(cast from" in
           r.getMessage()]
  if stored == graph_dtype:
    assert not casts
    assert "cast" not in _plan(log)
  else:
    assert len(casts) == 6 - 1  # every restored variable but global_step
    assert casts[0].endswith("(cast from %s to %s)" % (stored.name,
                                                       graph_dtype.name))
    assert _plan(log).startswith(
        "init_from_t5: restoring 6 from %s (5 cast from %s to %s), 3 fresh"
        % (ckpt, stored.name, graph_dtype.name))


def test_no_summary_line_when_the_restore_fails(tmp_path, capfd):
  ckpt = _stored(str(tmp_path / "model.ckpt"), np.float32)
  graph = _graph(GRAPH, tf.bfloat16, False)
  with graph.as_default():
    names = sorted(v.op.name for v in tf.global_variables())
    mapping = _map_all(graph, ckpt)
    tf.train.init_from_checkpoint(ckpt, {mapping[n]: n for n in names
                                         if not checkpoints.is_synthesizer_only(
                                             n)})
    for path in tf.io.gfile.glob(ckpt + ".data*"):
      tf.io.gfile.remove(path)  # the restore now fails
    with tf.Session() as sess:
      with pytest.raises(tf.errors.OpError):
        sess.run(_scaffold_init_op())
  assert "restored from" not in capfd.readouterr().err


def test_integer_dtype_mismatch_is_a_clear_error(tmp_path):
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"),
               {SELF + "q": np.zeros((4, 6), np.int32)})
  with tf.Graph().as_default():
    tf.get_variable(SYN + "q", shape=[4, 6])
    with pytest.raises(ValueError, match=r"\(float32\).*stored as int32"):
      checkpoints.restore_with_casts(SYN + "q", checkpoint=ckpt)


# ------------------------------------------- what mesh gives the mapping


@pytest.fixture
def clean_gin():
  with gin.unlock_config():
    gin.clear_config()
  yield
  with gin.unlock_config():
    gin.clear_config()


def test_the_checkpoint_and_filter_come_from_gin(t5_attention_ckpt, log,
                                                 clean_gin):
  """The stock CLI's utils.run.init_checkpoint, mesh's gin-only filter."""
  del clean_gin
  with gin.unlock_config():
    gin.bind_parameter("utils.run.init_checkpoint", t5_attention_ckpt)
    gin.bind_parameter(checkpoints.from_t5.INIT_VARIABLE_FILTER,
                       "SelfAttention/(q|o)$|global_step")
  with _graph(GRAPH).as_default():
    names = sorted(v.op.name for v in tf.global_variables())
    for name in names:
      checkpoints.restore_with_casts(name)
      checkpoints.vanilla_to_synthesizer(name)
  assert _plan(log).startswith("init_from_t5: restoring 3 from %s, 6 fresh"
                               % t5_attention_ckpt)
  assert any(r.getMessage().endswith(
      "kv is fresh (%s is excluded by init_variable_filter)" % (SELF + "v"))
             for r in log.records)


def test_the_bound_checkpoint_wins_over_the_clis(t5_attention_ckpt, tmp_path,
                                                 log, clean_gin):
  """mtf_synthesizer.MtfModel binds the checkpoint it hands to mesh."""
  del clean_gin
  with gin.unlock_config():
    gin.bind_parameter("utils.run.init_checkpoint", str(tmp_path / "none"))
    gin.bind_parameter(checkpoints.MAPPING + ".checkpoint",
                       t5_attention_ckpt)
  with _graph(GRAPH).as_default():
    checkpoints.restore_with_casts(SYN + "q")
    assert checkpoints.vanilla_to_synthesizer(SYN + "q") == SELF + "q"
  assert t5_attention_ckpt in _plan(log)


def test_mtf_model_tells_the_mapping_its_checkpoint(t5_attention_ckpt,
                                                    tmp_path, clean_gin,
                                                    monkeypatch):
  del clean_gin
  import mtf_synthesizer  # pylint: disable=g-import-not-at-top
  import t5.models  # pylint: disable=g-import-not-at-top
  seen = []
  monkeypatch.setattr(
      t5.models.MtfModel, "estimator",
      lambda self, vocabulary, init_checkpoint=None, **_: seen.append(
          (init_checkpoint, gin.query_parameter(
              checkpoints.MAPPING + ".checkpoint"))))
  model = mtf_synthesizer.MtfModel(
      model_dir=str(tmp_path / "model"), tpu=None, variant="random_vanilla",
      mesh_shape="", mesh_devices=[""], batch_size=8,
      sequence_length={"inputs": 16, "targets": 16})
  model.estimator(None, init_checkpoint=t5_attention_ckpt)
  assert seen == [(t5_attention_ckpt, t5_attention_ckpt)]


def test_another_init_op_is_refused(t5_attention_ckpt):
  with _graph(GRAPH).as_default():
    tf.add_to_collection(tf.GraphKeys.INIT_OP, tf.no_op(name="someone"))
    with pytest.raises(ValueError, match="someone"):
      checkpoints.restore_with_casts(SYN + "q", checkpoint=t5_attention_ckpt)


def test_a_second_checkpoint_replaces_the_init_op(t5_attention_ckpt,
                                                  tmp_path):
  other = _save(os.path.join(tmp_path, "other", "model.ckpt"), T5_ATTENTION)
  with _graph(GRAPH).as_default():
    for ckpt in (t5_attention_ckpt, other):
      checkpoints.restore_with_casts(SYN + "q", checkpoint=ckpt)
    assert len(tf.get_collection(tf.GraphKeys.INIT_OP)) == 1


def test_mesh_still_takes_what_the_mapping_relies_on():
  """Fails when mesh changes how it restores: the filter asked first, the
  variable filter only from gin, the checkpoint's names from the mapping,
  TF's restore with them."""
  source = inspect.getsource(mtf_utils.tpu_estimator_model_fn)
  assert "init_checkpoint_variable_mapping(v)" in source
  # The restore step (a should_load_variable filter) is asked first.
  assert source.index("should_load_variable(v)") < source.index(
      "init_checkpoint_variable_mapping(v)")
  assert "tf.train.init_from_checkpoint(" in source
  assert "init_variable_filter" in inspect.signature(
      mtf_utils.tpu_estimator_model_fn).parameters
  assert "init_variable_filter" not in inspect.getsource(
      mtf_utils.get_estimator)
  assert "scaffold" not in source.split("ModeKeys.TRAIN")[-1].lower()


def test_the_documented_exception_still_holds():
  """Fails when TF's Estimator no longer keeps its RunConfig where the
  deterministic training replaces it (docs/architecture.md's list of
  changes to other libraries; tests/test_foreign_changes.py)."""
  estimator = tf.estimator.Estimator(model_fn=lambda features, labels: None)
  assert estimator.config.tf_random_seed is None
  estimator._config = estimator.config.replace(tf_random_seed=7)  # pylint: disable=protected-access
  assert estimator.config.tf_random_seed == 7
