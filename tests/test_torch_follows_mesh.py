# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch model trains as mesh trains: same start, same losses.

For every variant of the table and mesh's SelfAttention, a small
encoder-decoder (d_model 128, so that mesh's Adafactor factors the larger
variables) is built by mesh from the variant's gin files; its initial
weights are saved and exported. mesh trains it STEPS steps with its
AdafactorOptimizer and `learning_rate_schedule_noam` (T5's defaults, z_loss
1e-4, no dropout) on fixed batches; the export, loaded by transformers,
trains on the same batches with docs/export.md's recipe,
`mesh_optimizer(model)` and mesh's loss normalization
(`loss_denominator="positions"`).
Each step's loss must agree within LOSS_TOLERANCE (relative).

The same graph also checks `_init_weights`, weight by weight, every weight
of every function of the table included, the small ones too: mesh's
initializers are run again until each weight has SAMPLES values pooled
from its draws (DRAWS at most), and a model from the same config is drawn
as often. PyTorch declares each weight's initializer (the calls of
transformers' initialization functions that `_init_weights` makes,
`tiny_models.declared_initializers`); both mesh's and PyTorch's pooled
values must come from it. A constant (the norms' ones, mesh's zeros) is
compared exactly: every draw of mesh and of PyTorch is that constant. A
random weight's pooled values pass, on each side, a Kolmogorov-Smirnov test
against the declared distribution and tests of its mean, variance and
kurtosis within Z standard errors, and lie within a bounded one's limits
(mesh's bfloat16 variables may round a limit up by half a step): a
standard deviation 10% off, a normal where mesh truncates, a uniform where
mesh draws a normal all fail (test_the_initializer_test_can_fail). No
weight is seeded alike in both (mesh draws with TensorFlow's generator),
so none is compared value by value but the constants.
"""

import collections
import functools
import math
import os

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import learning_rate_schedules
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import utils as mtf_utils
import numpy as np
import pytest
from scipy import stats
import t5.models
import tensorflow.compat.v1 as tf

import conftest
import lowering as lowering_lib
import tiny_models
from mtf_synthesizer.export import hf_export
from mtf_synthesizer.export import torch_names
from mtf_synthesizer.jobs import commands

# Builds and trains a mesh model per variant: `make test-fast` skips it.
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
# pylint: disable-next=g-import-not-at-top,wrong-import-position
from mtf_synthesizer.hf_tools.mesh_training import mesh_optimizer

VOCAB = 384
LENGTH = 16
BATCH = 4
STEPS = 6
LOSS_TOLERANCE = 1e-5
# The initializers' test: values pooled per weight, at most DRAWS draws;
# the moments' bound in standard errors; the Kolmogorov-Smirnov test's
# level.
SAMPLES = 8192
DRAWS = 128
Z = 5.0
KS_LEVEL = 1e-6
# mesh's stacks (a bitransformer's) -> the PyTorch model's prefixes.
STACKS = {"encoder": "model.encoder", "decoder": "model.decoder"}
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


def mesh_training(root, name, gin_files=None, bindings=()):
  """mesh's losses over the batches, and the directory of its start.

  Args:
    root: a folder for the model's directory.
    name: a variant of the table, or the directory's name where
      `gin_files` are given.
    gin_files: the model's gin files after T5.1.1's tiny model (default:
      the variant's).
    bindings: gin bindings after SIZES.

  Returns:
    (the model directory, the losses, each small variable's draws).
  """
  model_dir = root / name
  model_dir.mkdir()
  if gin_files is None:
    gin_files = commands.variant_gin_files(name)
  gin.clear_config()
  gin.parse_config_files_and_bindings(
      ["defaults.gin", "models/t5.1.1.tiny.gin"] + list(gin_files),
      SIZES + list(bindings))
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
        first = _small(masters, 1)
        draws = {v.op.name: [value]
                 for v, value in zip(first, sess.run(first))}
        for batch in _batches():
          value, _ = sess.run([tf_loss, train_op], dict(zip(fed, batch)))
          losses.append(float(value))
        for draw in range(1, DRAWS):
          again = _small(masters, draw + 1)
          sess.run([v.initializer for v in again])
          for v, value in zip(again, sess.run(again)):
            draws[v.op.name].append(value)
    operative = gin.operative_config_str()
  finally:
    gin.clear_config()
  (model_dir / "operative_config.gin").write_text(
      operative + "\nutils.run.model_type = 'bitransformer'\n")
  return model_dir, losses, draws


def _small(variables, draws):
  """The floating variables that need `draws` draws for SAMPLES values."""
  return [v for v in variables if v.dtype.base_dtype.is_floating and
          v.shape.num_elements() * (draws - 1) < SAMPLES]


def torch_training(export_dir):
  """docs/export.md's recipe over the same batches: the losses."""
  model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
      export_dir, trust_remote_code=True)
  model.config.loss_denominator = "positions"
  model.train()
  optimizer, schedule = mesh_optimizer(model, total_steps=STEPS)
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
    model_dir, mesh_losses, draws = mesh_training(root, name)
    export_dir = root / (name + "_hf")
    hf_export.export(str(model_dir), str(export_dir), vocabulary="byte")
    model, torch_losses = torch_training(str(export_dir))
    out[name] = {"mesh": mesh_losses, "torch": torch_losses,
                 "config": model.config, "start": str(export_dir),
                 "mesh_draws": draws}
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


def _by_torch_name(mesh_draws, num_heads):
  """mesh's draws of each variable as PyTorch weights: name -> [arrays]."""
  out = collections.defaultdict(list)
  for mesh_name, values in mesh_draws.items():
    for value in values:
      found = torch_names.torch_weight(mesh_name, value, num_heads, STACKS)
      if found is not None:
        out[found[0]].append(np.asarray(found[1], np.float64))
  return out


def _distribution(spec):
  """scipy's distribution of a declared initializer (not a constant)."""
  kind, parameters = spec
  if kind == "normal":
    mean, std = parameters
    return stats.norm(mean, std)
  if kind == "trunc_normal":
    mean, std, low, high = parameters
    return stats.truncnorm((low - mean) / std, (high - mean) / std, mean,
                           std)
  if kind == "uniform":
    low, high = parameters
    return stats.uniform(low, high - low)
  raise ValueError("no distribution for %s" % (spec,))


def _drawn_from(values, spec):
  """Why the pooled values do not come from `spec` (a list, empty if they do).

  Args:
    values: the values [n] (float64).
    spec: a declared initializer, ("normal", (mean, std)), ...

  Returns:
    The failed tests, described.
  """
  if spec[0] == "constant":
    wrong = values[values != spec[1][0]]
    return ["%d values are not %g, e.g. %s" % (
        wrong.size, spec[1][0], wrong[:3])] if wrong.size else []
  distribution = _distribution(spec)
  n = values.size
  mean, variance = float(distribution.mean()), float(distribution.var())
  kurtosis = float(distribution.stats(moments="k")) + 3.0
  centered = values - values.mean()
  found_variance = float(np.mean(centered**2))
  found_kurtosis = float(np.mean(centered**4)) / found_variance**2 if (
      found_variance) else 0.0
  out = []
  if abs(values.mean() - mean) > Z * math.sqrt(variance / n):
    out.append("mean %g, not %g" % (values.mean(), mean))
  # A sample variance's relative standard error: sqrt((kurtosis - 1) / n).
  if abs(found_variance / variance - 1) > Z * math.sqrt((kurtosis - 1) / n):
    out.append("standard deviation %g, not %g" % (
        math.sqrt(found_variance), math.sqrt(variance)))
  # The normal's standard error (24 / n)^1/2 bounds the flatter ones'.
  if abs(found_kurtosis - kurtosis) > Z * math.sqrt(24.0 / n):
    out.append("kurtosis %g, not %g" % (found_kurtosis, kurtosis))
  # mesh keeps its variables in bfloat16 (mesh's default master dtype): a
  # limit may round up by half of bfloat16's step (2^-8 relative).
  low, high = distribution.support()
  slack = 2**-8 * max(abs(low), abs(high))
  if values.min() < low - slack or values.max() > high + slack:
    out.append("values in [%g, %g], outside [%g, %g]" % (
        values.min(), values.max(), low, high))
  p = stats.kstest(values, distribution.cdf).pvalue
  if p < KS_LEVEL:
    out.append("Kolmogorov-Smirnov p = %.2g" % p)
  return out


def test_the_initializer_test_can_fail():
  """At SAMPLES values (the fewest a random weight pools), `_drawn_from`
  passes draws of the declared initializer and fails a standard deviation
  10% off, a plain normal where it is truncated at two standard
  deviations, a uniform of the same standard deviation where it is a
  normal, a uniform limit 5% wide, and a constant 1e-6 off."""
  rng = np.random.RandomState(0)
  n = SAMPLES
  normal = ("normal", (0.0, 0.5))
  truncated = ("trunc_normal", (0.0, 0.5, -1.0, 1.0))
  uniform = ("uniform", (-0.3, 0.3))
  for spec in (normal, truncated, uniform):
    assert not _drawn_from(_distribution(spec).rvs(n, random_state=rng),
                           spec), spec
  assert not _drawn_from(np.ones(n), ("constant", (1.0,)))
  wrong = [(rng.normal(0.0, 0.5 * 1.1, n), normal),
           (rng.normal(0.0, 0.5, n), truncated),
           (rng.uniform(-0.5 * 3**0.5, 0.5 * 3**0.5, n), normal),
           (rng.uniform(-0.3 * 1.05, 0.3 * 1.05, n), uniform),
           (np.full(n, 1.0 + 1e-6), ("constant", (1.0,)))]
  for values, spec in wrong:
    assert _drawn_from(values, spec), spec


def _needed(size):
  """Draws for SAMPLES values of a weight of `size` values (DRAWS at most)."""
  return min(DRAWS, -(-SAMPLES // size))


def _values(model, draw):
  """The model's weights that need a draw `draw` (0: all), as arrays."""
  return {key: tensor.detach().double().numpy()
          for key, tensor in tiny_models.weights(model).items()
          if _needed(tensor.numel()) > draw}


@pytest.mark.parametrize("name", NAMES)
def test_init_draws_as_mesh(runs, name):
  """Every weight of from_config's model is drawn as mesh draws it."""
  failures, exported = init_draw_failures(runs[name])
  assert not failures, "\n".join(failures)
  assert len(exported) >= 8


def init_draw_failures(run):
  """How from_config's draws differ from mesh's (empty: they do not).

  Args:
    run: a `runs` entry: its config, exported start and mesh's draws.

  Returns:
    (the failures, described; the exported start's weights by name).
  """
  config = run["config"]
  start = transformers.AutoModelForSeq2SeqLM.from_pretrained(
      run["start"], trust_remote_code=True)
  exported = tiny_models.weights(start)
  mesh = _by_torch_name(run["mesh_draws"], config.num_heads)
  # The draws are named as the export names the start: the first is it.
  for key, values in mesh.items():
    np.testing.assert_array_equal(values[0], exported[key].detach().numpy(),
                                  err_msg=key)
  torch.manual_seed(0)
  fresh, declared = tiny_models.declared_initializers(
      functools.partial(type(start), config))
  drawn = [_values(fresh, 0)]
  for seed in range(1, DRAWS):
    torch.manual_seed(seed)
    drawn.append(_values(type(start)(config), seed))
  assert sorted(declared) == sorted(exported)
  failures = []
  for key, tensor in exported.items():
    if len(declared[key]) != 1:
      failures.append("%s: initializers %s" % (key, declared[key]))
      continue
    (spec,) = declared[key]
    draws = _needed(tensor.numel())
    # A tied weight's draws are under one of its names (the shared
    # embedding's, model.shared.weight); under the others, the start.
    mesh_draws = mesh.get(key) or [tensor.detach().numpy()]
    mesh_draws = mesh_draws[:draws]
    if draws > 1 and len(mesh_draws) < draws:
      failures.append("%s: %d of mesh's draws" % (key, len(mesh_draws)))
    pools = {"mesh": mesh_draws, "PyTorch": [d[key] for d in drawn[:draws]]}
    for side, arrays in pools.items():
      values = np.concatenate([np.ravel(a) for a in arrays]).astype(
          np.float64)
      if spec[0] != "constant" and values.size < SAMPLES:
        failures.append("%s (%s): only %d values" % (key, side, values.size))
      for why in _drawn_from(values, spec):
        failures.append("%s (%s, %d values) declared %s: %s" % (
            key, side, values.size, spec, why))
  return failures, exported
