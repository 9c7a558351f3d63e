# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""LeanAdafactorOptimizer against mesh's Adafactor and a NumPy Adafactor.

Several steps of both optimizers on the same variables (factored, with a
stacked dimension, unfactored) from the same values, on one device and on a
split mesh, must give the same variables and slots; both must give what the
NumPy reference below (written from the Adafactor paper's algorithm as mesh
configures it) gives. Through the stock CLI (slow), the gin file's optimizer
trains a Random Synthesizer to mesh's weights and slots, and mesh's Adafactor
resumes from its checkpoint.
"""

import os

import gin
import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import graph_order
import lowering as lowering_lib
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner
from mtf_synthesizer.training import optimize

STEPS = 3
LEARNING_RATE = 0.01
# (name, dims): "table" like R's [heads, memory, length] (factored over the
# two largest), "mat" a 2-D factored kernel, "small" and "vec" unfactored.
VARIABLES = [
    ("table", [("heads", 4), ("a", 160), ("b", 144)]),
    ("mat", [("x", 256), ("y", 130)]),
    ("small", [("u", 3), ("w", 200)]),
    ("vec", [("z", 7)]),
]
OPTIONS = {
    "defaults": {},
    "momentum, no clipping, no parameter scale": dict(
        beta1=0.9, clipping_threshold=None,
        multiply_by_parameter_scale=False),
    "stacked heads, mat excluded from parameter scale": dict(
        stacked_dim_names=["heads"], exclude_from_parameter_scale=["mat"]),
    "clipping at 0.5": dict(clipping_threshold=0.5),
}
MESHES = {
    "one device": ("", ""),
    "split": ("model:2,batch:2", "heads:model,b:batch,x:model"),
}


def _data(seed=0):
  rng = np.random.RandomState(seed)
  data = {}
  for name, dims in VARIABLES:
    shape = [size for _, size in dims]
    # The gradient at each step is a * var + b (it changes as var does).
    data[name] = (rng.randn(*shape).astype(np.float32),
                  rng.randn(*shape).astype(np.float32),
                  (0.1 * rng.randn(*shape)).astype(np.float32))
  return data


def _decay_rate(step):
  return 1.0 - (step + 1.0) ** -0.8


def _run_mtf(optimizer_class, options, mesh_shape, layout):
  """STEPS updates; returns {variable or slot name: value after each step}."""
  data = _data()
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    global_step = tf.train.get_or_create_global_step()
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    grads, variables = [], []
    for name, dims in VARIABLES:
      shape = mtf.Shape([mtf.Dimension(n, s) for n, s in dims])
      init, a, b = data[name]
      var = mtf.get_variable(mesh, name, shape,
                             initializer=tf.constant_initializer(init))
      grads.append(var * mtf.import_tf_tensor(mesh, a, shape)
                   + mtf.import_tf_tensor(mesh, b, shape))
      variables.append(var.operation)
    # The decay rate of mesh's default schedule, at the global step.
    decay = 1.0 - tf.pow(tf.cast(global_step, tf.float32) + 1.0, -0.8)
    optimizer = optimizer_class(learning_rate=LEARNING_RATE,
                                decay_rate=decay, **options)
    updates = optimizer.apply_grads(grads, variables)
    lowering = lowering_lib.lower(graph, mesh, mesh_shape, layout,
                                  autostack=False)
    update_ops = [lowering.lowered_operation(op) for op in updates]
    # The step advances after the updates that read it (the decay rate);
    # unordered, the increment could run first on a busy machine.
    with tf.control_dependencies(update_ops):
      train_op = tf.assign_add(global_step, 1).op
    state = {v.name: lowering.export_to_tf_tensor(v.outputs[0])
             for v in graph.all_variables}
    with tf.Session(graph=tf_graph) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(lowering.copy_masters_to_slices())
      history = []
      for _ in range(STEPS):
        sess.run(train_op)
        history.append(sess.run(state))
  return history


def _numpy_adafactor(options):
  """STEPS updates of mesh's Adafactor, in NumPy; same output as _run_mtf."""
  beta1 = options.get("beta1", 0.0)
  clipping = options.get("clipping_threshold", 1.0)
  scale_by_parameter = options.get("multiply_by_parameter_scale", True)
  stacked = options.get("stacked_dim_names", [])
  excluded = options.get("exclude_from_parameter_scale", [])
  data = _data()
  values = {name: data[name][0].astype(np.float64) for name, _ in VARIABLES}
  slots = {}
  history = []
  for step in range(STEPS):
    decay = _decay_rate(step)
    for name, dims in VARIABLES:
      w = values[name]
      g = data[name][1] * w + data[name][2]
      free = [i for i, (n, _) in enumerate(dims) if n not in stacked]
      by_size = sorted(free, key=lambda i: -dims[i][1])
      factored = len(free) >= 2 and dims[by_size[1]][1] >= 128
      g2 = g * g + 1e-30
      if factored:
        a0, a1 = by_size[:2]  # the largest dimension, the second
        vr = slots.get(name + "_slot_vr", 0.0) * decay + (1 - decay) * (
            g2.mean(axis=a0, keepdims=True))
        vc = slots.get(name + "_slot_vc", 0.0) * decay + (1 - decay) * (
            g2.mean(axis=a1, keepdims=True))
        slots[name + "_slot_vr"], slots[name + "_slot_vc"] = vr, vc
        x = g / np.sqrt(vr / vr.mean(axis=a1, keepdims=True)) / np.sqrt(vc)
      else:
        v = slots.get(name + "_slot_v", 0.0) * decay + (1 - decay) * g2
        slots[name + "_slot_v"] = v
        x = g / np.sqrt(v)
      if clipping is not None:
        x /= max(1.0, np.sqrt((x * x).mean()) / clipping)
      scale = LEARNING_RATE
      if scale_by_parameter and not any(s in name for s in excluded):
        axes = tuple(free)
        scale = LEARNING_RATE * np.maximum(
            np.sqrt((w * w).mean(axis=axes, keepdims=True)), 1e-3)
      update = x * scale
      if beta1:
        update = (slots.get(name + "_slot_m", 0.0) * beta1
                  + update * (1 - beta1))
        slots[name + "_slot_m"] = update
      values[name] = w - update
    state = dict(values)
    # mesh's factored slots drop the reduced dimension; NumPy's keep it as
    # size 1 (no variable above has another dimension of size 1).
    state.update({k: np.squeeze(v) if k.endswith(("_vr", "_vc")) else v
                  for k, v in slots.items()})
    history.append(state)
  return history


@pytest.fixture(scope="module")
def runs():
  cache = {}

  def get(optimizer_class, option, mesh):
    key = (optimizer_class, option, mesh)
    if key not in cache:
      cache[key] = _run_mtf(optimizer_class, OPTIONS[option], *MESHES[mesh])
    return cache[key]
  return get


def _assert_close(got, want, what):
  assert set(got) == set(want), what
  for name in sorted(want):
    np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=1e-7,
                               err_msg="%s: %s" % (what, name))


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_mesh_adafactor_matches_numpy(runs, option):
  """The reference is mesh's algorithm (this test can tell it is not)."""
  want = _numpy_adafactor(OPTIONS[option])
  got = runs(mtf.optimize.AdafactorOptimizer, option, "one device")
  for step in range(STEPS):
    _assert_close(got[step], want[step], "step %d" % step)


@pytest.mark.parametrize("mesh", sorted(MESHES))
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_lean_adafactor_matches_mesh_and_numpy(runs, option, mesh):
  want = _numpy_adafactor(OPTIONS[option])
  got = runs(optimize.LeanAdafactorOptimizer, option, mesh)
  theirs = runs(mtf.optimize.AdafactorOptimizer, option, "one device")
  for step in range(STEPS):
    _assert_close(got[step], want[step], "numpy, step %d" % step)
    _assert_close(got[step], theirs[step], "mesh, step %d" % step)


def test_fewer_full_size_ops_for_a_large_table():
  """The factored update of a large table makes fewer full-size TF ops."""

  def full_size_ops(optimizer_class):
    tf_graph = tf.Graph()
    with tf_graph.as_default():
      tf.train.get_or_create_global_step()
      graph = mtf.Graph()
      mesh = mtf.Mesh(graph, "mesh")
      shape = mtf.Shape([mtf.Dimension("heads", 2), mtf.Dimension("a", 256),
                         mtf.Dimension("b", 256)])
      var = mtf.get_variable(mesh, "table", shape)
      updates = optimizer_class().apply_grads([var * 2.0], [var.operation])
      lowering = lowering_lib.lower(graph, mesh)
      for op in updates:
        lowering.lowered_operation(op)
      return [op.type for op in tf_graph.get_operations()
              if op.outputs and op.outputs[0].shape.num_elements() ==
              shape.size and op.type not in ("Const", "Identity",
                                             "VarHandleOp", "ReadVariableOp",
                                             "Reshape")]

  mesh_ops = full_size_ops(mtf.optimize.AdafactorOptimizer)
  lean_ops = full_size_ops(optimize.LeanAdafactorOptimizer)
  assert len(lean_ops) <= len(mesh_ops) - 4, (lean_ops, mesh_ops)


@pytest.mark.parametrize("one_variable_at_a_time", [True, False])
def test_factored_statistics_run_one_variable_at_a_time(
    one_variable_at_a_time):
  """The second factored variable squares its gradient after the first's
  statistics, so two g^2 temporaries are never live together, and the
  first does not wait for the second; unless turned off."""
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.train.get_or_create_global_step()
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    variables = []
    for name, size in (("first", 128), ("second", 160)):
      shape = mtf.Shape([mtf.Dimension("rows_" + name, size),
                         mtf.Dimension("cols_" + name, size)])
      variables.append(mtf.get_variable(mesh, name, shape))
    optimizer = optimize.LeanAdafactorOptimizer(
        one_variable_at_a_time=one_variable_at_a_time)
    updates = optimizer.apply_grads(
        [v * 2.0 for v in variables], [v.operation for v in variables])
    lowering = lowering_lib.lower(graph, mesh)
    for op in updates:
      lowering.lowered_operation(op)
  # g^2 is the first square in each variable's scope (the others square
  # the small factors for the clipping).
  squares = {name: [op for op in tf_graph.get_operations()
                    if op.type == "Square"
                    and op.name.startswith(name + "/adafactor/square/")]
             for name in ("first", "second")}
  assert len(squares["first"]) == len(squares["second"]) == 1, squares

  def statistics(name):
    return {op for op in tf_graph.get_operations()
            if op.type == "Rsqrt" and op.name.startswith(name + "/adafactor/")}

  assert statistics("first")
  assert (statistics("first") <= graph_order.ancestors(squares["second"][0])
         ) == one_variable_at_a_time
  assert not statistics("second") & graph_order.ancestors(squares["first"][0])


@pytest.mark.parametrize("optimizer_class, holds_back", [
    (mtf.optimize.AdafactorOptimizer, False),
    (optimize.LeanAdafactorOptimizer, True),
])
def test_no_variable_sized_temporary_before_the_gradient(
    optimizer_class, holds_back):
  """Every variable-sized op of an update waits for the variable's
  gradient: mesh's decays the full-size slots (v, and m with momentum)
  before it exists, and TF may run that when the step starts and hold the
  result through the backward pass."""
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.train.get_or_create_global_step()
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    grads, variables = [], []
    for name, dims in VARIABLES:
      shape = mtf.Shape([mtf.Dimension(n, s) for n, s in dims])
      var = mtf.get_variable(mesh, name, shape)
      with tf.variable_scope("gradient_of_" + name):
        grads.append(var * 2.0)
      variables.append(var.operation)
    updates = optimizer_class(beta1=0.9).apply_grads(grads, variables)
    lowering = lowering_lib.lower(graph, mesh)
    for op in updates:
      lowering.lowered_operation(op)
  early = []
  for name, dims in VARIABLES:
    size = np.prod([s for _, s in dims])
    gradient = {op for op in tf_graph.get_operations()
                if op.name.startswith("gradient_of_" + name + "/")}
    assert gradient, name
    for op in tf_graph.get_operations():
      if (op.name.startswith(name + "/adafactor/") and op.outputs
          and op.outputs[0].shape.num_elements() == size
          and op.type not in ("Const", "Identity", "Reshape",
                                  "ReadVariableOp")
          and not gradient & graph_order.ancestors(op)):
        early.append(op.name)
  assert (not early) == holds_back, early


def test_gin_bindings_of_mesh_adafactor_apply():
  """A T5 operative config's AdafactorOptimizer.* bindings reach it."""
  with gin.unlock_config():
    gin.parse_config("AdafactorOptimizer.beta1 = 0.25")
  try:
    assert optimize.LeanAdafactorOptimizer()._beta1 == 0.25
    assert optimize.LeanAdafactorOptimizer(beta1=0.5)._beta1 == 0.5
  finally:
    gin.clear_config()


# --- through the stock CLI -------------------------------------------------

_CLI_LENGTH = 128  # R's [heads, 128, 128] tables are factored (>= 128)
_CLI_DIMS = {"d_model": 32, "d_ff": 64, "num_layers": 1, "num_heads": 2}
_SEED_PARAMS = [
    "utils.run.train_model_fn = @mtf_synthesizer.deterministic_train_model",
    "mtf_synthesizer.deterministic_train_model.tf_random_seed = 1"]


def _train(model_dir, steps, gin_files=()):
  """Trains R by the stock CLI; returns the checkpoint's variables."""
  proc = runner.run(commands.local_train(
      model_dir, "random", steps, length=_CLI_LENGTH, dims=_CLI_DIMS,
      gin_files=gin_files, gin_params=_SEED_PARAMS), timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  checkpoint = tf.train.latest_checkpoint(model_dir)
  assert checkpoint.endswith("-%d" % steps), checkpoint
  reader = tf.train.load_checkpoint(checkpoint)
  values = {}
  for name in reader.get_variable_to_shape_map():
    value = np.asarray(reader.get_tensor(name))
    # bfloat16 (T5's tiny model) and float32 variables, compared as float32.
    values[name] = value if value.dtype.kind in "iub" else value.astype(
        np.float32)
  return values


@pytest.mark.slow  # runs the stock CLI
def test_stock_cli_trains_with_the_lean_file_as_with_mesh_adafactor(
    tmp_path):
  """Mesh's weights and slots after 4 steps; mesh's Adafactor resumes."""
  lean_dir, mesh_dir = str(tmp_path / "lean"), str(tmp_path / "mesh")
  lean = _train(lean_dir, 4, ["synthesizer/lean_adafactor.gin"])
  mesh = _train(mesh_dir, 4)
  with open(os.path.join(lean_dir, "operative_config.gin")) as f:
    assert "@mtf_synthesizer.LeanAdafactorOptimizer" in f.read()
  with open(os.path.join(mesh_dir, "operative_config.gin")) as f:
    assert "LeanAdafactorOptimizer" not in f.read()
  assert sorted(lean) == sorted(mesh)
  # R's tables are factored: their slots are mesh's vr and vc.
  assert any(name.endswith("R_slot_vr") for name in lean), sorted(lean)
  for name in sorted(lean):
    if lean[name].dtype.kind != "f":
      continue
    # bfloat16 variables: the rounding of an update may differ by one unit
    # in the last place for a few elements; a wrong update moves most.
    off = ~np.isclose(lean[name], mesh[name], rtol=1e-3, atol=1e-6)
    assert off.mean() <= 1e-3, (name, off.sum(), off.size)
  # The same slots by name: mesh's Adafactor goes on from the checkpoint,
  # and the weights move.
  resumed = _train(lean_dir, 8)
  assert any(not np.allclose(lean[n], resumed[n]) for n in lean
             if n.endswith("/R")), "R's tables never moved"
