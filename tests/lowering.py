# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The tests' one way to lower an mtf graph onto CPU devices."""

import mesh_tensorflow as mtf


def lower(graph: mtf.Graph, mesh: mtf.Mesh, mesh_shape: str = "",
          layout: str = "", autostack: bool = True) -> mtf.Lowering:
  """Lowers `graph` onto a placement mesh of logical devices of this CPU.

  Args:
    graph: the mtf graph.
    mesh: its mesh.
    mesh_shape: e.g. "model:2,batch:2" ("" for one device).
    layout: e.g. "heads:model,batch:batch".
    autostack: mesh's stacking of variables.

  Returns:
    The lowering (one device per mesh position, all on this CPU).
  """
  shape = mtf.convert_to_shape(mesh_shape)
  mesh_impl = mtf.placement_mesh_impl.PlacementMeshImpl(
      shape, mtf.convert_to_layout_rules(layout), [""] * shape.size)
  return mtf.Lowering(graph, {mesh: mesh_impl}, autostack=autostack)
