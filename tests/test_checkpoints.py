# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Name mapping from vanilla T5 checkpoints to SynthesizerAttention."""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from mtf_synthesizer import checkpoints

ENC = "encoder/block_000/layer_000/"


@pytest.mark.parametrize("graph_name,expected", [
    (ENC + "SynthesizerAttention/q", ENC + "SelfAttention/q"),
    (ENC + "SynthesizerAttention/o_slot_vc", ENC + "SelfAttention/o_slot_vc"),
    (ENC + "SynthesizerAttention/kv", ENC + "SelfAttention/v"),
    (ENC + "SynthesizerAttention/kv_slot_v", ENC + "SelfAttention/v_slot_v"),
    (ENC + "SynthesizerAttention/relative_attention_bias",
     ENC + "SelfAttention/relative_attention_bias"),
    (ENC + "SynthesizerAttention/random/R", ENC + "SynthesizerAttention/random/R"),
    (ENC + "SynthesizerAttention/mixture/alpha_logits",
     ENC + "SynthesizerAttention/mixture/alpha_logits"),
    ("decoder/block_000/layer_001/EncDecAttention/q",
     "decoder/block_000/layer_001/EncDecAttention/q"),
    ("shared/embedding", "shared/embedding"),
])
def test_checkpoint_name(graph_name, expected):
  assert checkpoints.checkpoint_name(graph_name) == expected


def _save(path, values):
  g = tf.Graph()
  with g.as_default():
    for name, value in values.items():
      tf.get_variable(name, initializer=tf.constant(value))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return tf.train.Saver().save(sess, path)


def test_shape_mismatch_is_a_clear_error(tmp_path):
  ckpt = _save(os.path.join(tmp_path, "model.ckpt"),
               {ENC + "SelfAttention/q": np.zeros((4, 6), np.float32)})
  g = tf.Graph()
  with g.as_default():
    tf.get_variable(ENC + "SynthesizerAttention/q", shape=[4, 8])
    tf.get_variable(ENC + "SynthesizerAttention/random/R", shape=[2, 3, 3])
    assert (checkpoints.vanilla_to_synthesizer(
        ENC + "SynthesizerAttention/random/R", checkpoint=ckpt) ==
            ENC + "SynthesizerAttention/random/R")
    with pytest.raises(ValueError, match=r"\[4, 8\].*shape is \[4, 6\]"):
      checkpoints.vanilla_to_synthesizer(ENC + "SynthesizerAttention/q",
                                         checkpoint=ckpt)
