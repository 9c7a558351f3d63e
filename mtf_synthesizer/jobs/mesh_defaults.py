# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Default mesh shapes and layouts for T5-sized models on Cloud TPUs.

A Mesh TensorFlow TPU mesh has two axes: `batch` (data parallelism) and
`model` (model parallelism, the number of cores that hold one replica).
`utils.tpu_mesh_shape` builds it from the topology and the model parallelism;
the layout rules say which tensor dimensions are split over which axis.

Model parallelism per size (`MODEL_PARALLELISM`). The sources disagree
because they target different slices:
  * T5's fine-tuning notebook (MtfModel on a v2-8 / v3-8, 8 cores) uses
    small 1, base 2, large 8, 3B 8, 11B 8;
  * T5's model gin files bind `utils.tpu_mesh_shape.model_parallelism`:
    large 2 (`bi_v1_large.gin`, `t5.1.1.large.gin`), 3B 8 (`bi_v1_3B.gin`,
    `t5.1.1.xl.gin`), 11B 32 (`bi_v1_11B.gin`; 8 in `t5.1.1.xxl.gin`, which
    adds microbatching).
We take small 1, base 2, large 8, 3B 8 and 11B 16: large with 8 fits the
8 GiB-per-core v2 as well as v3; 11B (44 GB of float32 parameters before
optimizer state) needs 16 cores per replica without microbatching, so it
needs at least a v3-32 / 4x4 slice. On a slice with fewer cores than the
default, `model_parallelism(size, num_cores)` caps it at the number of
cores (all cores hold one replica).
"""

import dataclasses
import functools
import operator
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

MODEL_SIZES = ("small", "base", "large", "3B", "11B")

MODEL_PARALLELISM: Dict[str, int] = {
    "small": 1,
    "base": 2,
    "large": 8,
    "3B": 8,
    "11B": 16,
}

# Tensor dimension -> mesh axis. `heads`, `d_ff` and `vocab` are split over
# the model axis, examples over the batch axis; everything else (d_model,
# d_kv, length, the synthesizer's position tables) is replicated.
LAYOUT_RULES = "heads:model,batch:batch,d_ff:model,vocab:model"

# Cores per chip as mesh counts a chip grid ("AxB"): `utils.tpu_mesh_shape`
# multiplies the grid by its `--logical_cores_per_chip` flag (default 2).
CORES_PER_CHIP = 2


@dataclasses.dataclass(frozen=True)
class TpuGeneration:
  """What one TPU generation's chips and hosts are, as TensorFlow sees them.

  Attributes:
    name: "v2", "v3", "v4".
    cores_per_chip: TensorCores per chip; the accelerator type's number
      ("v3-8", "v4-8") counts these.
    devices_per_chip: TPU devices TensorFlow shows per chip: one per core,
      or one per chip where the two cores act as one (megacore).
    chips_per_host: chips attached to one TPU VM host.
    verified: whether a run on this generation has been made (none has).
    source: where the counts come from.
  """
  name: str
  cores_per_chip: int
  devices_per_chip: int
  chips_per_host: int
  verified: bool
  source: str

  @property
  def devices_per_host(self) -> int:
    return self.devices_per_chip * self.chips_per_host


# The generations that run TensorFlow's stream-executor images (docs/tpu.md).
TPU_GENERATIONS: Dict[str, TpuGeneration] = {
    "v2": TpuGeneration(
        "v2", 2, 2, 4, False,
        "Cloud TPU system architecture: 2 TensorCores per chip, 4 chips "
        "per host; a v2-8 shows 8 TPU devices"),
    "v3": TpuGeneration(
        "v3", 2, 2, 4, False,
        "Cloud TPU system architecture: 2 TensorCores per chip, 4 chips "
        "per host; a v3-8 shows 8 TPU devices"),
    "v4": TpuGeneration(
        "v4", 2, 1, 4, False,
        "megacore: a v4 chip's two TensorCores form one device, so a v4-8 "
        "host shows 4 (pytorch/xla#5258: TPU_NUM_DEVICES=4 on a v4-8; "
        "GoogleCloudPlatform/ml-testing-accelerators#550: 4 cores per host "
        "for v4, 8 for v2 and v3; huggingface/transformers#20252: JAX lists "
        "one device per v4 chip)"),
}


def tpu_generation(tpu_topology: str, tpu_version: str = "v3"
                  ) -> TpuGeneration:
  """The generation of a topology: its accelerator type's, else tpu_version.

  Args:
    tpu_topology: "v4-8" (the generation is its prefix) or a chip grid.
    tpu_version: the generation of a chip grid.

  Returns:
    The TpuGeneration.

  Raises:
    ValueError: for a generation not in TPU_GENERATIONS.
  """
  accelerator = re.fullmatch(r"(v\d+[a-z]*)-\d+", tpu_topology)
  name = accelerator.group(1) if accelerator else tpu_version
  if name not in TPU_GENERATIONS:
    raise ValueError(
        "TPU %s is not one mesh-tensorflow's TPUEstimator can drive: the "
        "stream-executor images serve %s (docs/tpu.md, Supported TPUs)."
        % (name, ", ".join(TPU_GENERATIONS)))
  return TPU_GENERATIONS[name]


def num_chips(tpu_topology: str, tpu_version: str = "v3") -> int:
  """The number of chips of a topology.

  Args:
    tpu_topology: see `num_cores`.
    tpu_version: the generation of a chip grid.

  Returns:
    The chips of the slice.
  """
  generation = tpu_generation(tpu_topology, tpu_version)
  if tpu_topology.startswith("v"):
    return max(1, num_cores(tpu_topology) // generation.cores_per_chip)
  return num_cores(tpu_topology) // CORES_PER_CHIP


def num_devices(tpu_topology: str, tpu_version: str = "v3") -> int:
  """The TPU devices TensorFlow shows for a topology: the mesh's size.

  Args:
    tpu_topology: see `num_cores`.
    tpu_version: the generation of a chip grid.

  Returns:
    chips x devices per chip (v4-8: 4; v3-8: 8).
  """
  generation = tpu_generation(tpu_topology, tpu_version)
  return num_chips(tpu_topology, tpu_version) * generation.devices_per_chip


def num_hosts(tpu_topology: str, tpu_version: str = "v3") -> int:
  """The TPU VM hosts of a topology (chips over chips per host, rounded up).

  Args:
    tpu_topology: see `num_cores`.
    tpu_version: the generation of a chip grid.

  Returns:
    1 for v2-8, v3-8, v4-8 and smaller; more for pod slices.
  """
  generation = tpu_generation(tpu_topology, tpu_version)
  chips = num_chips(tpu_topology, tpu_version)
  return -(-chips // generation.chips_per_host)


def mesh_topology(tpu_topology: str, tpu_version: str = "v3"
                  ) -> Tuple[str, Optional[int]]:
  """How to tell mesh's `utils.tpu_mesh_shape` the slice's devices.

  mesh reads an accelerator type's number as its device count, and a chip
  grid as chips x `--logical_cores_per_chip` (default 2). A megacore
  generation (v4) shows one device per chip, so its slice is given as the
  chip grid with `--logical_cores_per_chip=1`.

  Args:
    tpu_topology: see `num_cores`.
    tpu_version: the generation of a chip grid.

  Returns:
    (the `utils.tpu_mesh_shape.tpu_topology` value, the
    `--logical_cores_per_chip` value or None for mesh's default).
  """
  generation = tpu_generation(tpu_topology, tpu_version)
  if generation.devices_per_chip == CORES_PER_CHIP:
    return tpu_topology, None
  if tpu_topology.startswith("v"):
    grid = chip_grid(num_chips(tpu_topology, tpu_version))
  else:
    grid = re.split("_twisted|_untwisted", tpu_topology)[0]
  return grid, generation.devices_per_chip


def chip_grid(chips: int) -> str:
  """The 3-D chip grid of a v4 slice of `chips` chips.

  Cloud TPU's v4 topologies: v4-8 is 2x2x1, v4-16 2x2x2, v4-32 2x2x4, v4-64
  2x4x4, v4-128 4x4x4, and so on, the smallest side doubling (z before y
  before x). mesh reads only the grid's product.

  Args:
    chips: a power of two, at least 4.

  Returns:
    e.g. "2x2x1".

  Raises:
    ValueError: for another number.
  """
  if chips < 4 or chips & (chips - 1):
    raise ValueError("A v4 slice has a power of two of chips, at least 4; "
                     "got %d." % chips)
  dims = [2, 2, 1]
  while dims[0] * dims[1] * dims[2] < chips:
    # The smallest side doubles; of equal sides, z before y before x.
    dims[max(i for i in range(3) if dims[i] == min(dims))] *= 2
  return "x".join(str(d) for d in dims)


def model_parallelism(size: str, num_cores: Optional[int] = None) -> int:
  """The default number of cores per model replica for a T5 model size.

  Args:
    size: one of MODEL_SIZES.
    num_cores: when given, the result is capped at it.

  Returns:
    The model parallelism, a power of two.

  Raises:
    ValueError: for an unknown size.
  """
  if size not in MODEL_PARALLELISM:
    raise ValueError("Unknown model size %r; expected one of %s." %
                     (size, ", ".join(MODEL_SIZES)))
  mp = MODEL_PARALLELISM[size]
  if num_cores is not None:
    mp = min(mp, num_cores)
  return mp


def layout_rules() -> str:
  """The layout rules string for `utils.run.layout_rules`."""
  return LAYOUT_RULES


def num_cores(tpu_topology: str) -> int:
  """The number of TPU cores of a topology, as `utils.tpu_mesh_shape` counts.

  Args:
    tpu_topology: an accelerator type such as "v3-8" or "v2-32" (the number
      is cores), or a chip grid such as "2x2" or "4x4x4" (chips; each has
      CORES_PER_CHIP cores), optionally with a "_twisted" suffix.

  Returns:
    The number of cores.

  Raises:
    ValueError: for a string of neither form.
  """
  accelerator = re.fullmatch(r"v\d+[a-z]*-(\d+)", tpu_topology)
  if accelerator:
    return int(accelerator.group(1))
  grid = re.split("_twisted|_untwisted", tpu_topology)[0]
  if re.fullmatch(r"\d+(x\d+)+", grid):
    chips = functools.reduce(operator.mul, (int(n) for n in grid.split("x")))
    return chips * CORES_PER_CHIP
  raise ValueError(
      "Cannot read the TPU topology %r: expected an accelerator type such "
      "as 'v3-8' or a chip grid such as '2x2'." % (tpu_topology,))


def mesh_shape(tpu_topology: str, model_parallel: int,
               tpu_version: str = "v3") -> str:
  """The mesh `utils.tpu_mesh_shape` builds, as a "batch:B,model:M" string.

  Its size is the TPU devices TensorFlow shows (`num_devices`): the cores
  of v2 and v3, the chips of v4 (`mesh_topology` says how mesh is told).

  Args:
    tpu_topology: see `num_cores`.
    model_parallel: devices per model replica; must divide the device count.
    tpu_version: the generation of a chip grid.

  Returns:
    The mesh shape string (axes of size 1 left out, as mesh does).

  Raises:
    ValueError: if model_parallel does not divide the number of cores.
  """
  cores = num_devices(tpu_topology, tpu_version)
  if model_parallel < 1 or cores % model_parallel:
    raise ValueError(
        "model_parallelism %d does not divide the %d cores of TPU topology "
        "%r; use a power of two <= %d." % (model_parallel, cores,
                                           tpu_topology, cores))
  dims = []
  if cores // model_parallel > 1:
    dims.append("batch:%d" % (cores // model_parallel))
  if model_parallel > 1:
    dims.append("model:%d" % model_parallel)
  return ",".join(dims)


def _pairs(spec: str) -> List[Tuple[str, str]]:
  pairs = []
  for item in spec.split(","):
    if item.strip():
      name, _, value = item.partition(":")
      pairs.append((name.strip(), value.strip()))
  return pairs


def _mesh_dims(mesh: Any) -> List[Tuple[str, int]]:
  if isinstance(mesh, str):
    return [(name, int(size)) for name, size in _pairs(mesh)]
  return [(d.name, d.size) for d in mesh.dims]  # a mtf.Shape


def _layout_pairs(layout: Any) -> List[Tuple[str, str]]:
  if isinstance(layout, str):
    return _pairs(layout)
  # A mtf.LayoutRules, which has no public accessor for its pairs.
  return sorted(layout._pairs)  # pylint: disable=protected-access


def check_divisible(dimension_sizes: Mapping[str, int],
                    mesh: Union[str, Any],
                    layout: Union[str, Any, None] = None) -> None:
  """Checks that each split tensor dimension divides its mesh axis.

  Mesh TensorFlow requires it, and otherwise fails deep inside graph lowering
  with a message that names neither the dimension nor the axis.

  Args:
    dimension_sizes: tensor dimension name -> size, e.g. {"heads": 12,
      "d_ff": 3072, "vocab": 32128, "batch": 128}. Dimensions the layout does
      not split are ignored.
    mesh: the mesh shape, e.g. "batch:4,model:2", or a mtf.Shape.
    layout: the layout rules (a string such as LAYOUT_RULES or a
      mtf.LayoutRules); default `layout_rules()`.

  Raises:
    ValueError: naming the first offending dimension, its size, the mesh axis
      and the axis size.
  """
  axes = dict(_mesh_dims(mesh))
  rules = _layout_pairs(LAYOUT_RULES if layout is None else layout)
  for name, size in dimension_sizes.items():
    for tensor_dim, mesh_axis in rules:
      if tensor_dim != name or mesh_axis not in axes:
        continue
      if size % axes[mesh_axis]:
        raise ValueError(
            "Tensor dimension %r of size %d is split over mesh axis %r of "
            "size %d, which does not divide it. Change the model (e.g. "
            "num_heads, d_ff, batch size) or the model parallelism / layout "
            "rules." % (name, size, mesh_axis, axes[mesh_axis]))
