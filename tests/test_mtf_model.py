# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mtf_synthesizer.MtfModel keeps its variant where t5's MtfModel loses it.

T5's `finetune`, `eval`, `predict`, `score` and `export` parse an operative
config and then build their estimator; a plain T5 model's config binds the
stacks to mesh's SelfAttention. These tests parse such a config the way T5
does, build the estimator (no training), and read which layers gin would
give mesh. The stock `t5.models.MtfModel` is the negative control. Training,
decoding and export through the same class: test_python_api.py.
"""

import os
from unittest import mock

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import learning_rate_schedules
import numpy as np
import pytest
import seqio
import t5.models
from t5.models import mtf_model as t5_mtf_model
import tensorflow.compat.v1 as tf

import conftest
import mtf_synthesizer
from mtf_synthesizer import mtf_model

STACK = "encoder/transformer.make_layer_stack.layers"
MAPPING = "utils.init_checkpoint_variable_mapping.mapping_fn"
# The lines of a plain T5 model's operative config that pick its layers
# (as in T5's released models).
PLAIN_T5_CONFIG = """\
import mesh_tensorflow.transformer.transformer_layers
encoder/transformer.make_layer_stack.layers = [
    @mesh_tensorflow.transformer.transformer_layers.SelfAttention,
    @mesh_tensorflow.transformer.transformer_layers.DenseReluDense,
]
decoder/transformer.make_layer_stack.layers = [
    @mesh_tensorflow.transformer.transformer_layers.SelfAttention,
    @mesh_tensorflow.transformer.transformer_layers.EncDecAttention,
    @mesh_tensorflow.transformer.transformer_layers.DenseReluDense,
]
"""


@pytest.fixture
def plain_t5_dir(tmp_path):
  gin.clear_config()
  # What the stock CLI parses first (sizes, dropout, ...).
  gin.parse_config_file(os.path.join(
      os.path.dirname(mtf.transformer.__file__), "gin", "defaults.gin"))
  (tmp_path / "operative_config.gin").write_text(PLAIN_T5_CONFIG)
  yield str(tmp_path)
  gin.clear_config()


def _layer_names(key):
  return [ref.selector.split(".")[-1] for ref in conftest.gin_value(key)]


def _build(model_class, model_dir, init_checkpoint=None, **kwargs):
  """What T5's finetune/predict/export do: parse, then build the estimator."""
  model = model_class(model_dir=model_dir, tpu=None, mesh_shape="",
                      mesh_devices=[""], batch_size=4,
                      sequence_length={"inputs": 8, "targets": 8}, **kwargs)
  t5_mtf_model._parse_operative_config(model_dir)  # pylint: disable=protected-access
  model.estimator(seqio.ByteVocabulary(), init_checkpoint=init_checkpoint)
  return model


def test_stock_mtf_model_loses_the_variant(plain_t5_dir):
  """The defect: a variant parsed first is undone by the operative config."""
  gin.parse_config_file("synthesizer/random_vanilla.gin")
  _build(t5.models.MtfModel, plain_t5_dir)
  assert _layer_names(STACK) == ["SelfAttention", "DenseReluDense"]


@pytest.mark.parametrize("init_checkpoint", [None, "pretrained/model.ckpt-9"])
def test_variant_is_applied_after_the_operative_config(plain_t5_dir,
                                                       init_checkpoint):
  _build(mtf_synthesizer.MtfModel, plain_t5_dir, init_checkpoint,
         variant="random_vanilla")
  assert _layer_names(STACK) == ["SynthesizerAttention", "DenseReluDense"]
  assert _layer_names("decoder/transformer.make_layer_stack.layers") == [
      "SynthesizerAttention", "EncDecAttention", "DenseReluDense"]
  assert [r.selector.split(".")[-1] for r in gin.query_parameter(
      "SynthesizerAttention.synthesizers")] == ["Random", "DotProduct"]
  mapping = gin.query_parameter(MAPPING) if init_checkpoint else None
  if init_checkpoint:
    # Reading a checkpoint: through init_from_t5.gin's name mapping and
    # restore step.
    assert mapping.selector.endswith("vanilla_to_synthesizer")
    assert gin.query_parameter(
        "utils.should_load_variable.filter_fn").selector.endswith(
            "restore_with_casts")


def test_extra_files_then_user_bindings_win(plain_t5_dir):
  _build(mtf_synthesizer.MtfModel, plain_t5_dir, variant="R",
         extra_gin_files=["synthesizer/keep_decoder_self_attention.gin"],
         extra_gin_bindings=["SynthesizerAttention.max_length = 8"])
  assert _layer_names(STACK) == ["SynthesizerAttention", "DenseReluDense"]
  assert _layer_names("decoder/transformer.make_layer_stack.layers")[0] == (
      "SelfAttention")
  assert gin.query_parameter("SynthesizerAttention.max_length") == 8


def test_no_variant_keeps_the_operative_config(plain_t5_dir):
  _build(mtf_synthesizer.MtfModel, plain_t5_dir, init_checkpoint="x")
  assert _layer_names(STACK) == ["SelfAttention", "DenseReluDense"]
  with pytest.raises(ValueError):
    gin.query_parameter(MAPPING)


@pytest.mark.parametrize("name, expected", [
    ("random_vanilla", "synthesizer/random_vanilla.gin"),
    ("R+V", "synthesizer/random_vanilla.gin"),
    ("synthesizer/dense.gin", "synthesizer/dense.gin"),
    ("t5_attention", None),
    (None, None),
])
def test_variant_names(name, expected):
  assert mtf_model.variant_gin_file(name) == expected


def test_unknown_variant_lists_the_known_ones(tmp_path):
  with pytest.raises(ValueError, match="known: vanilla, random"):
    mtf_synthesizer.MtfModel(model_dir=str(tmp_path), tpu=None,
                             variant="randon", mesh_shape="")


def test_every_variant_file_exists():
  for name in mtf_synthesizer.attentions.VARIANT_NAMES:
    path = mtf_model.variant_gin_file(name)
    assert os.path.exists(os.path.join(mtf_synthesizer.GIN_DIR, path)), path


def _noam(step, total, warmup=10000, decay_fraction=0.1):
  """Mesh's default schedule, from its docstring's formula."""
  return (1.0 / np.sqrt(max(step, warmup)) *
          min(1.0, (total - step) / (total * decay_fraction)))


def _schedule_of_train(model_class, model_dir, steps, **kwargs):
  """The schedule `train(steps=...)` gives the estimator, without training."""
  captured = {}

  def get_estimator(**estimator_kwargs):
    captured["schedule"] = estimator_kwargs["learning_rate_schedule"]

  model = model_class(model_dir=model_dir, tpu=None, mesh_shape="",
                      mesh_devices=[""], batch_size=4,
                      sequence_length={"inputs": 8, "targets": 8}, **kwargs)
  with mock.patch.object(t5_mtf_model.mtf_utils, "get_estimator",
                         side_effect=get_estimator), \
       mock.patch.object(t5_mtf_model.mtf_utils, "train_model"), \
       mock.patch.object(t5_mtf_model.mesh_transformer, "get_vocabulary",
                         return_value=seqio.ByteVocabulary()):
    model.train("any_task", steps=steps)
  return captured["schedule"]


def _rates(schedule, steps):
  with tf.Graph().as_default(), tf.Session() as sess:
    return sess.run([schedule(step=tf.constant(float(s))) for s in steps])


def test_default_schedule_gets_the_runs_total_steps(plain_t5_dir):
  """T5's default (mesh's noam) decays over the run, as in the stock CLI."""
  total = 20000
  schedule = _schedule_of_train(mtf_synthesizer.MtfModel, plain_t5_dir,
                                total, variant="random_vanilla")
  steps = [1, 5000, 10000, 18500, 19990]
  np.testing.assert_allclose(_rates(schedule, steps),
                             [_noam(s, total) for s in steps], rtol=1e-5)
  # The negative control: T5's own class hands mesh a schedule that cannot
  # be called with the step alone.
  stock = _schedule_of_train(t5.models.MtfModel, plain_t5_dir, total)
  with pytest.raises(TypeError, match="total_train_steps"):
    _rates(stock, [1])


def test_factor_list_and_constant_schedules_as_in_the_cli(plain_t5_dir):
  total = 1000
  factors = [0.5, learning_rate_schedules.linear_decay]
  schedule = _schedule_of_train(
      mtf_synthesizer.MtfModel, plain_t5_dir, total,
      learning_rate_schedule=factors)
  # 0.5 * min(1, (total - step) / (0.1 * total)): mesh's linear_decay.
  steps = [0, 950, 990]
  np.testing.assert_allclose(
      _rates(schedule, steps),
      [0.5 * min(1.0, (total - s) / (0.1 * total)) for s in steps],
      rtol=1e-5)
  assert _schedule_of_train(mtf_synthesizer.MtfModel, plain_t5_dir, total,
                            learning_rate_schedule=0.01) == 0.01
