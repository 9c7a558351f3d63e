# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What a TF op waits for, to test the order a lowered graph imposes."""

from typing import Set, Union

import tensorflow.compat.v1 as tf


def ancestors(node: Union[tf.Operation, tf.Tensor]) -> Set[tf.Operation]:
  """Every op that node waits for: data and control inputs, transitively.

  Args:
    node: an op, or a tensor (its op).

  Returns:
    The ops, without node's own op.
  """
  seen = set()
  stack = [node.op if isinstance(node, tf.Tensor) else node]
  while stack:
    current = stack.pop()
    for parent in [t.op for t in current.inputs] + current.control_inputs:
      if parent not in seen:
        seen.add(parent)
        stack.append(parent)
  return seen
