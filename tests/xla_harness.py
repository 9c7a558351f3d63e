# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A tiny model's TPU programs, compiled whole by XLA on the CPU.

On a Cloud TPU, T5's estimator lowers the mesh graph with `SimdMeshImpl`
inside the TPU computation and XLA compiles all of it: the training step
(forward pass, gradients, mesh's Adafactor update) and the decoding loops.
Here the same programs are built for a one-core TPU mesh (`SimdMeshImpl`
with a stand-in device assignment: on one core it needs no TPU op) and run
twice: as a plain TF graph, and wrapped whole in
`tensorflow.python.compiler.xla.xla.compile`, which compiles the
computation for the CPU's XLA device and fails (it does not fall back) on
an op that XLA cannot compile. Both runs start from the same variable
values, which live outside the compiled computation, as mesh creates them.

The models come from `workbench.tiny_model` (the attention layers of the
variants' and baselines' gin files, without gin): an encoder-decoder
(`Bitransformer`) and a decoder-only language model (`Unitransformer`).
"""

import contextlib
import dataclasses
import tempfile
import types
import zlib
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import mesh_tensorflow as mtf
from mesh_tensorflow import optimize
from mesh_tensorflow import simd_mesh_impl
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import utils as mtf_utils
import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.core.framework import function_pb2  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.compiler.xla import xla  # pylint: disable=g-direct-tensorflow-import

import lowering as lowering_lib
from mtf_synthesizer import attentions
from workbench import tiny_model

BATCH, LENGTH, VOCAB = 2, 8, 16
SHAPE = dict(d_model=8, num_heads=2, d_kv=4, d_ff=16, num_layers=1,
             vocab=VOCAB)
ENCODER_DECODER = "encoder-decoder"
LANGUAGE_MODEL = "decoder-only LM"
ARCHITECTURES = (ENCODER_DECODER, LANGUAGE_MODEL)
BEAM_SIZE = 2
# The batch of the several-core TPU meshes (split over up to 4 cores).
BATCH_FOR_CORES = 4
# The attribute xla.compile puts on every op of the compiled computation.
XLA_COMPILE_ATTR = "_xla_compile_id"
SUMMARY_OPS = frozenset(["ScalarSummary", "HistogramSummary", "ImageSummary",
                         "AudioSummary", "AudioSummaryV2", "TensorSummary",
                         "TensorSummaryV2", "MergeSummary",
                         "WriteScalarSummary", "WriteSummary"])


def padded_vocab() -> int:
  """The models' vocabulary as mesh pads it (a multiple of 128)."""
  return -(-VOCAB // 128) * 128


def valid(attention: attentions.Attention, architecture: str) -> bool:
  """Whether the attention can replace the self-attention of the model."""
  return attention.causal or architecture == ENCODER_DECODER


def layer_factory(attention: attentions.Attention
                  ) -> tiny_model.LayerFactory:
  """The self-attention layers its gin file puts in the stacks."""
  if attention.is_baseline:
    return tiny_model.baseline_layer(attention.name)
  return tiny_model.attention_layer(attention, fr_rank=2)


def build_model(attention: attentions.Attention, architecture: str,
                make_layer: Optional[tiny_model.LayerFactory] = None,
                **shape):
  """The tiny model of one attention (its gin file's stacks).

  Args:
    attention: a row of the table.
    architecture: ENCODER_DECODER or LANGUAGE_MODEL.
    make_layer: overrides the attention's layers (a test's own copy).
    **shape: sizes that differ from SHAPE's.

  Returns:
    A mesh Bitransformer or Unitransformer.
  """
  make = make_layer or layer_factory(attention)
  shape = dict(SHAPE, **shape)
  if architecture == LANGUAGE_MODEL:
    return tiny_model.build_transformer(
        make, tiny_model.ModelShape(**shape), LENGTH)
  decoder = None
  if not attention.causal:  # the decoder keeps its own self-attention
    decoder = tiny_model.attention_layer(attentions.MESH_SELF_ATTENTION)
  return tiny_model.build_transformer(
      make, tiny_model.ModelShape(encoder_layers=1, **shape), LENGTH,
      make_decoder_attention=decoder)


class StandInDeviceAssignment:
  """A TPU device assignment whose cores are all this CPU.

  What SimdMeshImpl asks of one: the device of each replica (one per mesh
  position), where it puts the variables' slices.
  """

  def __init__(self, num_cores: int = 1):
    self.num_replicas = num_cores
    self.num_cores_per_replica = 1

  def tpu_device(self, replica=0, logical_core=0, job=None):
    del replica, logical_core, job
    return ""


class StandInTPUContext:
  """What mesh's TPU model_fn reads of TPUEstimator's `params["context"]`.

  One host, whose device and whose cores are all this CPU.
  """

  def __init__(self, num_cores: int, physical_shape: Sequence[int]):
    """A stand-in context.

    Args:
      num_cores: the cores (one replica each, as mesh's TPU estimator has).
      physical_shape: the TPU topology's mesh shape [x, y, z, cores per
        chip], e.g. [1, 1, 1, 2] for one v3 chip.
    """
    self.num_hosts = 1
    self.num_replicas = num_cores
    self.device_assignment = StandInDeviceAssignment(num_cores)
    self.device_assignment.topology = types.SimpleNamespace(
        mesh_shape=list(physical_shape))

  def tpu_host_placement_function(self, host_id=0):
    del host_id
    return ""


def tpu_model_fn(model, architecture: str, mesh_shape: str, layout: str,
                 sequence_length: Dict[str, int], tpu_summaries: bool = False):
  """Mesh's TPU model function (`utils.run` with use_tpu=True) of a model.

  Args:
    model: from build_model.
    architecture: ENCODER_DECODER or LANGUAGE_MODEL.
    mesh_shape: e.g. "batch:2".
    layout: layout rules.
    sequence_length: {"inputs": n, "targets": m}.
    tpu_summaries: write the scalar summaries through the host call.

  Returns:
    The model function TPUEstimator calls inside the TPU rewrite.
  """
  return mtf_utils.tpu_estimator_model_fn(
      model_type=("bitransformer" if architecture == ENCODER_DECODER
                  else "lm"),
      transformer_model=model, vocabulary=None,
      model_dir=tempfile.mkdtemp(), use_tpu=True,
      mesh_shape=mtf.convert_to_shape(mesh_shape),
      layout_rules=mtf.convert_to_layout_rules(layout),
      batch_size=BATCH_FOR_CORES, sequence_length=sequence_length,
      autostack=True, keep_checkpoint_max=1, save_checkpoints_steps=10,
      learning_rate_schedule=0.01, optimizer=optimize.AdafactorOptimizer,
      tpu_summaries=tpu_summaries)


def simd_mesh_impl_of(mesh_shape: str = "", layout: str = ""
                      ) -> simd_mesh_impl.SimdMeshImpl:
  """A TPU mesh with the stand-in device assignment."""
  shape = mtf.convert_to_shape(mesh_shape)
  return simd_mesh_impl.SimdMeshImpl(
      shape, mtf.convert_to_layout_rules(layout),
      device_assignment=StandInDeviceAssignment(max(shape.size, 1)))


def tokens(seed: int = 0) -> Dict[str, np.ndarray]:
  """Inputs and targets [BATCH, LENGTH], with some padding."""
  rng = np.random.RandomState(seed)
  inputs = rng.randint(2, VOCAB, size=(BATCH, LENGTH)).astype(np.int32)
  inputs[1, 5:] = 0
  targets = rng.randint(2, VOCAB, size=(BATCH, LENGTH)).astype(np.int32)
  targets[0, 6:] = 0
  return {"inputs": inputs, "targets": targets}


def variable_dtype(activation_dtype: tf.DType) -> mtf.VariableDType:
  """T5's TPU setting: float32 variables, activations in `activation_dtype`."""
  return mtf.VariableDType(tf.float32, tf.float32, activation_dtype)


@dataclasses.dataclass
class Program:
  """A built TPU program: its outputs and what runs it.

  Attributes:
    outputs: name -> tf.Tensor (the compiled computation's outputs when
      compiled).
    lowering: the mtf lowering (its variables' masters and slices).
    graph: the mtf graph.
    compiled_ops: the TF ops inside the compiled computation (empty if not
      compiled).
    compiled_functions: the functions of the graph's library that the
      compiled computation calls (the bodies and conditions of its loops,
      built by control flow v2), as FunctionDefs.
  """
  outputs: Dict[str, tf.Tensor]
  lowering: mtf.Lowering
  graph: mtf.Graph
  compiled_ops: List[tf.Operation]
  compiled_functions: List[function_pb2.FunctionDef]


def _training_step(model, mesh: mtf.Mesh, features: Dict[str, mtf.Tensor],
                   dtype: tf.DType
                   ) -> Tuple[Dict[str, mtf.Tensor], List[mtf.Operation]]:
  """The loss and mesh's Adafactor update of one step, as mesh's utils.

  Args:
    model: a Bitransformer or Unitransformer.
    mesh: the mesh.
    features: "inputs" and "targets".
    dtype: the activations' dtype.

  Returns:
    ({"loss": float32 loss}, the update operations).
  """
  vd = variable_dtype(dtype)
  if isinstance(model, transformer.Bitransformer):
    _, loss = model.call_simple(
        inputs=features["inputs"], targets=features["targets"],
        compute_loss=True, mode=tf.estimator.ModeKeys.TRAIN,
        variable_dtype=vd)
  else:
    targets = features["targets"]
    inputs = mtf.shift(targets, offset=1, dim=targets.shape.dims[-1],
                       wrap=False)
    _, loss = model.call_simple(
        inputs=inputs, targets=targets, compute_loss=True,
        mode=tf.estimator.ModeKeys.TRAIN, variable_dtype=vd)
  graph = mesh.graph
  variables = graph.trainable_variables
  grads = mtf.gradients([loss], [v.outputs[0] for v in variables])
  updates = optimize.AdafactorOptimizer().apply_grads(grads, variables)
  return {"loss": mtf.cast(loss, tf.float32)}, updates


def _decodes(model, mesh: mtf.Mesh, features: Dict[str, mtf.Tensor],
             dtype: tf.DType) -> Dict[str, mtf.Tensor]:
  """The decodes of T5's eval (see build_and_run's callers).

  Args:
    model: a Bitransformer or Unitransformer.
    mesh: the mesh.
    features: "inputs" (and "targets", unused).
    dtype: the activations' dtype.

  Returns:
    name -> token ids: "greedy" and, for an encoder-decoder, "beam".
  """
  vd = variable_dtype(dtype)
  inputs = features["inputs"]
  if isinstance(model, transformer.Bitransformer):
    return {"greedy": model.decode(inputs, variable_dtype=vd,
                                   temperature=0.0),
            "beam": model.decode(inputs, variable_dtype=vd,
                                 beam_size=BEAM_SIZE, alpha=0.6)}
  # A language model: mesh's utils run `sample_autoregressive` (greedy at
  # temperature 0), here from a prompt of 3 tokens.
  length_dim = inputs.shape.dims[-1]
  prompt = inputs * mtf.cast(
      mtf.less(mtf.range(mesh, length_dim, tf.int32), 3), tf.int32)
  return {"greedy": model.sample_autoregressive(
      prompt, temperature=0.0, variable_dtype=vd,
      remove_partial_sequences=True)}


def build(attention: attentions.Attention, architecture: str, what: str,
          activation_dtype: tf.DType, compiled: bool,
          make_layer: Optional[tiny_model.LayerFactory] = None) -> Program:
  """Builds a training step ("train") or the decodes ("decode") in the graph.

  Args:
    attention: a row of the table.
    architecture: ENCODER_DECODER or LANGUAGE_MODEL.
    what: "train" or "decode".
    activation_dtype: tf.float32 or tf.bfloat16.
    compiled: wrap the whole program in xla.compile.
    make_layer: overrides the attention's layers.

  Returns:
    The Program.
  """
  model = build_model(attention, architecture, make_layer)
  data = tokens()
  built = {}

  def computation():
    # Resource variables, as TPUEstimator creates them.
    with tf.variable_scope(tf.get_variable_scope(), use_resource=True):
      return build_in_scope()

  def build_in_scope():
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    dims = [mtf.Dimension("batch", BATCH), mtf.Dimension("length", LENGTH)]
    features = {k: mtf.import_tf_tensor(mesh, tf.constant(v), dims)
                for k, v in data.items()}
    updates = []
    if what == "train":
      outputs, updates = _training_step(model, mesh, features,
                                        activation_dtype)
    else:
      outputs = _decodes(model, mesh, features, activation_dtype)
    # Variables stacked, as T5's utils.run does by default.
    lowering = mtf.Lowering(graph, {mesh: simd_mesh_impl_of()},
                            autostack=True)
    tf_outputs = {k: lowering.export_to_tf_tensor(v)
                  for k, v in sorted(outputs.items())}
    built.update(lowering=lowering, graph=graph, names=sorted(tf_outputs))
    result = list(tf_outputs.values())
    if updates:
      with tf.control_dependencies(
          [lowering.lowered_operation(op) for op in updates]):
        result = [tf.identity(t) for t in result]
    return result

  tf_graph = tf.get_default_graph()
  before = len(tf_graph.get_operations())
  # The graph's function library (TF keeps no public list of it).
  library = tf_graph._functions  # pylint: disable=protected-access
  functions_before = set(library)
  if compiled:
    with _one_core_variable_handles():
      results = xla.compile(computation)
  else:
    results = computation()
  compiled_ops = [op for op in tf_graph.get_operations()[before:]
                  if XLA_COMPILE_ATTR in op.node_def.attr]
  compiled_functions = []
  if compiled:
    compiled_functions = [function.definition
                          for name, function in library.items()
                          if name not in functions_before]
  return Program(dict(zip(built["names"], results)), built["lowering"],
                 built["graph"], compiled_ops, compiled_functions)


@contextlib.contextmanager
def _one_core_variable_handles() -> Iterator[None]:
  """Lets SimdMeshImpl's variables be read inside xla.compile.

  SimdMeshImpl keeps a variable's slices (one per core) in a mesh
  `ReplicatedVariable`, which inside a TPU computation asks the enclosing
  TPU context for the handle of this core's slice
  (`get_replicated_var_handle`). xla.compile's context has no such method;
  on a one-core mesh the handle is that of the one slice, which is what this
  gives it while the computation is built.

  Yields:
    None.
  """
  context_class = xla.XLACompileContext
  assert not hasattr(context_class, "get_replicated_var_handle")

  def get_replicated_var_handle(self, name, handle_id=None, vars_=(),
                                **unused_kwargs):
    del self, name, handle_id
    if len(vars_) != 1:
      raise ValueError("A one-core stand-in got %d slices." % len(vars_))
    return vars_[0].handle

  context_class.get_replicated_var_handle = get_replicated_var_handle
  try:
    yield
  finally:
    del context_class.get_replicated_var_handle


# Mesh's Adafactor names its slot variables after the variable.
OPTIMIZER_SLOTS = ("_slot_vr", "_slot_vc", "_slot_v", "_slot_m")


def initial_value(name: str, shape) -> np.ndarray:
  """A variable's value, a function of its name and shape only."""
  rng = np.random.RandomState(zlib.crc32(name.encode("utf-8")))
  if name.endswith("/scale"):
    return (1.0 + 0.3 * rng.randn(*shape)).astype(np.float32)
  std = 1.0 if len(shape) < 2 else 2.0 / np.sqrt(shape[0])
  return (std * rng.randn(*shape)).astype(np.float32)


def run(program: Program) -> Dict[str, np.ndarray]:
  """Runs a built program once, from the variables' `initial_value`s.

  Args:
    program: a Program of the default graph.

  Returns:
    Its outputs by name.
  """
  with tf.Session(config=lowering_lib.session_config()) as session:
    session.run(tf.global_variables_initializer())
    for variable in program.graph.all_variables:
      if variable.name.endswith(OPTIMIZER_SLOTS):
        continue  # zeros, as the optimizer initializes them
      master = variable.get_master()
      master.load(initial_value(variable.name, master.shape.as_list()),
                  session)
    session.run(program.lowering.copy_masters_to_slices())
    return session.run(program.outputs)


# What test_xla.py builds of each model: each program plain and compiled,
# but the bfloat16 decodes compiled only (they are not compared with the
# plain graph's; see test_xla.py).
CASE_PROGRAMS = (("train", tf.float32, False), ("train", tf.float32, True),
                 ("train", tf.bfloat16, False), ("train", tf.bfloat16, True),
                 ("decode", tf.float32, False), ("decode", tf.float32, True),
                 ("decode", tf.bfloat16, True))


def build_and_run(attention: attentions.Attention, architecture: str,
                  keys=CASE_PROGRAMS,
                  make_layer: Optional[tiny_model.LayerFactory] = None
                  ) -> Dict[tuple, "Result"]:
  """Builds programs of one model and runs each once.

  Args:
    attention: a row of the table.
    architecture: ENCODER_DECODER or LANGUAGE_MODEL.
    keys: the programs, each (what: "train" or "decode", activation dtype,
      compiled: whether xla.compile wraps it).
    make_layer: overrides the attention's layers.

  Returns:
    key -> its Result.
  """
  results = {}
  for key in keys:  # one graph each: cheaper than one graph for all
    with tf.Graph().as_default():
      program = build(attention, architecture, *key, make_layer=make_layer)
      results[key] = Result(run(program), program.compiled_ops,
                            program.compiled_functions)
  return results


@dataclasses.dataclass
class Result:
  """A program's outputs, and what XLA compiled (if anything)."""
  outputs: Dict[str, np.ndarray]
  compiled_ops: List[tf.Operation]
  compiled_functions: List[function_pb2.FunctionDef]


def float64_and_summaries(result: Result) -> List[str]:
  """The compiled ops (and ops of compiled functions) a TPU cannot run.

  Args:
    result: a compiled program's Result.

  Returns:
    "<op name> (<type>): float64" for an op with a float64 output or type
    attribute, "<op name> (<type>): summary" for a summary op.
  """
  found = []
  for op in result.compiled_ops:
    if any(t.dtype == tf.float64 for t in op.outputs):
      found.append("%s (%s): float64" % (op.name, op.type))
    if op.type in SUMMARY_OPS:
      found.append("%s (%s): summary" % (op.name, op.type))
  double = tf.float64.as_datatype_enum
  for function in result.compiled_functions:
    for node in function.node_def:
      label = "%s/%s (%s)" % (function.signature.name, node.name, node.op)
      if any(v.type == double or double in v.list.type
             for v in node.attr.values()):
        found.append(label + ": float64")
      if node.op in SUMMARY_OPS:
        found.append(label + ": summary")
  return found
