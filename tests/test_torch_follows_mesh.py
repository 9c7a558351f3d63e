# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch model trains as mesh trains: same start, same losses.

For every variant of the table and mesh's SelfAttention, a small
encoder-decoder (d_model 128, so that mesh's Adafactor factors the larger
variables) is built by mesh from the variant's gin files; its initial
weights are saved and exported. mesh trains it STEPS steps with its
AdafactorOptimizer and `learning_rate_schedule_noam` (T5's defaults, z_loss
1e-4, no dropout) on fixed batches; the export, loaded by transformers,
trains on the same batches with the README's recipe, `model.mesh_optimizer()`
and mesh's loss normalization (`loss_denominator="positions"`).
Each step's loss must agree within LOSS_TOLERANCE (relative).

The same start also checks `_init_weights`: a model from the same config
draws every weight with mesh's distribution (its standard deviation within
INIT_TOLERANCE of mesh's, per weight of more than 1000 values).
"""

import os

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import learning_rate_schedules
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import utils as mtf_utils
import numpy as np
import pytest
import t5.models
import tensorflow.compat.v1 as tf

import conftest
import lowering as lowering_lib
from mtf_synthesizer.export import hf_export
from mtf_synthesizer.jobs import commands

# Builds and trains a mesh model per variant: `make test-fast` skips it.
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB = 384
LENGTH = 16
BATCH = 4
STEPS = 6
LOSS_TOLERANCE = 1e-5
INIT_TOLERANCE = 0.1
SIZES = ["d_model = 128", "num_layers = 1", "d_ff = 256", "num_heads = 2",
         "d_kv = 64", "dropout_rate = 0.0",
         "SynthesizerAttention.max_length = %d" % LENGTH,
         "get_variable_dtype.activation_dtype = 'float32'"]
NAMES = list(conftest.VARIANTS) + [conftest.MESH_ATTENTION]

for _module in (transformer, t5.models):
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(_module.__file__), "gin"))


def _batches():
  """STEPS batches of (inputs, targets) [BATCH, LENGTH], 0-padded."""
  rng = np.random.RandomState(0)
  out = []
  for _ in range(STEPS):
    pair = []
    for _ in range(2):
      ids = np.zeros((BATCH, LENGTH), np.int32)
      for row in range(BATCH):
        n = rng.randint(LENGTH // 2, LENGTH + 1)
        ids[row, :n - 1] = rng.randint(3, 259, n - 1)
        ids[row, n - 1] = 1
      pair.append(ids)
    out.append(tuple(pair))
  return out


def _mesh_training(root, name):
  """mesh's losses over the batches, and the directory of its start."""
  model_dir = root / name
  model_dir.mkdir()
  gin.clear_config()
  gin.parse_config_files_and_bindings(
      ["defaults.gin", "models/t5.1.1.tiny.gin"] +
      commands.variant_gin_files(name), SIZES)
  losses = []
  try:
    with tf.Graph().as_default():
      tf.random.set_random_seed(1)
      step = tf.train.get_or_create_global_step()
      graph = mtf.Graph()
      mesh = mtf.Mesh(graph, "mesh")
      model = mtf_utils.build_model(
          model_type="bitransformer", input_vocab_size=VOCAB,
          output_vocab_size=VOCAB,
          layout_rules=mtf.convert_to_layout_rules(""),
          mesh_shape=mtf.convert_to_shape(""))
      dims = [mtf.Dimension("batch", BATCH), mtf.Dimension("length", LENGTH)]
      fed = [tf.placeholder(tf.int32, [BATCH, LENGTH]) for _ in range(2)]
      inputs, targets = [mtf.import_fully_replicated(mesh, t, dims)
                         for t in fed]
      _, loss = model.call_simple(
          inputs=inputs, targets=targets, compute_loss=True,
          mode=tf.estimator.ModeKeys.TRAIN,
          variable_dtype=mtf_utils.get_variable_dtype())
      variables = graph.trainable_variables
      grads = mtf.gradients([loss], [v.outputs[0] for v in variables])
      rate = learning_rate_schedules.learning_rate_schedule_noam(
          step, total_train_steps=STEPS)
      updates = mtf.optimize.AdafactorOptimizer(
          learning_rate=rate).apply_grads(grads, variables)
      lowering = lowering_lib.lower(graph, mesh)
      tf_loss = lowering.export_to_tf_tensor(loss)
      with tf.control_dependencies(
          [lowering.lowered_operation(op) for op in updates]):
        train_op = tf.assign_add(step, 1)
      masters = [v.get_master() for v in graph.all_variables]
      saver = tf.train.Saver(masters)
      with tf.Session(config=lowering_lib.session_config()) as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(lowering.copy_masters_to_slices())
        saver.save(sess, str(model_dir / "model.ckpt"), global_step=0)
        for batch in _batches():
          value, _ = sess.run([tf_loss, train_op], dict(zip(fed, batch)))
          losses.append(float(value))
    operative = gin.operative_config_str()
  finally:
    gin.clear_config()
  (model_dir / "operative_config.gin").write_text(
      operative + "\nutils.run.model_type = 'bitransformer'\n")
  return model_dir, losses


def _torch_training(export_dir):
  """The README's recipe over the same batches: the losses."""
  model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
      export_dir, trust_remote_code=True)
  model.config.loss_denominator = "positions"
  model.train()
  optimizer, schedule = model.mesh_optimizer(total_steps=STEPS)
  losses = []
  for inputs, targets in _batches():
    labels = torch.tensor(targets, dtype=torch.long)
    loss = model(input_ids=torch.tensor(inputs, dtype=torch.long),
                 labels=labels.masked_fill(labels == 0, -100)).loss
    loss.backward()
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
    losses.append(float(loss))
  return model, losses


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("follows")
  out = {}
  for name in NAMES:
    model_dir, mesh_losses = _mesh_training(root, name)
    export_dir = root / (name + "_hf")
    hf_export.export(str(model_dir), str(export_dir), vocabulary="byte")
    model, torch_losses = _torch_training(str(export_dir))
    out[name] = {"mesh": mesh_losses, "torch": torch_losses,
                 "config": model.config, "start": str(export_dir)}
  return out


@pytest.mark.parametrize("name", NAMES)
def test_losses_follow_mesh(runs, name):
  mesh_losses = np.array(runs[name]["mesh"])
  torch_losses = np.array(runs[name]["torch"])
  # It trains: the last loss is below the first.
  assert mesh_losses[-1] < mesh_losses[0]
  np.testing.assert_allclose(torch_losses, mesh_losses, rtol=LOSS_TOLERANCE)


def test_the_comparison_can_fail(runs):
  """Without mesh's settings (AdamW), the losses leave mesh's at once."""
  name = NAMES[0]
  model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
      runs[name]["start"], trust_remote_code=True)
  model.config.loss_denominator = "positions"
  model.train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
  losses = []
  for inputs, targets in _batches()[:3]:
    labels = torch.tensor(targets, dtype=torch.long)
    loss = model(input_ids=torch.tensor(inputs, dtype=torch.long),
                 labels=labels.masked_fill(labels == 0, -100)).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(float(loss))
  assert losses[0] == pytest.approx(runs[name]["mesh"][0], rel=1e-4)
  assert abs(losses[2] - runs[name]["mesh"][2]) > 10 * LOSS_TOLERANCE * (
      runs[name]["mesh"][2])


@pytest.mark.parametrize("name", NAMES)
def test_init_draws_as_mesh(runs, name):
  """from_config's weights have mesh's spread, weight by weight."""
  config = runs[name]["config"]
  start = transformers.AutoModelForSeq2SeqLM.from_pretrained(
      runs[name]["start"], trust_remote_code=True)
  torch.manual_seed(0)
  fresh = type(start)(config)
  mesh_weights = dict(start.state_dict())
  compared = 0
  for key, value in fresh.state_dict().items():
    reference = mesh_weights[key]
    if reference.numel() < 1000:
      continue
    ours, theirs = float(value.std()), float(reference.std())
    assert ours == pytest.approx(theirs, rel=INIT_TOLERANCE), key
    assert float(value.mean()) == pytest.approx(0.0, abs=0.1 * theirs), key
    compared += 1
  assert compared >= 8
