# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The device mesh and where each array lives on it, as T5X places them.

A `jax.make_mesh` of two axes, `data` and `model` (`mesh_shape`, a gin
binding; -1 takes the devices the other axis leaves). The model's
parameters carry logical axis names (`flax_model/t5.py`), which
`LOGICAL_AXIS_RULES` maps onto the mesh: the batch on `data`; heads, the
feed-forward width and the vocabulary on `model`, and with the heads every
table of the Synthesizer (R's [heads, length, length], D's projections,
FR's and FD's factors, the mixture's weights). A dimension that the model
axis does not divide is left whole on every device (`fit`).

The optimizer's state follows its parameter: a slot of the parameter's
shape (in mesh's shape, `optimizer.mesh_shape`) is split as the parameter
is; a factored slot (a row or a column) keeps the split of the dimensions
it keeps.
"""

from typing import Any, Dict, Optional, Sequence, Tuple

import flax.linen as nn
import gin
import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from mtf_synthesizer.flax_train import optimizer as optimizer_lib

DATA = "data"
MODEL = "model"
AXES = (DATA, MODEL)

# Logical axis name -> mesh axis (None: whole on every device).
LOGICAL_AXIS_RULES = (
    ("batch", DATA),
    ("heads", MODEL),
    ("joined_kv", MODEL),
    ("mlp", MODEL),
    ("vocab", MODEL),
    ("kv", None),
    ("embed", None),
    ("length", None),
    ("relpos_buckets", None),
)


class MeshShapeError(ValueError):
  """A mesh shape that the devices do not fill."""


@gin.configurable(module="mtf_synthesizer.flax_train")
def mesh_shape(data: int = -1, model: int = 1) -> Tuple[int, int]:
  """The (data, model) shape of the device mesh (-1: what is left).

  Args:
    data: the data-parallel axis's devices.
    model: the model-parallel axis's devices.

  Returns:
    The (data, model) pair, as bound.
  """
  return (data, model)


def resolve_mesh_shape(shape: Sequence[int], num_devices: int
                       ) -> Tuple[int, int]:
  """A (data, model) shape with -1 filled in, checked against the devices.

  Args:
    shape: (data, model), at most one -1.
    num_devices: the devices of the run (every host's).

  Returns:
    The shape, whose product is num_devices.

  Raises:
    MeshShapeError: a shape that does not fill exactly the devices.
  """
  shape = tuple(int(s) for s in shape)
  if len(shape) != 2 or shape.count(-1) > 1 or any(
      s == 0 or s < -1 for s in shape):
    raise MeshShapeError(
        "mesh_shape must be (data, model) of positive sizes, at most one "
        "-1, got %r" % (shape,))
  known = int(np.prod([s for s in shape if s != -1]))
  if -1 in shape:
    if num_devices % known:
      raise MeshShapeError(
          "mesh_shape %r: %d devices do not divide by %d" %
          (shape, num_devices, known))
    shape = tuple(num_devices // known if s == -1 else s for s in shape)
  if shape[0] * shape[1] != num_devices:
    raise MeshShapeError(
        "mesh_shape %r needs %d devices; this run has %d" %
        (shape, shape[0] * shape[1], num_devices))
  return shape


def make_mesh(shape: Sequence[int],
              devices: Optional[Sequence[Any]] = None) -> jax.sharding.Mesh:
  """The (data, model) device mesh.

  Args:
    shape: (data, model); -1 for one of them.
    devices: the devices (default: all of the run's).

  Returns:
    The mesh.
  """
  devices = list(jax.devices() if devices is None else devices)
  shape = resolve_mesh_shape(shape, len(devices))
  return jax.make_mesh(shape, AXES,
                       axis_types=(jax.sharding.AxisType.Auto,) * 2,
                       devices=devices)


def fit(spec: P, shape: Sequence[int], mesh: jax.sharding.Mesh) -> P:
  """`spec` without the splits that do not divide their dimension.

  Args:
    spec: a partition spec.
    shape: the array's shape.
    mesh: the mesh.

  Returns:
    The spec, None where the mesh axes' size does not divide the dimension.
  """
  out = []
  for i, size in enumerate(shape):
    axes = spec[i] if i < len(spec) else None
    names = (axes,) if isinstance(axes, str) else tuple(axes or ())
    ways = int(np.prod([mesh.shape[a] for a in names])) if names else 1
    out.append(axes if names and size % ways == 0 else None)
  return P(*out)


def param_shardings(boxed_params: Any, mesh: jax.sharding.Mesh,
                    rules: Sequence[Tuple[str, Any]] = LOGICAL_AXIS_RULES
                    ) -> Any:
  """Each parameter's sharding, from its logical axis names.

  Args:
    boxed_params: the model's parameters as `model.init` (or
      `jax.eval_shape` of it) gives them, boxed with their axis names.
    mesh: the device mesh.
    rules: logical name -> mesh axis.

  Returns:
    The unboxed tree of NamedShardings.
  """
  specs = nn.get_partition_spec(boxed_params)
  shapes = nn.unbox(boxed_params)
  return jax.tree.map(
      lambda spec, leaf: NamedSharding(
          mesh, fit(mesh_spec(spec, rules), leaf.shape, mesh)),
      specs, shapes, is_leaf=lambda x: isinstance(x, P))


def mesh_spec(logical: Sequence[Optional[str]],
              rules: Sequence[Tuple[str, Any]] = LOGICAL_AXIS_RULES) -> P:
  """The mesh axes of an array's logical axis names.

  A mesh axis splits one dimension at most: the first whose name it takes
  (R's [heads, length, length] names "length" twice; flax's own mapping
  refuses a repeated name).

  Args:
    logical: the array's logical axis names (None: unnamed).
    rules: logical name -> mesh axis, first match wins.

  Returns:
    The partition spec.
  """
  table = {}
  for name, axis in rules:
    table.setdefault(name, axis)
  used, out = set(), []
  for name in logical:
    axis = table.get(name) if name is not None else None
    if axis is None or axis in used:
      out.append(None)
    else:
      used.add(axis)
      out.append(axis)
  return P(*out)


# optax's factored second moment (`scale_by_factored_rms`) keeps `v_row`
# without the largest dimension and `v_col` without the second largest, in
# np.argsort's order (which tells equal sizes apart: a square matrix).
_FACTORED_SLOTS = {"v_row": -1, "v_col": -2}


def _slot_spec(slot_shape: Tuple[int, ...], view_shape: Tuple[int, ...],
               view_spec: P, slot: Optional[str] = None) -> P:
  """The split of an optimizer slot of a parameter seen in `view_shape`."""
  view = tuple(view_spec) + (None,) * (len(view_shape) - len(view_spec))
  if slot_shape == view_shape:
    return P(*view)
  if len(slot_shape) == len(view_shape) - 1:
    if slot in _FACTORED_SLOTS:
      dropped = int(np.argsort(view_shape)[_FACTORED_SLOTS[slot]])
      if view_shape[:dropped] + view_shape[dropped + 1:] == slot_shape:
        return P(*(view[:dropped] + view[dropped + 1:]))
    for dropped in range(len(view_shape)):
      if view_shape[:dropped] + view_shape[dropped + 1:] == slot_shape:
        return P(*(view[:dropped] + view[dropped + 1:]))
  return P()


def _view_spec(path: str, shape: Tuple[int, ...], spec: P) -> Tuple[
    Tuple[int, ...], P]:
  """A parameter's shape and spec in mesh's shape (`optimizer.mesh_shape`)."""
  view_shape = optimizer_lib.mesh_shape(path, shape)
  if view_shape == tuple(shape):
    return view_shape, spec
  full = tuple(spec) + (None,) * (len(shape) - len(spec))
  if len(shape) == 3 and view_shape == (shape[0], shape[1] * shape[2]):
    return view_shape, P(full[0], full[1])   # [d, heads * kv]
  return view_shape, P(full[0], full[2])     # [heads * kv, d]


def optimizer_shardings(abstract_opt_state: Any, abstract_params: Any,
                        params_shardings: Any,
                        mesh: jax.sharding.Mesh) -> Any:
  """The optimizer state's shardings, following each slot's parameter.

  Args:
    abstract_opt_state: `jax.eval_shape` of the optimizer's init.
    abstract_params: the parameters' shapes (unboxed).
    params_shardings: the parameters' (`param_shardings`).
    mesh: the device mesh.

  Returns:
    The state's tree of NamedShardings (scalars, counts and slots of no
    parameter whole on every device).
  """
  shapes = {optimizer_lib.path_name(p): tuple(leaf.shape) for p, leaf in
            jax.tree_util.tree_leaves_with_path(abstract_params)}
  specs = {optimizer_lib.path_name(p): s.spec for p, s in
           jax.tree_util.tree_leaves_with_path(params_shardings)}

  def one(path, leaf):
    keys = [k for k in path if isinstance(k, jax.tree_util.DictKey)]
    # A wrapper's own keys (multi_transform's labels) come first.
    names = [optimizer_lib.path_name(keys[i:]) for i in range(len(keys))]
    name = next((n for n in names if n in shapes), None)
    if name is None or not leaf.shape:
      return NamedSharding(mesh, P())
    view_shape, view_spec = _view_spec(name, shapes[name], specs[name])
    slot = next((k.name for k in path
                 if isinstance(k, jax.tree_util.GetAttrKey) and
                 k.name in _FACTORED_SLOTS), None)
    spec = _slot_spec(tuple(leaf.shape), view_shape, view_spec, slot)
    return NamedSharding(mesh, fit(spec, leaf.shape, mesh))

  return jax.tree_util.tree_map_with_path(one, abstract_opt_state)


def bytes_per_device(tree: Any) -> Dict[Any, int]:
  """The bytes each device holds of a tree of (sharded) arrays.

  Args:
    tree: jax Arrays.

  Returns:
    device -> bytes of its shards.
  """
  out: Dict[Any, int] = {}
  for leaf in jax.tree.leaves(tree):
    for shard in leaf.addressable_shards:
      out[shard.device] = out.get(shard.device, 0) + shard.data.nbytes
  return out
