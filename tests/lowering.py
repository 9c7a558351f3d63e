# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The tests' one way to lower an mtf graph onto CPU devices."""

from typing import Callable, Dict, List, Optional

import mesh_tensorflow as mtf
import numpy as np
import tensorflow.compat.v1 as tf


def session_config(num_devices: int = 1) -> tf.ConfigProto:
  """The tests' session options: logical CPU devices, no graph optimizer.

  TF's graph optimizer (Grappler) rewrites a graph before its first run. The
  tests build a graph, run it a few times and drop it: there the rewriting
  costs more than it saves (a third of a layout test's CPU time), and what a
  test compares, the graph's math, runs the same without it. Mesh turns it
  off on TPU for the same reason (`utils.get_estimator`). The stock-CLI runs
  and the benchmark keep TF's default.

  Args:
    num_devices: logical CPU devices of the session.

  Returns:
    The session's ConfigProto.
  """
  config = tf.ConfigProto(device_count={"CPU": num_devices})
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return config


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


def restored_logits(checkpoint: str, features: Dict[str, np.ndarray],
                    logits_fn: Callable[[Dict[str, mtf.Tensor]], mtf.Tensor],
                    partial: bool = False,
                    adjust: Optional[Callable[[List[tf.Variable]],
                                              List[tf.Operation]]] = None
                    ) -> np.ndarray:
  """A model's float32 logits on one device, its weights from a checkpoint.

  Args:
    checkpoint: the checkpoint's path prefix.
    features: name -> int32 array [batch, length], each imported on the
      dimensions "batch" and "length".
    logits_fn: builds the model (in the current gin configuration) on those
      features; returns its logits.
    partial: restore only the variables the checkpoint holds (the others
      keep their initial values); else every variable must be there.
    adjust: given the variables, returns ops run after the restore (to
      overwrite some of them).

  Returns:
    The logits.
  """
  held = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
  with tf.Graph().as_default():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    imported = {}
    for name, array in features.items():
      dims = [mtf.Dimension("batch", array.shape[0]),
              mtf.Dimension("length", array.shape[1])]
      imported[name] = mtf.import_fully_replicated(
          mesh, tf.constant(array, tf.int32), dims)
    logits = mtf.cast(logits_fn(imported), tf.float32)
    lowering = lower(graph, mesh)
    tf_logits = lowering.export_to_tf_tensor(logits)
    masters = [v.get_master() for v in graph.all_variables]
    saver = tf.train.Saver([m for m in masters
                            if not partial or m.op.name in held])
    with tf.Session(config=session_config()) as session:
      session.run(tf.global_variables_initializer())
      saver.restore(session, checkpoint)
      if adjust:
        session.run(adjust(masters))
      session.run(lowering.copy_masters_to_slices())
      return session.run(tf_logits)
