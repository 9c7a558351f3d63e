# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""`partitioning`: mesh shapes, logical names to mesh axes, slots' splits."""

import jax
import jax.numpy as jnp
from jax.sharding import AbstractMesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np
import pytest

from mtf_synthesizer.flax_train import optimizer as optimizer_lib
from mtf_synthesizer.flax_train import partitioning

DATA, MODEL = partitioning.DATA, partitioning.MODEL


@pytest.mark.parametrize("shape,devices,want", [
    ((-1, 1), 8, (8, 1)),
    ((2, -1), 8, (2, 4)),
    ((-1, 8), 8, (1, 8)),
    ((4, 2), 8, (4, 2)),
    ((1, 1), 1, (1, 1)),
    ([-1, 2], 6, (3, 2)),
])
def test_resolve_mesh_shape(shape, devices, want):
  assert partitioning.resolve_mesh_shape(shape, devices) == want


@pytest.mark.parametrize("shape,devices", [
    ((-1, -1), 8),      # Two unknowns.
    ((3, -1), 8),       # 3 does not divide 8.
    ((-1, 3), 8),
    ((2, 2), 8),        # Too few.
    ((4, 4), 8),        # Too many.
    ((0, 8), 8),        # Empty axis.
    ((-2, 4), 8),
    ((8,), 8),          # Not (data, model).
    ((1, 2, 4), 8),
])
def test_resolve_mesh_shape_refuses(shape, devices):
  with pytest.raises(partitioning.MeshShapeError):
    partitioning.resolve_mesh_shape(shape, devices)
  assert issubclass(partitioning.MeshShapeError, ValueError)


def test_make_mesh_refuses_a_shape_that_the_devices_do_not_fill():
  devices = jax.devices()[:1]
  with pytest.raises(partitioning.MeshShapeError):
    partitioning.make_mesh((2, 1), devices)
  mesh = partitioning.make_mesh((-1, 1), devices)
  assert mesh.axis_names == (DATA, MODEL)
  assert dict(mesh.shape) == {DATA: 1, MODEL: 1}


@pytest.mark.parametrize("logical,want", [
    # R's table names "length" twice; "heads" takes the model axis.
    (("heads", "length", "length"), P(MODEL, None, None)),
    (("embed", "heads", "kv"), P(None, MODEL, None)),
    (("heads", "kv", "embed"), P(MODEL, None, None)),
    (("vocab", "embed"), P(MODEL, None)),
    (("embed", "mlp"), P(None, MODEL)),
    (("batch", "length"), P(DATA, None)),
    ((None, "heads"), P(None, MODEL)),
    (("heads", "relpos_buckets"), P(MODEL, None)),
    # A mesh axis splits one dimension at most: the first that asks.
    (("heads", "mlp"), P(MODEL, None)),
    (("mlp", "heads", "vocab"), P(MODEL, None, None)),
    (("batch", "heads", "batch"), P(DATA, MODEL, None)),
    (("unknown", None), P(None, None)),
    ((), P()),
])
def test_mesh_spec(logical, want):
  assert partitioning.mesh_spec(logical) == want


def test_mesh_spec_rules_first_match_wins():
  rules = (("heads", None), ("heads", MODEL), ("length", MODEL))
  assert partitioning.mesh_spec(("heads", "length", "length"),
                                rules) == P(None, MODEL, None)
  assert partitioning.mesh_spec(("heads", "kv"), rules) == P(None, None)


@pytest.mark.parametrize("spec,shape,want", [
    (P(MODEL, None), (8, 3), P(MODEL, None)),
    (P(MODEL, None), (6, 8), P(None, None)),     # 4 does not divide 6.
    (P(None, MODEL), (6, 12), P(None, MODEL)),
    (P(DATA, MODEL), (3, 8), P(None, MODEL)),    # 2 does not divide 3.
    (P((DATA, MODEL),), (16,), P((DATA, MODEL),)),
    (P((DATA, MODEL),), (4,), P(None)),          # 8 does not divide 4.
    (P(MODEL), (8, 5, 7), P(MODEL, None, None)),  # Shorter spec: padded.
    (P(), (5,), P(None)),
])
def test_fit(spec, shape, want):
  mesh = AbstractMesh((2, 4), (DATA, MODEL))
  assert partitioning.fit(spec, shape, mesh) == want


def test_factored_slots_keep_the_split_of_the_dimensions_they_keep():
  # Square in mesh's shapes (as T5's attention projections are: d_model =
  # heads * d_kv), so that a slot's shape does not tell which dimension it
  # dropped: the slot's values do (after one update, the mean of the
  # squared gradient over the dimension it dropped).
  shapes = {
      "attention": {"query": {"kernel": (4, 2, 2)},
                    "out": {"kernel": (2, 2, 4)},
                    "random": {"R": (4, 4, 4)}},
      "mlp": {"wi": {"kernel": (4, 4)}},
  }
  # Each parameter's split, and that of its mesh-shaped view.
  specs = {
      "attention/query/kernel": (P(None, MODEL, None), (None, MODEL)),
      "attention/out/kernel": (P(MODEL, None, None), (MODEL, None)),
      "attention/random/R": (P(MODEL, None, None), (MODEL, None, None)),
      "mlp/wi/kernel": (P(None, MODEL), (None, MODEL)),
  }
  mesh = partitioning.make_mesh((1, 1), jax.devices()[:1])
  params = jax.tree.map(lambda s: jnp.ones(s, jnp.float32), shapes,
                        is_leaf=lambda x: isinstance(x, tuple))
  params_shardings = jax.tree_util.tree_map_with_path(
      lambda path, _: NamedSharding(
          mesh, specs[optimizer_lib.path_name(path)][0]), params)
  optimizer = optimizer_lib.AdafactorOptimizer(
      learning_rate=lambda step: 0.1, min_dim_size_to_factor=2)
  shardings = partitioning.optimizer_shardings(
      jax.eval_shape(optimizer.init, params), params, params_shardings, mesh)

  rng = np.random.RandomState(0)
  grads = jax.tree.map(
      lambda p: jnp.asarray(rng.normal(size=p.shape), jnp.float32), params)
  _, state = optimizer.update(grads, optimizer.init(params), params)
  checked = 0
  for (path, value), (_, sharding) in zip(
      jax.tree_util.tree_leaves_with_path(state),
      jax.tree_util.tree_leaves_with_path(shardings)):
    names = [getattr(k, "name", None) for k in path]
    slot = next((n for n in names if n in ("v_row", "v_col")), None)
    if slot is None or value.shape == (1,):
      continue
    keys = [k.key for k in path if isinstance(k, jax.tree_util.DictKey)]
    param = "/".join(keys)
    grad = np.asarray(_get(grads, keys), np.float64)
    view = optimizer_lib.mesh_shape(param, grad.shape)
    squared = grad.reshape(view) ** 2 + 1e-30
    dropped = [a for a in range(len(view))
               if squared.mean(axis=a).shape == value.shape and
               np.allclose(squared.mean(axis=a), value, rtol=1e-5)]
    assert len(dropped) == 1, (param, slot, dropped)
    view_spec = list(specs[param][1])
    del view_spec[dropped[0]]
    assert tuple(sharding.spec) == tuple(view_spec), (param, slot)
    checked += 1
  assert checked == 2 * len(specs)


def _get(tree, keys):
  for key in keys:
    tree = tree[key]
  return tree


def test_bytes_per_device():
  mesh = partitioning.make_mesh((1, 1), jax.devices()[:1])
  tree = {"a": jax.device_put(jnp.zeros((4, 8), jnp.float32),
                              NamedSharding(mesh, P(None, MODEL))),
          "b": jnp.zeros((3,), jnp.int32)}
  counts = partitioning.bytes_per_device(tree)
  assert counts == {jax.devices()[0]: 4 * 8 * 4 + 3 * 4}
