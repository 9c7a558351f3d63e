# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""No variant forces an all-gather of a length x length tensor.

Every variant's training step (loss and gradients, dropout on) and greedy
decoding, the tiny model of test_mesh_layouts.py, is lowered on the meshes
of 4 devices with the TPU layout rules; the audit (comm_audit) records
each collective mesh performs (and the TPU's syncs of replicated dropout
masks) and the Mesh TensorFlow tensor it communicates. No collective
may carry a tensor with a batch dimension and two length-like dimensions
(query length, memory length, the synthesizer's position tables). The only
length x length tensors communicated at all are once-per-step gradient sums
over the batch axis; nothing with a length dimension is all-gathered.

The negative controls show that the audit sees such collectives: a
synthesizing function whose logits are summed over the (split) heads, and a
layer that all-gathers its scores under a layout that splits the memory
length.
"""

import os
from typing import Dict, Tuple

import gin
import mesh_tensorflow as mtf
import pytest
import tensorflow.compat.v1 as tf

import conftest
from mtf_synthesizer import attentions
from mtf_synthesizer.core import synthesizers
from mtf_synthesizer.jobs import mesh_defaults
from workbench import comm_audit as audit_lib

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

VARIANTS = attentions.VARIANT_NAMES
MESHES = audit_lib.MESHES
# Packed examples (the synthesizers gather their tables per example) on the
# mesh with both axes, for a sample of variants that between them use every
# function that indexes positions; MTF_SYNTHESIZER_ALL_LAYOUTS=1 runs them
# all, on both meshes.
_PACKED_VARIANTS = conftest.covering_variants(
    [name for name, cls in synthesizers.BY_NAME.items()
     if cls.indexes_positions])
_PACKED_MESHES = [MESHES[0]]
if os.environ.get("MTF_SYNTHESIZER_ALL_LAYOUTS"):
  _PACKED_VARIANTS, _PACKED_MESHES = VARIANTS, MESHES
CASES = ([(v, m, False) for v in VARIANTS for m in MESHES] +
         [(v, m, True) for v in _PACKED_VARIANTS for m in _PACKED_MESHES])

_AUDITS: Dict[Tuple[str, bool], Dict[str, audit_lib.Audit]] = {}


def _audit(variant: str, mesh_shape: str, packed: bool) -> audit_lib.Audit:
  """The audit of `variant` on `mesh_shape`; one graph per variant."""
  if (variant, packed) not in _AUDITS:
    # The optimizer only reduces variables and gradients (no batch
    # dimension): left out, to keep the test fast.
    meshes = _PACKED_MESHES if packed else MESHES
    _AUDITS[(variant, packed)] = audit_lib.audit_variant(
        variant, meshes, optimizer=False, packed=packed)
  return _AUDITS[(variant, packed)][mesh_shape]


def test_all_variants_are_audited():
  assert set(VARIANTS) >= set(audit_lib.VARIANTS)


@pytest.mark.parametrize("variant,mesh_shape,packed", CASES)
def test_no_length_by_length_tensor_per_example(variant, mesh_shape, packed):
  audit = _audit(variant, mesh_shape, packed)
  collectives = audit.collectives
  # The audit passes: no per-example length x length tensor, every
  # collective identified, and as many as mesh's own counters report.
  assert not audit_lib.problems(audit), audit_lib.problems(audit)
  # The recording works: the model-parallel sums of the attention and
  # feed-forward outputs are there.
  assert any(c.kind == "allreduce" and c.mesh_axes == ("model",) and
             c.dim_names == ("batch", "length", "d_model")
             for c in collectives), audit_lib.format_table(collectives)
  # Length x length tensors are communicated only as gradient sums over the
  # data-parallel axis, once per step (so not at all on "model:4").
  for c in collectives:
    if c.is_length_by_length:
      assert (c.kind, c.mesh_axes, c.per_example) == (
          "allreduce", ("batch",), False), c
  # Nothing with a length dimension is gathered or moved between devices.
  for c in collectives:
    if c.kind != "allreduce":
      assert not c.length_dims, c


@gin.configurable(module="test_mesh_comm")
class HeadsSummedDotProduct(synthesizers.DotProduct, register=False):
  """Bad on purpose: dot-product logits summed over the heads.

  The heads are split over the model axis, so the sum is an all-reduce of
  the [batch, length, memory_length] logits over that axis. Not registered
  in `synthesizers.BY_NAME`: it is no function of the package.
  """
  name = "heads_summed_dot_product"

  def logits(self, inputs, scale=None):
    return mtf.einsum([inputs.queries, inputs.keys],
                      reduced_dims=inputs.heads_dims + [inputs.key_dim])


def test_audit_flags_logits_summed_over_split_heads():
  audit = audit_lib.audit_variant(
      "vanilla", [MESHES[0]], optimizer=False, extra_bindings=[
          "SynthesizerAttention.synthesizers = "
          "[@test_mesh_comm.HeadsSummedDotProduct()]"])[MESHES[0]]
  bad = audit_lib.violations(audit.collectives)
  assert bad, audit_lib.format_table(audit.collectives)
  assert {(c.kind, c.mesh_axes, c.op_type) for c in bad} >= {
      ("allreduce", ("model",), "EinsumOperation")}
  assert all(set(c.dim_names) >= {"batch", "length", "memory_length"}
             for c in bad), bad
  assert audit_lib.problems(audit)
  assert "VIOLATION" in audit_lib.format_table(audit.collectives)


def _all_gathered_scores(layout: str) -> audit_lib.Audit:
  """A tiny headless layer that all-gathers its length x length scores.

  The scores are renamed from memory_length to an unsplit dimension before
  the softmax: a layout change, so an all-concat when the layout splits
  memory_length.

  Args:
    layout: the layout rules.

  Returns:
    The audit of a training step of the layer on mesh "model:2,batch:2".
  """
  with tf.Graph().as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    batch = mtf.Dimension("batch", 4)
    length = mtf.Dimension("length", 8)
    memory_length = mtf.Dimension("memory_length", 8)
    model_dim = mtf.Dimension("d_model", 4)
    x = mtf.import_tf_tensor(mesh, tf.ones([4, 8, 4]),
                             [batch, length, model_dim])
    w = mtf.get_variable(mesh, "w", [model_dim],
                         initializer=tf.ones_initializer())
    memory = mtf.replace_dimensions(x, length, memory_length)
    scores = mtf.einsum([x * w, memory], [batch, length, memory_length])
    scores = mtf.replace_dimensions(scores, memory_length,
                                    mtf.Dimension("keys", 8))
    loss = mtf.reduce_sum(mtf.softmax(scores, scores.shape.dims[-1]) * x)
    grad, = mtf.gradients([loss], [w])
    return audit_lib.lower_and_record(graph, mesh, MESHES[0], layout,
                                      [loss, grad])


def test_audit_flags_all_gathered_scores():
  audit = _all_gathered_scores("batch:batch,memory_length:model")
  bad = audit_lib.violations(audit.collectives)
  assert ("allconcat", ("model",), ("batch", "length", "memory_length")) in {
      (c.kind, c.mesh_axes, c.dim_names) for c in bad}, bad
  # The same layer with the memory length replicated (as in the TPU layout
  # rules) communicates no length x length tensor.
  audit = _all_gathered_scores(mesh_defaults.LAYOUT_RULES)
  assert not audit_lib.problems(audit)
  assert not any(c.is_length_by_length for c in audit.collectives)
