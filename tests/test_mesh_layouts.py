# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Model-parallel layouts compute what one device computes.

A tiny T5-style Bitransformer (`workbench.tiny_model`) is configured through
gin, as the stock CLI configures it (mesh's defaults.gin, T5's bi_v1
settings, then a variant file from gin/synthesizer/), and built on
PlacementMeshImpl meshes of 4 logical CPU devices with the TPU layout rules
`heads:model,batch:batch,d_ff:model,vocab:model`. The reference is the same
model, with the same initial variable values, on a one-device mesh: the loss,
every gradient and the greedy decodes (incremental decoding, with its state
split like the activations) must match it.

Gradients are compared directly rather than through the variables after an
SGD step: in a graph where the update ops run in the same step as the
forward pass, TF does not order the variable reads before the assignments,
so such updated values are not reproducible even on one device.

The comparison stays away from points where the gradient is not defined, so
that its verdict does not depend on the CPU's kernels (TF's oneDNN kernels
and Eigen's round differently, and the split matrix products of a layout
differ again): a ReLU input within rounding of 0 lands on either side of the
kink, and the gradients below it differ by far more than rounding. The
feed-forward layers use T5.1.1's smooth GELU, and the ReLU that remains (the
Dense synthesizer's, eq. 2) is checked to have no input within `KINK_MARGIN`
of 0 in the reference run.
"""

import os
import zlib
from typing import Dict, Tuple

import gin
import mesh_tensorflow as mtf
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import

import lowering as lowering_lib
from mtf_synthesizer import attentions
from mtf_synthesizer.core import synthesizers
from mtf_synthesizer.jobs import mesh_defaults
from mtf_synthesizer.stock_cli import gin_path
from workbench import tiny_model

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow


NUM_DEVICES = 4
LAYOUT = mesh_defaults.layout_rules()
MESHES = ("model:2,batch:2", "model:4")
BATCH, LENGTH, VOCAB = tiny_model.BATCH, tiny_model.LENGTH, tiny_model.VOCAB
VARIANTS = sorted(attentions.VARIANT_NAMES)
MESH_SELF_ATTENTION = attentions.MESH_SELF_ATTENTION.name
# Smooth feed-forward layers (see module doc).
SMOOTH_FEED_FORWARD = 'DenseReluDense.activation = "gelu"'
# Rounding moves a pre-activation of this model by about 1e-7; the smallest
# ReLU input of the reference runs is above 1e-4.
KINK_MARGIN = 1e-5


def _configure(variant: str, packed: bool = False) -> None:
  """The tiny model's gin config for `variant`, dropout off (deterministic).

  Args:
    variant: a variant name or MESH_SELF_ATTENTION.
    packed: use explicit positions (mesh passes them to the layers only with
      absolute position embeddings).
  """
  tiny_model.configure(variant, LENGTH, dropout_rate=0.0, packed=packed,
                       extra_bindings=[SMOOTH_FEED_FORWARD])


def _data() -> Dict[str, np.ndarray]:
  rng = np.random.RandomState(7)
  inputs = rng.randint(2, VOCAB, size=(BATCH, LENGTH)).astype(np.int32)
  inputs[1, 5:] = 0  # some padding
  targets = rng.randint(2, VOCAB, size=(BATCH, LENGTH)).astype(np.int32)
  targets[2, 6:] = 0
  return {"inputs": inputs, "targets": targets}


def _initial_value(name: str, shape: Tuple[int, ...]) -> np.ndarray:
  """A variable's initial value, a function of its name and shape only.

  All runs load these values instead of using the initializers (whose
  random streams depend on the graph). They are larger than the usual
  initializers' so that the greedy decodes of an untrained model depend on
  the input and vary along the sequence.

  Args:
    name: the variable name.
    shape: its shape.

  Returns:
    A float32 array.
  """
  rng = np.random.RandomState(zlib.crc32(name.encode("utf-8")))
  if name.endswith("/scale"):  # RMS norm scales
    return (1.0 + 0.3 * rng.randn(*shape)).astype(np.float32)
  std = 1.0 if len(shape) < 2 else 2.0 / np.sqrt(shape[0])
  return (std * rng.randn(*shape)).astype(np.float32)


def _run(mesh_shape: str, layout: str, num_devices: int,
         packed: bool = False) -> Dict[str, object]:
  """Builds the gin-configured Bitransformer on a mesh and runs it.

  Args:
    mesh_shape: "" for one device, else e.g. "model:2,batch:2".
    layout: layout rules.
    num_devices: logical CPU devices in the session.
    packed: feed two packed segments per row, with their positions (no
      decoding then).

  Returns:
    A dict with "loss", "grads" (by variable name), "decoded" tokens and
    "relu_inputs" (the inputs of every ReLU of the training step).
  """
  data = _data()
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.set_random_seed(1)
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    step = tiny_model.training_step(
        mesh, data["inputs"], data["targets"], layout=layout or None,
        mesh_shape=mesh_shape or None,
        packed=tiny_model.packed_rows(BATCH, LENGTH) if packed else None,
        decode=not packed)
    decoded = step.decoded
    if packed:  # not decoded: zeros in the decodes' place
      decoded = mtf.zeros(mesh, [mtf.Dimension("batch", BATCH),
                                 mtf.Dimension("length", LENGTH)], tf.int32)
    variables, grads = step.variables, step.grads

    devices = ["/cpu:%d" % i for i in range(num_devices)]
    # No autostacking: variables keep their own names (and so can be compared
    # with the one-device run's by name).
    lowering = tiny_model.lower(graph, mesh, tiny_model.placement_mesh_impl(
        mesh_shape, layout, devices))
    fetch = {"loss": lowering.export_to_tf_tensor(step.loss),
             "decoded": lowering.export_to_tf_tensor(decoded),
             "grads": {v.name: lowering.export_to_tf_tensor(g)
                       for v, g in zip(variables, grads)},
             # The training step's (not the decoding loop's, which v1
             # control flow builds into this graph and cannot fetch).
             "relu_inputs": [op.inputs[0] for op in tf_graph.get_operations()
                             if op.type == "Relu" and
                             not control_flow_util.IsInWhileLoop(op)]}
    masters = {v.name: v.get_master() for v in graph.all_variables}
    loaders = {}  # placeholder -> value, and "ops" -> the assign ops
    for name, master in masters.items():
      value = _initial_value(name, tuple(master.shape.as_list()))
      placeholder = tf.placeholder(tf.float32, value.shape)
      loaders[placeholder] = value
      loaders.setdefault("ops", []).append(tf.assign(master, placeholder))
    to_slices = lowering.copy_masters_to_slices()
    init = tf.global_variables_initializer()
    with tf.Session(graph=tf_graph,
                    config=lowering_lib.session_config(num_devices)) as sess:
      assert len(sess.list_devices()) >= num_devices
      sess.run(init)
      sess.run(loaders.pop("ops"), feed_dict=loaders)
      sess.run(to_slices)
      return sess.run(fetch)


_CACHE: Dict[Tuple[str, str], Dict[str, object]] = {}


def _results(variant: str, mesh_shape: str) -> Dict[str, object]:
  """Runs `variant` on `mesh_shape` (and its one-device reference), cached."""
  if (variant, "") not in _CACHE:
    _configure(variant)
    _CACHE[(variant, "")] = _run("", "", 1)
  key = (variant, mesh_shape)
  if key not in _CACHE:
    _configure(variant)
    _CACHE[key] = _run(mesh_shape, LAYOUT, NUM_DEVICES)
  gin.clear_config()
  return _CACHE[key]


def _assert_same_arrays(got: Dict[str, np.ndarray],
                        want: Dict[str, np.ndarray], what: str) -> None:
  assert sorted(got) == sorted(want), what
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=2e-4, atol=2e-6,
                               err_msg="%s of %s" % (what, name))


# Every variant of the table, and mesh's own layer, on every mesh.
ALL = [MESH_SELF_ATTENTION] + VARIANTS
CASES = [(v, m) for m in MESHES for v in ALL]


def _away_from_kinks(results: Dict[str, object], variant: str) -> None:
  """No ReLU input of a run is within KINK_MARGIN of 0 (module doc)."""
  for i, inputs in enumerate(results["relu_inputs"]):
    closest = np.min(np.abs(inputs))
    assert closest > KINK_MARGIN, (
        "%s: a ReLU input (op %d) is %g from its kink; the comparison would "
        "depend on the CPU's rounding. Change the test's data." % (
            variant, i, closest))


@pytest.mark.parametrize("variant,mesh_shape", CASES)
def test_same_loss_gradients_and_decodes_as_one_device(
    variant, mesh_shape):
  want = _results(variant, "")
  _away_from_kinks(want, variant)
  got = _results(variant, mesh_shape)
  np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
  _assert_same_arrays(got["grads"], want["grads"], "gradient")
  # The reference is not degenerate: every gradient is nonzero and greedy
  # decoding does not emit one token everywhere.
  assert all(np.any(g != 0) for g in want["grads"].values()), variant
  assert len(np.unique(want["decoded"])) >= 2, want["decoded"]
  np.testing.assert_array_equal(got["decoded"], want["decoded"])


# Packed examples with explicit positions: the position tables (R, R1/R2,
# W2/b2) and FD's factors are gathered per example. Their gradients must be
# summed over the batch shards (a slice-by-slice gradient is not). Every
# variant with a function that indexes positions.
PACKED_VARIANTS = [
    v.name for v in attentions.VARIANTS
    if any(synthesizers.BY_NAME[c].indexes_positions for c in v.components)]


@pytest.mark.parametrize("variant", PACKED_VARIANTS)
def test_packed_examples_same_loss_and_gradients_as_one_device(variant):
  results = {}
  for mesh_shape, layout, devices in (("", "", 1),
                                      (MESHES[0], LAYOUT, NUM_DEVICES)):
    _configure(variant, packed=True)
    results[mesh_shape] = _run(mesh_shape, layout, devices, packed=True)
  gin.clear_config()
  want, got = results[""], results[MESHES[0]]
  _away_from_kinks(want, variant)
  np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
  _assert_same_arrays(got["grads"], want["grads"], "gradient")
  # Trainable position weights get a gradient (Fix's table is constant).
  tables = [n for n in want["grads"]
            if n.endswith(("/R", "/R1", "/R2", "/w2", "/b2", "/wa", "/wb"))]
  assert all(np.any(want["grads"][n] != 0) for n in tables)


def test_variant_files_found():
  # The list the test parametrizes over is the table's, each with its file.
  assert VARIANTS == sorted(attentions.VARIANT_NAMES)
  for name in VARIANTS:
    assert os.path.exists(os.path.join(gin_path.GIN_DIR, attentions.get(
        name).gin_file)), name


def test_variant_layers_are_in_the_graph():
  """The variant file really swaps the attention class (it is in the names)."""
  got = _results("random", MESHES[0])
  names = list(got["grads"])
  assert any("SynthesizerAttention" in n for n in names), names
  base = _results(MESH_SELF_ATTENTION, MESHES[0])
  assert not any("SynthesizerAttention" in n for n in base["grads"])
  assert any("SelfAttention" in n for n in base["grads"])
