# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mesh_defaults against mesh's own tpu_mesh_shape and layout lowering."""

from absl import flags
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import utils as mtf_utils
import pytest

from mtf_synthesizer.jobs import mesh_defaults


@pytest.fixture(scope="module", autouse=True)
def _parsed_flags():
  # utils.tpu_mesh_shape reads --logical_cores_per_chip.
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()


def test_model_parallelism_table():
  assert [mesh_defaults.model_parallelism(s)
          for s in ("small", "base", "large", "3B", "11B")] == [1, 2, 8, 8, 16]
  # Capped by the slice.
  assert mesh_defaults.model_parallelism("11B", 8) == 8
  assert mesh_defaults.model_parallelism("11B", 32) == 16
  assert mesh_defaults.model_parallelism("small", 8) == 1
  with pytest.raises(ValueError, match="xl"):
    mesh_defaults.model_parallelism("xl")


@pytest.mark.parametrize("topology,cores", [
    ("v3-8", 8), ("v2-8", 8), ("v3-32", 32), ("2x2", 8), ("4x4", 32),
    ("8x8", 128), ("4x4x4", 128), ("4x4_twisted", 32)])
def test_num_cores_and_mesh_shape_match_mesh(topology, cores):
  assert mesh_defaults.num_cores(topology) == cores
  for mp in (1, 2, 8):
    want = mtf_utils.tpu_mesh_shape(topology, mp)
    got = mtf.convert_to_shape(mesh_defaults.mesh_shape(topology, mp))
    assert got == want, (topology, mp)


def test_mesh_shape_rejects_model_parallelism_not_dividing_cores():
  with pytest.raises(ValueError, match="16.*8 cores.*'v3-8'"):
    mesh_defaults.mesh_shape("v3-8", 16)
  with pytest.raises(ValueError, match="Cannot read"):
    mesh_defaults.num_cores("v3")


def test_layout_rules_split_heads_d_ff_vocab_over_model_batch_over_batch():
  rules = mtf.convert_to_layout_rules(mesh_defaults.layout_rules())
  mesh = mtf.convert_to_shape("batch:4,model:2")
  axis = {name: rules.tensor_dimension_to_mesh_axis(mtf.Dimension(name, 8),
                                                    mesh)
          for name in ("heads", "d_ff", "vocab", "batch", "d_model",
                       "length", "d_kv")}
  assert axis == {"heads": 1, "d_ff": 1, "vocab": 1, "batch": 0,
                  "d_model": None, "length": None, "d_kv": None}


def test_check_divisible_accepts_t5_sizes_with_default_parallelism():
  # (heads, d_ff) of T5 1.0 models; vocab padded to 32128; 128 sequences.
  dims = {"small": (8, 2048), "base": (12, 3072), "large": (16, 4096),
          "3B": (32, 16384), "11B": (128, 65536)}
  for size, (heads, d_ff) in dims.items():
    mp = mesh_defaults.model_parallelism(size)
    mesh = mesh_defaults.mesh_shape("v3-32", mp)
    mesh_defaults.check_divisible(
        {"heads": heads, "d_ff": d_ff, "vocab": 32128, "batch": 128}, mesh)


@pytest.mark.parametrize("dims,mesh,message", [
    ({"heads": 12, "d_ff": 3072}, "batch:1,model:8",
     r"'heads' of size 12 is split over mesh axis 'model' of size 8"),
    ({"heads": 16, "d_ff": 1000}, "model:16",
     r"'d_ff' of size 1000 is split over mesh axis 'model' of size 16"),
    ({"vocab": 32100}, "model:8",
     r"'vocab' of size 32100 is split over mesh axis 'model' of size 8"),
    ({"batch": 6, "heads": 4}, "batch:4,model:4",
     r"'batch' of size 6 is split over mesh axis 'batch' of size 4"),
])
def test_check_divisible_names_dimension_and_axis(dims, mesh, message):
  with pytest.raises(ValueError, match=message):
    mesh_defaults.check_divisible(dims, mesh)
  # mtf objects work too.
  with pytest.raises(ValueError, match=message):
    mesh_defaults.check_divisible(
        dims, mtf.convert_to_shape(mesh),
        mtf.convert_to_layout_rules(mesh_defaults.layout_rules()))


def test_check_divisible_ignores_unsplit_dimensions_and_absent_axes():
  mesh_defaults.check_divisible({"d_model": 7, "length": 5}, "batch:2,model:4")
  # No "batch" axis on this mesh: batch is not split.
  mesh_defaults.check_divisible({"batch": 3, "heads": 4}, "model:4")
  # Custom layout: heads replicated.
  mesh_defaults.check_divisible({"heads": 3}, "model:4", "d_ff:model")
