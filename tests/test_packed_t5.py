# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Packed batches under T5's own model files, end to end.

The models are trained by the stock CLI with `models/t5.1.1.tiny.gin`
(packing on, `positional_embedding = False`) and a variant file. The model
is then rebuilt in-process from the run's `operative_config.gin`, restored
from its checkpoint, and evaluated on a packed batch (two examples per row,
with segment ids and positions, as T5's packed dataset gives them) and on
the same examples each alone (no segment ids, as T5 evaluates). Every
target token must get the same loss both ways.
"""

import os

import gin
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import utils
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import lowering as lowering_lib
from mtf_synthesizer import attentions
from mtf_synthesizer.core import layer as layer_lib
from mtf_synthesizer.core import synthesizers

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

LENGTH = 32  # <= the trained models' max_length (conftest.LENGTH)
# (inputs length, targets length) of the examples; two per packed row.
EXAMPLES = [(9, 5), (14, 8), (12, 6), (16, 9)]
# Every variant with a function that indexes positions (packing gathers its
# tables per segment).
VARIANTS = [v.name for v in attentions.VARIANTS
            if any(synthesizers.BY_NAME[c].indexes_positions
                   for c in v.components)]
# The position-indexed tables: given large random values, so that reading
# them at the wrong positions changes the loss visibly.
TABLES = ("/random/R", "/factorized_random/R1", "/factorized_random/R2",
          "/dense/w2", "/dense/b2", "/factorized_dense/wa",
          "/factorized_dense/wb", "/factorized_dense/ba",
          "/factorized_dense/bb")


def _examples():
  rng = np.random.RandomState(0)
  out = []
  for n_in, n_tgt in EXAMPLES:
    inputs = np.append(rng.randint(3, 200, n_in - 1), 1)  # 1 = EOS
    targets = np.append(rng.randint(3, 200, n_tgt - 1), 1)
    out.append((inputs, targets))
  return out


def _pack(examples, per_row):
  """Rows of `per_row` examples: tokens, segment ids and positions."""
  rows = {k: [] for k in ("inputs", "targets")}
  seg = {k: [] for k in rows}
  pos = {k: [] for k in rows}
  for start in range(0, len(examples), per_row):
    for i, key in enumerate(("inputs", "targets")):
      tokens, ids, positions = [], [], []
      for s, example in enumerate(examples[start:start + per_row]):
        tokens += list(example[i])
        ids += [s + 1] * len(example[i])
        positions += list(range(len(example[i])))
      pad = LENGTH - len(tokens)
      rows[key].append(tokens + [0] * pad)
      seg[key].append(ids + [0] * pad)
      pos[key].append(positions + [0] * pad)
  return ({k: np.array(v, np.int32) for k, v in rows.items()},
          {k: np.array(v, np.int32) for k, v in seg.items()},
          {k: np.array(v, np.int32) for k, v in pos.items()})


def _token_losses(model_dir, features, packed):
  """Cross-entropy of every target token: [batch, LENGTH] (0 on padding)."""
  checkpoint = tf.train.latest_checkpoint(model_dir)
  shapes = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
  vocab_size = shapes["decoder/logits/kernel"][1]
  tokens, segments, positions = features
  arrays = dict(tokens)
  if packed:
    for key in ("inputs", "targets"):
      arrays[key + "_segmentation"] = segments[key]
      arrays[key + "_position"] = positions[key]

  def logits_fn(imported):
    kwargs = {}
    if packed:
      kwargs = dict(
          encoder_sequence_id=imported["inputs_segmentation"],
          decoder_sequence_id=imported["targets_segmentation"],
          encoder_position=imported["inputs_position"],
          decoder_position=imported["targets_position"])
    model = transformer.make_bitransformer(
        input_vocab_size=vocab_size, output_vocab_size=vocab_size)
    logits, _ = model.call_simple(
        inputs=imported["inputs"], targets=imported["targets"],
        compute_loss=False, mode=tf.estimator.ModeKeys.EVAL,
        variable_dtype=utils.get_variable_dtype(), **kwargs)
    return logits

  def randomize(masters):
    ops = []
    for master in masters:
      if master.op.name.endswith(TABLES):
        rng = np.random.RandomState(sum(map(ord, master.op.name)))
        ops.append(tf.assign(master, tf.cast(
            rng.randn(*master.shape.as_list()), master.dtype)))
    return ops

  values = lowering_lib.restored_logits(checkpoint, arrays, logits_fn,
                                        partial=True, adjust=randomize)
  values = values - values.max(-1, keepdims=True)
  log_probs = values - np.log(np.exp(values).sum(-1, keepdims=True))
  targets = tokens["targets"]
  losses = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
  return losses * (targets > 0)


@pytest.fixture(scope="module")
def operative_config():
  """Parses each model's operative config; restores gin afterwards."""

  def parse(model_dir):
    gin.clear_config()
    gin.parse_config_file(os.path.join(model_dir, "operative_config.gin"),
                          skip_unknown=True)
  yield parse
  gin.clear_config()


def _compare(model_dir, parse):
  """Per-token losses (packed row segments, the same examples alone)."""
  examples = _examples()
  parse(model_dir)
  packed = _token_losses(model_dir, _pack(examples, 2), packed=True)
  alone = _token_losses(model_dir, _pack(examples, 1), packed=False)
  pairs = []
  for e, (_, target) in enumerate(examples):
    row, segment = divmod(e, 2)
    offset = sum(len(t) for _, t in examples[2 * row:2 * row + segment])
    pairs.append((packed[row, offset:offset + len(target)],
                  alone[e, :len(target)]))
  return pairs


@pytest.mark.parametrize("variant", VARIANTS)
def test_packed_loss_equals_examples_alone(trained_models, operative_config,
                                           variant):
  model_dir, proc = trained_models[variant]
  assert proc.returncode == 0, proc.stderr[-3000:]
  operative = open(os.path.join(model_dir, "operative_config.gin")).read()
  assert "mesh_train_dataset_fn.pack = True" in operative
  assert "encoder/Unitransformer.positional_embedding = False" in operative
  pairs = _compare(model_dir, operative_config)
  for packed, alone in pairs:
    np.testing.assert_allclose(packed, alone, rtol=1e-4, atol=1e-4)
  # And so the summed losses of the batch.
  np.testing.assert_allclose(sum(p.sum() for p, _ in pairs),
                             sum(a.sum() for _, a in pairs), rtol=1e-5)


def test_row_positions_would_differ(trained_models, operative_config,
                                    monkeypatch):
  """Negative control: reading the tables at row positions breaks it."""
  model_dir, _ = trained_models["random"]
  monkeypatch.setattr(layer_lib, "packed_sequence_id", lambda context: None)
  pairs = _compare(model_dir, operative_config)
  # First segments sit at offset 0 and agree; second segments do not.
  np.testing.assert_allclose(pairs[0][0], pairs[0][1], rtol=1e-4, atol=1e-4)
  assert np.max(np.abs(pairs[1][0] - pairs[1][1])) > 0.1
