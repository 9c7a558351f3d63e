# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What one traced training step says: its FLOPs, time and memory by op.

  * FLOPs: 2 * M * N * K of every Einsum / MatMul / BatchMatMul op that the
    training step executes in the lowered TF graph (forward, backward and the
    update), counted from their static shapes; element-wise ops (softmax,
    relu, the optimizer's arithmetic) are not counted (`step_flops`);
  * peak memory of a training step: the largest sum of live tensor bytes
    allocated by the step, reconstructed from the step's `RunMetadata`
    (allocation and deallocation times of every tensor the step allocates;
    variables, which exist before the step, are not counted)
    (`peak_step_bytes`);
  * the ops that took the most time or memory, and the machine's matmul
    peak (`matmul_peak_flops`), for the report's MFU.
"""

import re
import time
from typing import Dict, List, Sequence

import numpy as np
import tensorflow.compat.v1 as tf


def _einsum_flops(op: tf.Operation) -> int:
  """2*M*N*K of an Einsum/MatMul op from static shapes (1x if no sum)."""
  if op.type == "Einsum":
    equation = op.get_attr("equation").decode()
    inputs, _ = equation.split("->")
    sizes = {}
    for spec, tensor in zip(inputs.split(","), op.inputs):
      dims = tensor.shape.as_list()
      if "." in spec or len(spec) != len(dims):
        return 0
      for letter, size in zip(spec, dims):
        sizes[letter] = size
    output = equation.split("->")[1]
    summed = set(sizes) - set(output)
    total = int(np.prod([sizes[k] for k in sizes], dtype=np.float64))
    return total * (2 if summed else 1)
  if op.type in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
    a, b = op.inputs[0].shape.as_list(), op.outputs[0].shape.as_list()
    ta = op.get_attr("transpose_a") if op.type == "MatMul" else (
        op.get_attr("adj_x"))
    k = a[-2] if ta else a[-1]
    return 2 * int(np.prod(b, dtype=np.float64)) * k
  return 0


def _ancestors(fetches: Sequence[tf.Operation]) -> List[tf.Operation]:
  seen, stack = set(), list(fetches)
  while stack:
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return list(seen)


def step_flops(train_op: tf.Operation) -> int:
  """Matmul FLOPs of one training step (see the module docstring)."""
  return sum(_einsum_flops(op) for op in _ancestors([train_op]))


def peak_step_bytes(run_metadata: tf.RunMetadata) -> int:
  """Peak of the bytes allocated and still live during one traced step.

  Each node's memory records list the allocations and deallocations (time,
  signed bytes) of the tensors it allocated. Sorting all of them by time and
  taking the running sum gives the live bytes of the step's own tensors over
  time; its maximum is the step's peak. Memory that exists before the step
  (variables, optimizer slots) is not included: see `variable_bytes`.

  Args:
    run_metadata: from a `session.run` with FULL_TRACE.

  Returns:
    Bytes (0 when the trace has no allocation records).
  """
  events = []
  for dev in run_metadata.step_stats.dev_stats:
    for node in dev.node_stats:
      for mem in node.memory:
        for record in mem.allocation_records:
          events.append((record.alloc_micros, record.alloc_bytes))
  # Frees before allocations at equal times, so a peak is not overstated.
  events.sort(key=lambda e: (e[0], e[1]))
  live = peak = 0
  for _, delta in events:
    live += delta
    peak = max(peak, live)
  return peak


def top_allocations(run_metadata: tf.RunMetadata, n: int = 8) -> List[Dict]:
  """The nodes that allocated the most bytes in a traced step."""
  totals = {}
  for dev in run_metadata.step_stats.dev_stats:
    for node in dev.node_stats:
      size = sum(m.total_bytes for m in node.memory)
      if size:
        key = _op_key(node)
        mb, count = totals.get(key, (0.0, 0))
        totals[key] = (mb + size / 2.0 ** 20, count + 1)
  rows = [{"op": k, "MiB": round(v[0], 1), "count": v[1]}
          for k, v in totals.items()]
  rows.sort(key=lambda r: -r["MiB"])
  return rows[:n]


def _op_key(node) -> str:
  """A node's TF op type and its mtf op path, without layer/slice numbers."""
  match = re.search(r"= (\w+)\(", node.timeline_label or "")
  kind = match.group(1) if match else "?"
  name = re.sub(r"/parallel_\d+", "", node.node_name)
  name = re.sub(r"_\d+(?=/|$)", "", name)
  name = re.sub(r"^model/(en|de)coder/+", "", name)
  return "%s %s" % (kind, name)


def session_config(threads: int) -> tf.ConfigProto:
  return tf.ConfigProto(intra_op_parallelism_threads=threads,
                        inter_op_parallelism_threads=threads)


def matmul_peak_flops(size: int = 2048, steps: int = 5,
                      threads: int = 2) -> float:
  """FLOP/s of a float32 [size, size] x [size, size] matmul in TF."""
  graph = tf.Graph()
  with graph.as_default():
    a = tf.Variable(tf.random.normal([size, size]))
    b = tf.Variable(tf.random.normal([size, size]))
    # A chain of dependent matmuls in one run amortises the call overhead.
    c = a
    for _ in range(steps):
      c = tf.matmul(c, b) * (1.0 / size)
    out = tf.reduce_sum(c)
    with tf.Session(graph=graph, config=session_config(threads)) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(out)
      best = float("inf")
      for _ in range(3):
        start = time.perf_counter()
        sess.run(out)
        best = min(best, time.perf_counter() - start)
  return 2.0 * size ** 3 * steps / best


def top_ops(run_metadata: tf.RunMetadata, n: int = 12) -> List[Dict]:
  """The ops that took the most time in a traced step.

  Nodes are grouped by TF op type and lowered name (mtf op path with layer
  and slice numbers removed), so both layers' copies of an op add up.

  Args:
    run_metadata: from a FULL_TRACE run.
    n: how many to return.

  Returns:
    [{"op": ..., "ms": ..., "count": ...}] sorted by time, descending.
  """
  totals = {}
  for dev in run_metadata.step_stats.dev_stats:
    for node in dev.node_stats:
      key = _op_key(node)
      ms_, count = totals.get(key, (0.0, 0))
      totals[key] = (ms_ + node.op_end_rel_micros / 1000.0, count + 1)
  rows = [{"op": k, "ms": round(v[0], 2), "count": v[1]}
          for k, v in totals.items()]
  rows.sort(key=lambda r: -r["ms"])
  return rows[:n]


def traced_op_ms(run_metadata: tf.RunMetadata) -> float:
  """The time of all ops of a traced step, summed over nodes (ms)."""
  return sum(node.op_end_rel_micros / 1000.0
             for dev in run_metadata.step_stats.dev_stats
             for node in dev.node_stats)
