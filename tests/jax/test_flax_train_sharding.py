# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The sharded training step on 8 CPU devices agrees with one device's.

For V, R, D+V and R+V (rows of `attentions.VARIANTS` by label), a
one-layer decoder-only T5 whose heads, d_ff and vocabulary divide by 8
takes one training step (`Trainer.loss_and_grads`, then
`Trainer.apply_gradients`, jitted with the trainer's shardings; and once,
for R on (2, 4), `Trainer.train_step` itself) on the (data, model) meshes
(8, 1), (4, 2), (2, 4) and (1, 8) of `partitioning.make_mesh`. Its loss,
its gradients and the parameters after the update equal those of a
one-device mesh within 1e-5 relative. Each device holds exactly 1/model
of every parameter and optimizer slot split on the model axis and all of
the others; the bytes per device (`partitioning.bytes_per_device`) are
printed (`pytest -s`) and recorded as test properties.

The 8 devices are `jax_num_cpu_devices`, which must be set before JAX's
backend starts: the measurements run in one child process (this file run
as a script), so that the other tests' processes keep their own devices
and a test that sets another count is not refused.
"""

import json
import os
import subprocess
import sys

from flax import traverse_util
import flax.linen as nn
import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np
import pytest

import flax_helpers
from mtf_synthesizer import attentions
from mtf_synthesizer.flax_model import mesh_checkpoint
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.flax_train import optimizer as optimizer_lib
from mtf_synthesizer.flax_train import partitioning
from mtf_synthesizer.flax_train import trainer as trainer_lib

DEVICES = 8
LABELS = ("V", "R", "D+V", "R+V")
MESHES = ((8, 1), (4, 2), (2, 4), (1, 8))
RTOL = 1e-5
LENGTH, VOCAB = 8, 64
# Logical axis names that the rules put on the model axis.
MODEL_SPLIT_NAMES = ("heads", "joined_kv", "mlp", "vocab")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _rel(got, want) -> float:
  """max |got - want| / max |want| (want's scale; 0 if both are 0)."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  scale = np.max(np.abs(want)) if want.size else 0.0
  diff = np.max(np.abs(got - want)) if want.size else 0.0
  return float(diff / scale) if scale else float(diff)


def _worst(got, want):
  """(largest `_rel` over the trees' leaves, that leaf's name)."""
  errors = {name: _rel(got[name], want[name]) for name in want}
  assert set(got) == set(want)
  name = max(errors, key=errors.get)
  return errors[name], name


def _path_name(path) -> str:
  return "/".join(str(getattr(k, "key", getattr(k, "name", getattr(
      k, "idx", k)))) for k in path)


def _factored_slots(slots, grads, logical, mesh_shape):
  """Each factored second-moment slot: the dimensions it keeps, found by value.

  After the first update (decay 0) a factored slot is the mean of the
  squared gradient (plus epsilon1) over the dimension it drops, in the
  parameter's shape in mesh (`optimizer.mesh_shape`: an attention
  projection as one matrix [d_model, heads * d_kv] or [heads * d_kv,
  d_model]).

  Args:
    slots: the optimizer state's leaves, by path.
    grads: the one-device gradients, by parameter.
    logical: each parameter's logical axis names.
    mesh_shape: `optimizer.mesh_shape`.

  Returns:
    slot path -> {"param", "keeps_model_split": whether a dimension that it
    keeps is one the model axis splits}.
  """
  out = {}
  for name, value in slots.items():
    param = next((p for p in grads if name.endswith("/" + p)), None)
    if param is None or value.shape == (1,) or not any(
        part in ("v_row", "v_col") for part in name.split("/")):
      continue  # Not a factored slot ((1,): a placeholder of optax's).
    grad = np.asarray(grads[param], np.float64)
    view = mesh_shape(param, grad.shape)
    # The Flax dimensions of each of mesh's dimensions.
    if len(view) == grad.ndim:
      merged = [[i] for i in range(grad.ndim)]
    elif view[0] == grad.shape[0]:
      merged = [[0], [1, 2]]
    else:
      merged = [[0, 1], [2]]
    squared = grad.reshape(view) ** 2 + 1e-30
    dropped = [a for a in range(len(view))
               if squared.mean(axis=a).shape == value.shape and np.allclose(
                   squared.mean(axis=a), value, rtol=1e-4, atol=0)]
    assert len(dropped) == 1, (name, dropped)
    kept = [d for a in range(len(view)) if a != dropped[0] for d in merged[a]]
    out[name] = {"param": param, "keeps_model_split": any(
        logical[param][d] in MODEL_SPLIT_NAMES for d in kept)}
  return out


def _leaf_bytes(tree, mesh_axis):
  """Per leaf: its bytes, whether split on `mesh_axis`, each device's."""
  out = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    per_device = {}
    for shard in leaf.addressable_shards:
      per_device[shard.device.id] = (per_device.get(shard.device.id, 0) +
                                     shard.data.nbytes)
    spec = leaf.sharding.spec
    split = any(axes == mesh_axis or
                (isinstance(axes, tuple) and mesh_axis in axes)
                for axes in spec)
    out[_path_name(path)] = {
        "nbytes": int(leaf.nbytes), "split": bool(split),
        "per_device": [per_device.get(i, 0) for i in range(DEVICES)]}
  return out


def _flat(tree):
  return {k: np.asarray(v) for k, v in
          traverse_util.flatten_dict(jax.device_get(tree), sep="/").items()}


def _one_step(model, optimizer, params, batch, mesh, check_train_step=False):
  """One training step on `mesh`: its loss, gradients, result and bytes."""
  trainer = trainer_lib.Trainer(model, optimizer, mesh)
  state = trainer.init_state(params)
  bytes_ = {"params": _leaf_bytes(state.params, partitioning.MODEL),
            "opt_state": _leaf_bytes(state.opt_state, partitioning.MODEL),
            "totals": {
                name: [partitioning.bytes_per_device(tree).get(d, 0)
                       for d in mesh.devices.flat]
                for name, tree in (("params", state.params),
                                   ("opt_state", state.opt_state))}}
  global_batch = trainer.global_batch(batch)

  def train_step(state, batch):
    # The trainer's step, with its gradients as an output.
    loss, grads = trainer.loss_and_grads(state.params, batch, state.step)
    return loss, grads, trainer.apply_gradients(state, grads)

  loss, grads, new_state = jax.jit(
      train_step, in_shardings=(trainer.state_shardings, None),
      out_shardings=(NamedSharding(mesh, P()), trainer.params_shardings,
                     trainer.state_shardings))(state, global_batch)
  out = {"loss": float(loss), "grads": _flat(grads),
         "params": _flat(new_state.params), "new_step": int(new_state.step),
         "bytes": bytes_,
         "slots": {_path_name(p): np.asarray(v) for p, v in
                   jax.tree_util.tree_leaves_with_path(jax.device_get(
                       new_state.opt_state))}}
  if check_train_step:
    stepped, metrics = trainer.train_step(state, global_batch)
    out["train_step_rel"] = max(
        _rel(metrics["loss"], loss),
        _worst(_flat(stepped.params), out["params"])[0])
  return out


def _measure_variant(variant, batch, rng):
  """A variant's steps on one device and on each mesh, compared."""
  config = flax_helpers.tiny_config(
      vocab_size=VOCAB, d_model=32, num_heads=8, head_dim=4, d_ff=64,
      num_decoder_layers=1, max_length=LENGTH, variant=variant.name)
  model = t5.make_model(True, config)
  boxed = jax.eval_shape(lambda: model.init(
      jax.random.PRNGKey(0), *mesh_checkpoint.dummy_inputs(model),
      enable_dropout=False)["params"])
  # Drawn here: no compilation. Norm scales near 1, others ~ 1/sqrt(fan in).
  params = jax.tree_util.tree_map_with_path(
      lambda path, leaf: (
          1.0 + 0.1 * rng.normal(size=leaf.shape) if path[-1].key == "scale"
          else rng.normal(size=leaf.shape) / np.sqrt(leaf.shape[0])
      ).astype(np.float32), nn.unbox(boxed))
  logical = {k: tuple(v) for k, v in traverse_util.flatten_dict(
      nn.get_partition_spec(boxed), sep="/").items()}
  # Factors the matrices of 8 and more rows and columns.
  optimizer = optimizer_lib.AdafactorOptimizer(
      learning_rate=lambda step: 0.01, min_dim_size_to_factor=8)

  one = _one_step(model, optimizer, params, batch,
                  partitioning.make_mesh((1, 1), jax.devices()[:1]))
  meshes = {}
  for shape in MESHES:
    got = _one_step(model, optimizer, params, batch,
                    partitioning.make_mesh(shape),
                    check_train_step=(variant.label, shape) == ("R", (2, 4)))
    grads_rel, grads_leaf = _worst(got["grads"], one["grads"])
    params_rel, params_leaf = _worst(got["params"], one["params"])
    slots = _factored_slots(got["slots"], one["grads"], logical,
                            optimizer_lib.mesh_shape)
    for name, slot in slots.items():
      slot["split"] = got["bytes"]["opt_state"][name]["split"]
    meshes["%dx%d" % shape] = {
        "factored_slots": slots,
        "loss": got["loss"], "one_loss": one["loss"],
        "loss_rel": _rel(got["loss"], one["loss"]),
        "grads_rel": grads_rel, "grads_leaf": grads_leaf,
        "params_rel": params_rel, "params_leaf": params_leaf,
        "params_moved": _worst(got["params"], _flat(params))[0],
        "new_step": got["new_step"], "bytes": got["bytes"],
        "train_step_rel": got.get("train_step_rel")}
  return {"label": variant.label, "logical": logical, "meshes": meshes}


def _measure():
  """Every (variant, mesh)'s agreement with one device, and its bytes.

  Runs in the child process, with 8 CPU devices.

  Returns:
    variant name -> {"label", "logical": parameter -> logical axis names,
    "meshes": "DxM" -> numbers}.
  """
  assert jax.device_count() == DEVICES, jax.devices()
  rng = np.random.RandomState(0)
  targets = rng.randint(1, VOCAB, (DEVICES, LENGTH)).astype(np.int32)
  targets[:, 6:] = 0
  targets[0, 3:] = 0
  batch = {trainer_lib.DECODER_INPUTS: np.pad(targets[:, :-1],
                                              ((0, 0), (1, 0))),
           trainer_lib.TARGETS: targets}
  return {v.name: _measure_variant(v, batch, rng) for v in _variants()}


def _variants():
  variants = [v for v in attentions.VARIANTS if v.label in LABELS]
  assert sorted(v.label for v in variants) == sorted(LABELS)
  return variants


@pytest.fixture(scope="module")
def measured():
  """The child process's measurements (8 CPU devices)."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [ROOT, HERE] + [p for p in [env.get("PYTHONPATH")] if p])
  env["JAX_PLATFORMS"] = "cpu"
  # LLVM's optimizations of the CPU code take most of the compile time;
  # the HLO passes, SPMD partitioning included, run as in training.
  env["XLA_FLAGS"] = " ".join(
      [env.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]).strip()
  proc = subprocess.run([sys.executable, os.path.abspath(__file__)],
                        env=env, cwd=HERE, capture_output=True, text=True,
                        timeout=900, check=False)
  assert proc.returncode == 0, proc.stderr[-5000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variant", [v.name for v in _variants()])
def test_sharded_step_matches_one_device(measured, variant):
  result = measured[variant]
  assert sorted(result["meshes"]) == sorted("%dx%d" % s for s in MESHES)
  if result["label"] == "R":
    assert result["meshes"]["2x4"]["train_step_rel"] is not None
  for mesh, m in sorted(result["meshes"].items()):
    where = "%s (%s) on %s" % (variant, result["label"], mesh)
    assert m["new_step"] == 1, where
    assert m["loss_rel"] <= RTOL, (where, m["loss"], m["one_loss"])
    if m["train_step_rel"] is not None:
      # `Trainer.train_step` (jitted, donating) is the same step.
      assert m["train_step_rel"] <= RTOL, where
    assert m["grads_rel"] <= RTOL, (where, m["grads_leaf"], m["grads_rel"])
    assert m["params_rel"] <= RTOL, (where, m["params_leaf"],
                                     m["params_rel"])
    # The update moved the parameters well beyond the tolerance.
    assert m["params_moved"] > 100 * RTOL, where
    print("%-15s %-4s %s: loss %.6f, |loss - 1 device's| %.1e, "
          "gradients %.1e, updated parameters %.1e (relative)" % (
              variant, result["label"], mesh, m["loss"], m["loss_rel"],
              m["grads_rel"], m["params_rel"]))


@pytest.mark.parametrize("variant", [v.name for v in _variants()])
def test_each_device_holds_its_part(measured, variant, record_property):
  result = measured[variant]
  expect_split = sorted(
      name for name, axes in result["logical"].items()
      if any(a in MODEL_SPLIT_NAMES for a in axes))
  assert any(name.endswith("random/R") for name in expect_split) == (
      result["label"] in ("R", "R+V"))
  for mesh, m in sorted(result["meshes"].items()):
    model = int(mesh.split("x")[1])
    for kind in ("params", "opt_state"):
      leaves = m["bytes"][kind]
      split = {n: l for n, l in leaves.items() if l["split"]}
      whole = {n: l for n, l in leaves.items() if not l["split"]}
      for name, leaf in split.items():
        assert leaf["nbytes"] % model == 0, (mesh, name)
        assert leaf["per_device"] == [leaf["nbytes"] // model] * DEVICES, (
            mesh, kind, name, leaf)
      for name, leaf in whole.items():
        assert leaf["per_device"] == [leaf["nbytes"]] * DEVICES, (
            mesh, kind, name, leaf)
      split_bytes = sum(l["nbytes"] for l in split.values())
      whole_bytes = sum(l["nbytes"] for l in whole.values())
      expected = whole_bytes + split_bytes // model
      assert m["bytes"]["totals"][kind] == [expected] * DEVICES, (
          mesh, kind, m["bytes"]["totals"][kind], expected)
      if model > 1:
        assert split, (mesh, kind)
        if kind == "params":
          assert split_bytes > whole_bytes, mesh
      record_property("%s_%s_bytes_per_device" % (mesh, kind), expected)
      record_property("%s_%s_bytes_split_over_model" % (mesh, kind),
                      split_bytes)
      record_property("%s_%s_bytes_replicated" % (mesh, kind), whole_bytes)
      print("%-15s %-4s %s %-9s: %6d bytes per device = %6d replicated + "
            "%6d split / %d" % (variant, result["label"], mesh, kind,
                                expected, whole_bytes, split_bytes, model))
    if model > 1:
      # Every parameter with a heads, mlp or vocab dimension is split (all
      # of them divide by 8).
      params_split = sorted(
          n for n, l in m["bytes"]["params"].items() if l["split"])
      assert params_split == expect_split, mesh
      # A factored slot of the second moment is split if it keeps a
      # dimension that its parameter splits, and whole if not.
      slots = m["factored_slots"]
      params = sorted(slot["param"] for slot in slots.values())
      assert params and params[::2] == params[1::2], params  # Row, column.
      assert {s["keeps_model_split"] for s in slots.values()} == {True,
                                                                   False}
      for name, slot in sorted(slots.items()):
        assert slot["split"] == slot["keeps_model_split"], (mesh, name, slot)


if __name__ == "__main__":
  jax.config.update("jax_num_cpu_devices", DEVICES)
  print(json.dumps(_measure()))
