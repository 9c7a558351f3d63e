# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The trainer's optimizer and learning-rate schedules are mesh's.

`optimizer.AdafactorOptimizer` takes several steps on a small tree beside
a NumPy transcription of mesh's `AdafactorOptimizer.apply_grad` (with
`adafactor_decay_rate_pow`), in float64, in mesh's variable shapes (an
attention projection as one matrix). Every gin-configurable schedule of
`schedules` equals a NumPy transcription of mesh's
`transformer/learning_rate_schedules.py` of the same name, with its
defaults and with other arguments. Fix's table is not trained.
"""

import functools
import glob
import importlib.util
import inspect
import math
import os
import re

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flax_helpers
from mtf_synthesizer.flax_model import mesh_checkpoint
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.flax_train import optimizer as optimizer_lib
from mtf_synthesizer.flax_train import partitioning
from mtf_synthesizer.flax_train import schedules
from mtf_synthesizer.flax_train import trainer as trainer_lib

# --- mesh's Adafactor, in NumPy ----------------------------------------------


def _mesh_factored_dims(shape, factored, min_dim_size_to_factor):
  """mesh's `_factored_dims`: the two largest dimensions, or None."""
  if not factored or len(shape) < 2:
    return None
  order = sorted(range(len(shape)), key=lambda i: -shape[i])
  if shape[order[1]] < min_dim_size_to_factor:
    return None
  return order[0], order[1]


def _rms(x):
  return np.sqrt(np.mean(np.square(x)))


class MeshAdafactor:
  """mesh's `AdafactorOptimizer.apply_grad` on one float64 variable."""

  def __init__(self, shape, learning_rate, multiply_by_parameter_scale=True,
               decay_rate=None, decay_exponent=0.8, decay_offset=0,
               beta1=0.0, clipping_threshold=1.0, factored=True,
               epsilon1=1e-30, epsilon2=1e-3, min_dim_size_to_factor=128):
    self.learning_rate = learning_rate
    self.multiply_by_parameter_scale = multiply_by_parameter_scale
    self.decay_rate = decay_rate
    self.decay_exponent = decay_exponent
    self.decay_offset = decay_offset
    self.beta1 = beta1
    self.clipping_threshold = clipping_threshold
    self.epsilon1 = epsilon1
    self.epsilon2 = epsilon2
    self.factored_dims = _mesh_factored_dims(shape, factored,
                                             min_dim_size_to_factor)
    if self.factored_dims:
      d0, d1 = self.factored_dims
      self.vr = np.zeros(np.delete(shape, d0))
      self.vc = np.zeros(np.delete(shape, d1))
    else:
      self.v = np.zeros(shape)
    self.m = np.zeros(shape)
    self.clipped = []

  def apply_grad(self, grad, var, step):
    """The variable after one update at global step `step`."""
    grad_squared = np.square(grad) + self.epsilon1
    if self.decay_rate is None:  # adafactor_decay_rate_pow
      decay_rate = 1.0 - (step - self.decay_offset + 1.0) ** (
          -self.decay_exponent)
    else:
      decay_rate = self.decay_rate
    learning_rate = self.learning_rate(step)
    if self.multiply_by_parameter_scale:
      update_scale = max(_rms(var), self.epsilon2) * learning_rate
    else:
      update_scale = learning_rate
    mixing_rate = 1.0 - decay_rate
    if self.factored_dims:
      d0, d1 = self.factored_dims
      self.vr = self.vr * decay_rate + grad_squared.mean(axis=d0) * mixing_rate
      self.vc = self.vc * decay_rate + grad_squared.mean(axis=d1) * mixing_rate
      # vr lacks d0: d1's axis there.
      long_term_mean = self.vr.mean(axis=d1 - (d1 > d0), keepdims=True)
      r_factor = 1.0 / np.sqrt(self.vr / long_term_mean)
      c_factor = 1.0 / np.sqrt(self.vc)
      x = (grad * np.expand_dims(r_factor, d0) *
           np.expand_dims(c_factor, d1))
    else:
      self.v = self.v * decay_rate + grad_squared * mixing_rate
      x = grad / np.sqrt(self.v)
    if self.clipping_threshold is not None:
      clipping_denom = max(1.0, _rms(x) / self.clipping_threshold)
      self.clipped.append(clipping_denom > 1.0)
      x = x / clipping_denom
    subtrahend = x * update_scale
    if self.beta1:
      self.m = self.m * self.beta1 + subtrahend * (1.0 - self.beta1)
      subtrahend = self.m
    return var - subtrahend


# A tree as the Flax model names it: a matrix that mesh factors, one too
# narrow to factor, a vector, attention projections (factored only as
# mesh's [d, heads * kv] / [heads * kv, d]) and an R table.
D, HEADS, KV, MIN_DIM = 8, 2, 3, 4
SHAPES = {
    "encoder/layers_0/mlp/wi/kernel": (D, 10),
    "encoder/layers_0/narrow/kernel": (3, D),
    "encoder/layers_0/pre_mlp_layer_norm/scale": (D,),
    "encoder/layers_0/attention/query/kernel": (D, HEADS, KV),
    "encoder/layers_0/attention/out/kernel": (HEADS, KV, D),
    "encoder/layers_0/attention/random/R": (HEADS, 5, 5),
}
MESH_SHAPES = {
    "encoder/layers_0/attention/query/kernel": (D, HEADS * KV),
    "encoder/layers_0/attention/out/kernel": (HEADS * KV, D),
}
STEPS = 6
# Each step's gradient scale: a jump makes the update's RMS exceed 1.
GRAD_SCALES = (1.0, 0.5, 0.7, 20.0, 0.1, 3.0)


def _nest(flat):
  out = {}
  for name, value in flat.items():
    node = out
    parts = name.split("/")
    for part in parts[:-1]:
      node = node.setdefault(part, {})
    node[parts[-1]] = value
  return out


def _flat(tree, prefix=""):
  out = {}
  for key, value in tree.items():
    name = prefix + key
    if isinstance(value, dict):
      out.update(_flat(value, name + "/"))
    else:
      out[name] = np.asarray(value)
  return out


def _noam(step):
  """The schedule of these runs, mesh's formula (rsqrt, ramped down)."""
  warmup, total, fraction, multiplier = 2, 10, 0.5, 0.1
  return (multiplier / math.sqrt(max(step, warmup)) *
          min(1.0, (total - step) / (total * fraction)))


def _run_both(settings, mesh_view=True):
  """(optax's parameters, mesh's, mesh's clipping flags) after each step."""
  rng = np.random.RandomState(0)
  params = {k: rng.normal(size=s) for k, s in SHAPES.items()}
  grads = [{k: scale * rng.normal(size=s) for k, s in SHAPES.items()}
           for scale in GRAD_SCALES]
  schedule = functools.partial(
      schedules.learning_rate_schedule_noam, total_train_steps=10,
      warmup_steps=2, linear_decay_fraction=0.5, multiplier=0.1)
  transform = optimizer_lib.AdafactorOptimizer(
      learning_rate=schedule, min_dim_size_to_factor=MIN_DIM, **settings)
  state = transform.init(_nest(params))
  update = jax.jit(transform.update)
  got = _nest({k: jnp.asarray(v, jnp.float32) for k, v in params.items()})
  mesh_settings = dict(settings, min_dim_size_to_factor=MIN_DIM)
  references = {
      k: MeshAdafactor(MESH_SHAPES.get(k, s) if mesh_view else s, _noam,
                       **mesh_settings)
      for k, s in SHAPES.items()}
  want = dict(params)
  results = []
  for step, grad in enumerate(grads):
    updates, state = update(
        _nest({k: jnp.asarray(v, jnp.float32) for k, v in grad.items()}),
        state, got)
    got = jax.tree.map(lambda p, u: p + u, got, updates)
    for name, opt in references.items():
      shape = opt.m.shape
      want[name] = opt.apply_grad(
          grad[name].reshape(shape), want[name].reshape(shape),
          step).reshape(SHAPES[name])
    results.append((_flat(jax.device_get(got)), dict(want)))
  clipped = {k: opt.clipped for k, opt in references.items()}
  return results, clipped


ADAFACTOR_SETTINGS = {
    "beta1=0": {},
    "beta1=0.9": {"beta1": 0.9},
    "beta1=0.5,decay_rate=0.9,unscaled,unclipped": {
        "beta1": 0.5, "decay_rate": 0.9, "multiply_by_parameter_scale": False,
        "clipping_threshold": None},
    "exponent=0.5,clipping=1.2": {"decay_exponent": 0.5,
                                  "clipping_threshold": 1.2},
}


@pytest.mark.parametrize("settings", sorted(ADAFACTOR_SETTINGS))
def test_adafactor_is_mesh_adafactor(settings):
  settings = ADAFACTOR_SETTINGS[settings]
  results, clipped = _run_both(settings)
  for step, (got, want) in enumerate(results):
    for name in SHAPES:
      np.testing.assert_allclose(
          got[name], want[name], rtol=1e-6,
          atol=1e-6 * np.max(np.abs(want[name])),
          err_msg="%s after step %d" % (name, step))
  if settings.get("clipping_threshold", 1.0) is not None:
    flags = [f for steps in clipped.values() for f in steps]
    assert any(flags) and not all(flags), clipped  # Clipping is exercised.


def test_adafactor_factors_attention_as_mesh_does():
  # mesh's [d, heads * kv] is factored where the Flax [d, heads, kv] would
  # not be (kv < min_dim_size_to_factor): the tree tells them apart.
  assert _mesh_factored_dims(SHAPES["encoder/layers_0/attention/query/kernel"],
                             True, MIN_DIM) is None
  for name, shape in MESH_SHAPES.items():
    assert _mesh_factored_dims(shape, True, MIN_DIM), name
    assert optimizer_lib.mesh_shape(name, SHAPES[name]) == shape
  results, _ = _run_both({}, mesh_view=False)
  got, want = results[-1]
  for name in MESH_SHAPES:
    assert np.max(np.abs(got[name] - want[name])) > 1e-4 * np.max(
        np.abs(want[name])), name


# --- mesh's learning-rate schedules, in NumPy ---------------------------------


def _mesh_product_learning_rate(step, total_train_steps, factors=(),
                                offset=0):
  ret = 1.0
  for f in factors:
    ret *= f(step - offset, total_train_steps - offset) if callable(f) else f
  return ret


def _mesh_linear_decay(step, total_train_steps, steps_or_fraction=0.1):
  decay_steps = steps_or_fraction
  if steps_or_fraction <= 1:
    decay_steps *= total_train_steps
  return min(1.0, (total_train_steps - step) / decay_steps)


def _mesh_linear_warmup(step, total_train_steps, steps_or_fraction=10000):
  warmup_steps = steps_or_fraction
  if steps_or_fraction <= 1:
    warmup_steps *= total_train_steps
  return min(1.0, step / warmup_steps)


def _mesh_truncated_rsqrt(step, total_train_steps, warmup_steps=10000):
  del total_train_steps
  return 1.0 / math.sqrt(max(step, warmup_steps))


def _mesh_constant(step, total_train_steps, value=1.0):
  del step, total_train_steps
  return value


def _mesh_constant_learning_rate(step, total_train_steps, learning_rate):
  del step, total_train_steps
  return learning_rate


def _mesh_linear_decay_learning_rate(step, total_train_steps, initial_lr=0.1,
                                     offset=0):
  return initial_lr * min(1.0, (total_train_steps - step) /
                          (total_train_steps - offset))


def _mesh_learning_rate_schedule_noam(step, total_train_steps,
                                      warmup_steps=10000,
                                      linear_decay_fraction=0.1,
                                      multiplier=1.0, offset=0):
  train_steps = float(total_train_steps) - offset
  step_num = step - offset
  learning_rate = 1.0 / math.sqrt(max(step_num, warmup_steps)) * multiplier
  if linear_decay_fraction > 0:
    learning_rate *= min(1.0, (train_steps - step_num) /
                         (train_steps * linear_decay_fraction))
  return learning_rate


def _mesh_slanted_triangular(step, total_train_steps, cut_fraction=0.1,
                             ratio=32, max_learning_rate=0.01, start_step=0):
  train_steps = float(total_train_steps)
  step_num = step - float(start_step)
  cut = math.floor(train_steps * cut_fraction)
  if step_num < cut:
    p = step_num / cut
  else:
    p = 1 - (step_num - cut) / (cut * (1 / cut_fraction - 1))
  return max_learning_rate * (1 + p * (ratio - 1)) / ratio


# name -> (mesh's formula, keyword arguments to try besides the defaults).
MESH_SCHEDULES = {
    "product_learning_rate": (_mesh_product_learning_rate, [
        {"factors": [0.5, _mesh_truncated_rsqrt]},
        {"factors": [2.0, functools.partial(_mesh_linear_warmup,
                                            steps_or_fraction=300),
                     _mesh_linear_decay], "offset": 100}]),
    "linear_decay": (_mesh_linear_decay, [{"steps_or_fraction": 0.5},
                                          {"steps_or_fraction": 300}]),
    "linear_warmup": (_mesh_linear_warmup, [{"steps_or_fraction": 0.25},
                                            {"steps_or_fraction": 300}]),
    "truncated_rsqrt": (_mesh_truncated_rsqrt, [{"warmup_steps": 100}]),
    "constant": (_mesh_constant, [{"value": 0.003}]),
    "constant_learning_rate": (_mesh_constant_learning_rate,
                               [{"learning_rate": 0.001}]),
    "linear_decay_learning_rate": (_mesh_linear_decay_learning_rate, [
        {"initial_lr": 0.01, "offset": 200}]),
    "learning_rate_schedule_noam": (_mesh_learning_rate_schedule_noam, [
        {"warmup_steps": 100, "linear_decay_fraction": 0.0},
        {"warmup_steps": 100, "linear_decay_fraction": 0.3,
         "multiplier": 3.0, "offset": 50}]),
    "slanted_triangular": (_mesh_slanted_triangular, [
        {"cut_fraction": 0.2, "ratio": 8, "max_learning_rate": 0.1,
         "start_step": 20}]),
}
# Arguments mesh requires (gin.REQUIRED).
REQUIRED = {"constant_learning_rate": {"learning_rate": 0.001},
            "product_learning_rate": {"factors": [0.5]}}
TOTAL_STEPS = 1000
STEPS_TO_TRY = (0, 1, 50, 99, 100, 101, 250, 499, 900, 999, 1000)


def _schedule_names():
  """The public functions of `schedules`; each must be gin-configurable."""
  return sorted(name for name, fn in inspect.getmembers(
      schedules, inspect.isfunction)
                if fn.__module__ == schedules.__name__ and
                not name.startswith("_"))


def _as_ours(kwargs):
  """mesh's factors -> `schedules`' of the same name (and arguments)."""
  def ours(f):
    if not callable(f):
      return f
    base = f.func if isinstance(f, functools.partial) else f
    fn = getattr(schedules, base.__name__[len("_mesh_"):])
    if isinstance(f, functools.partial):
      return functools.partial(fn, **f.keywords)
    return fn
  return {k: [ours(f) for f in v] if k == "factors" else v
          for k, v in kwargs.items()}


def test_schedules_are_mesh_schedules_by_name():
  names = _schedule_names()
  assert set(names) == set(MESH_SCHEDULES)
  for name in names:
    assert gin.get_configurable("learning_rate_schedules." + name)


@pytest.mark.parametrize("name", _schedule_names())
def test_schedule_matches_mesh(name):
  fn = gin.get_configurable("learning_rate_schedules." + name)
  assert fn is not None
  mesh_fn, settings = MESH_SCHEDULES[name]
  for kwargs in [REQUIRED.get(name, {})] + settings:
    for step in STEPS_TO_TRY:
      want = mesh_fn(step, TOTAL_STEPS, **kwargs)
      got = fn(jnp.int32(step), TOTAL_STEPS, **_as_ours(kwargs))
      assert jnp.asarray(got).dtype == jnp.float32, name
      np.testing.assert_allclose(float(got), want, rtol=1e-6, atol=1e-12,
                                 err_msg="%s(%d, %r)" % (name, step, kwargs))
    # Traced (jit) as in the optimizer, at a step given as an array.
    jitted = jax.jit(functools.partial(fn, total_train_steps=TOTAL_STEPS,
                                       **_as_ours(kwargs)))
    np.testing.assert_allclose(float(jitted(jnp.int32(250))),
                               mesh_fn(250, TOTAL_STEPS, **kwargs), rtol=1e-6)


def _t5_gin_schedule_names():
  """The `learning_rate_schedules.X` names t5's own gin files use."""
  spec = importlib.util.find_spec("t5")
  if spec is None or not spec.submodule_search_locations:
    return set()
  root = os.path.join(list(spec.submodule_search_locations)[0], "models",
                      "gin")
  names = set()
  for path in glob.glob(os.path.join(root, "**", "*.gin"), recursive=True):
    with open(path) as f:
      names.update(re.findall(r"learning_rate_schedules\.(\w+)", f.read()))
  return names


def test_t5_gin_schedule_names_exist():
  used = {"learning_rate_schedule_noam", "constant_learning_rate"}
  found = _t5_gin_schedule_names()
  if found:  # t5 is installed: its gin files name these (and no others).
    assert used <= found, found
  for name in used | found:
    assert name in _schedule_names(), name
    assert gin.get_configurable(
        "learning_rate_schedules." + name) is getattr(schedules, name)


# --- Fix's table ------------------------------------------------------------


def test_fixed_random_table_is_not_trained():
  config = flax_helpers.tiny_config(variant="fixed_random",
                                    num_decoder_layers=1)
  model = t5.make_model(True, config)
  trainer = trainer_lib.Trainer(
      model, optimizer_lib.AdafactorOptimizer(learning_rate=lambda s: 0.1),
      partitioning.make_mesh((1, 1), jax.devices()[:1]))
  rng = np.random.RandomState(0)
  state = trainer.init_state(jax.tree.map(
      lambda leaf: rng.normal(size=leaf.shape).astype(np.float32),
      trainer.abstract_params))
  before = _flat(jax.device_get(state.params))
  table = [k for k in before if k.endswith("fixed_random/R")]
  assert table, sorted(before)
  targets = rng.randint(1, config.vocab_size, (2, 8)).astype(np.int32)
  batch = trainer.global_batch({
      trainer_lib.DECODER_INPUTS: np.pad(targets[:, :-1], ((0, 0), (1, 0))),
      trainer_lib.TARGETS: targets})
  # The model stops its gradient; the optimizer leaves it alone even so.
  def grads_and_pushed(state, batch):
    _, grads = trainer.loss_and_grads(state.params, batch, state.step)
    ones = jax.tree.map(jnp.ones_like, state.params)
    return grads, trainer.apply_gradients(state, ones).params

  grads, pushed = jax.device_get(jax.jit(grads_and_pushed)(state, batch))
  grads, pushed = _flat(grads), _flat(pushed)
  assert not any(np.any(grads[k]) for k in table)
  state, _ = trainer.train_step(state, batch)
  after = _flat(jax.device_get(state.params))
  for name in before:
    if name in table:
      np.testing.assert_array_equal(after[name], before[name], err_msg=name)
      np.testing.assert_array_equal(pushed[name], before[name], err_msg=name)
    else:
      assert np.any(after[name] != before[name]), name
      assert np.any(pushed[name] != before[name]), name
