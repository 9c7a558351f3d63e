# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Runs one attention layer on a real mesh Context and returns NumPy arrays.

Builds the layer's graph once, on a one-device (or several-device) placement
mesh, and returns the output, every variable's value and the gradients of a
fixed random projection of the output with respect to the variables and the
input.
"""

import dataclasses
from typing import Callable, Dict, Optional

import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
import numpy as np
import tensorflow.compat.v1 as tf

import lowering as lowering_lib




@dataclasses.dataclass
class _Model:
  """The parts of a Unitransformer that attention layers read."""
  model_dim: mtf.Dimension
  fully_autoregressive: bool
  ensemble_dims: list = dataclasses.field(default_factory=list)
  ensemble_dim: Optional[mtf.Dimension] = None


@dataclasses.dataclass
class LayerRun:
  output: np.ndarray
  variables: Dict[str, np.ndarray]
  grads: Dict[str, np.ndarray]  # by variable name, and "x" for the input
  output_weights: np.ndarray    # the loss is sum(output * output_weights)
  summaries: Dict[str, float] = dataclasses.field(default_factory=dict)



def numerical_grad(f: Callable[[], float], value: np.ndarray,
                   eps: float = 1e-4) -> np.ndarray:
  """Central differences of scalar f with respect to `value` (in place).

  Args:
    f: computes the scalar from the current contents of `value`.
    value: the array to perturb (restored afterwards).
    eps: the step.

  Returns:
    df/dvalue, like value (float64).
  """
  grad = np.zeros_like(value, dtype=np.float64)
  flat = value.reshape(-1)
  for i in range(flat.size):
    old = flat[i]
    flat[i] = old + eps
    up = f()
    flat[i] = old - eps
    down = f()
    flat[i] = old
    grad.reshape(-1)[i] = (up - down) / (2 * eps)
  return grad

def run_layer(layer, x: np.ndarray, *, causal: bool = False,
              positions: Optional[np.ndarray] = None,
              segment_ids: Optional[np.ndarray] = None,
              train: bool = False, seed: int = 0,
              variable_values: Optional[Dict[str, np.ndarray]] = None,
              mesh_shape: str = "", layout: str = "",
              num_devices: int = 1) -> LayerRun:
  """Builds and runs `layer` on x of shape [batch, length, d_model].

  Args:
    layer: a SelfAttention (or subclass) instance.
    x: float32 input.
    causal: mask future positions (as a decoder's self-attention).
    positions: [batch, length] positions inside segments (packed input).
    segment_ids: [batch, length] segment ids (packed input).
    train: build in TRAIN mode (dropout active).
    seed: graph-level seed for the variable initializers.
    variable_values: optional values to assign to variables, by name.
    mesh_shape: e.g. "model:2,batch:2" ("" for one device).
    layout: layout rules, e.g. "heads:model,batch:batch".
    num_devices: logical CPU devices for the mesh.

  Returns:
    A LayerRun.
  """
  batch_size, length, d_model = x.shape
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.set_random_seed(seed)
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    batch_dim = mtf.Dimension("batch", batch_size)
    length_dim = mtf.Dimension("length", length)
    model_dim = mtf.Dimension("d_model", d_model)
    shape = mtf.Shape([batch_dim, length_dim, model_dim])
    xt = mtf.import_tf_tensor(mesh, tf.constant(x, tf.float32), shape)
    if positions is None:
      position = mtf.range(mesh, length_dim, tf.int32)
      position_is_default = True
    else:
      position = mtf.import_tf_tensor(
          mesh, tf.constant(positions, tf.int32), [batch_dim, length_dim])
      position_is_default = False
    sequence_id = None
    if segment_ids is not None:
      sequence_id = mtf.import_tf_tensor(
          mesh, tf.constant(segment_ids, tf.int32), [batch_dim, length_dim])
    priority = position if causal else None
    if causal and positions is not None:
      priority = mtf.range(mesh, length_dim, tf.int32)
    context = transformer.Context(
        model=_Model(model_dim, fully_autoregressive=causal),
        mesh=mesh, batch_dims=[batch_dim], length_dim=length_dim,
        variable_dtype=mtf.VariableDType(tf.float32),
        mode=tf.estimator.ModeKeys.TRAIN if train else
        tf.estimator.ModeKeys.EVAL,
        position=position, position_is_default=position_is_default,
        sequence_id=sequence_id, read_priority=priority,
        write_priority=priority, losses=[])
    with tf.variable_scope("layer"):
      y = layer.call(context, xt)
    rng = np.random.RandomState(seed + 1)
    out_w = rng.randn(*y.shape.to_integer_list).astype(np.float32)
    loss = mtf.reduce_sum(y * mtf.import_tf_tensor(
        mesh, tf.constant(out_w), y.shape))
    variables = graph.trainable_variables
    all_variables = graph.all_variables
    grads = mtf.gradients([loss], [v.outputs[0] for v in variables] + [xt])
    lowering = lowering_lib.lower(graph, mesh, mesh_shape, layout)
    fetch = {"y": lowering.export_to_tf_tensor(y)}
    for v in all_variables:
      fetch["var/" + v.name] = lowering.export_to_tf_tensor(v.outputs[0])
    for v, g in zip(variables + [None], grads):
      if g is not None:
        key = "grad/" + (v.name if v is not None else "x")
        fetch[key] = lowering.export_to_tf_tensor(g)
    # Scalar summaries: mesh's collection (what its TPU host call writes)
    # and the TF summaries that a placement mesh writes (summaries.py).
    for name, tensor in tf_graph.get_collection(
        mtf.utils.SCALAR_SUMMARIES_COLLECTION_KEY):
      fetch["summary/" + name] = tensor
    for i, summary in enumerate(tf_graph.get_collection(
        tf.GraphKeys.SUMMARIES)):
      fetch["tfsummary/%d" % i] = summary
    init = tf.global_variables_initializer()
    config = lowering_lib.session_config(max(num_devices, 1))
    with tf.Session(graph=tf_graph, config=config) as sess:
      sess.run(init)
      by_name = {v.name: v for v in all_variables}
      for name, value in (variable_values or {}).items():
        by_name[name].get_master().load(value, sess)
      sess.run(lowering.copy_masters_to_slices())
      values = sess.run(fetch)
  return LayerRun(
      output=values["y"],
      variables={k[4:]: v for k, v in values.items() if k.startswith("var/")},
      grads={k[5:]: v for k, v in values.items() if k.startswith("grad/")},
      output_weights=out_w,
      summaries=_summaries(values))


def _summaries(values: Dict[str, object]) -> Dict[str, float]:
  """{tag: value} of the fetched scalar summaries of both kinds."""
  out = {k[len("summary/"):]: float(v) for k, v in values.items()
         if k.startswith("summary/")}
  for k, v in values.items():
    if k.startswith("tfsummary/"):
      for value in tf.Summary.FromString(v).value:
        out[value.tag] = value.simple_value
  return out


def local_variables(variables: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """A run's variables by their name inside the layer's scope, in float64."""
  return {k[len("layer/"):]: v.astype(np.float64)
          for k, v in variables.items()}


def assert_gradients_match(
    run: LayerRun, x: np.ndarray,
    reference: Callable[[Dict[str, np.ndarray], np.ndarray], np.ndarray],
    trainable: Callable[[str], bool] = lambda name: True) -> int:
  """Compares a run's gradients with central differences of a reference.

  The loss is the harness's: sum(output * output_weights), with the output
  computed by `reference` (NumPy, float64) from the run's variables.

  Args:
    run: the LayerRun.
    x: the layer input of the run.
    reference: (variables by local name, x) -> the layer output.
    trainable: whether a variable (local name) has a gradient; those that
      do not must have none in the run.

  Returns:
    How many variables' gradients were compared (the input's as well).
  """
  variables = local_variables(run.variables)
  xs = x.astype(np.float64)
  w = run.output_weights.astype(np.float64)

  def loss():
    return np.sum(reference(variables, xs) * w)

  checked = 0
  for name in sorted(run.variables):
    local = name[len("layer/"):]
    if not trainable(local):
      assert name not in run.grads, name
      continue
    numeric = numerical_grad(loss, variables[local])
    np.testing.assert_allclose(run.grads[name], numeric, rtol=2e-3,
                               atol=2e-4, err_msg=name)
    checked += 1
  numeric_x = numerical_grad(loss, xs)
  np.testing.assert_allclose(run.grads["x"], numeric_x, rtol=2e-3, atol=2e-4)
  return checked
