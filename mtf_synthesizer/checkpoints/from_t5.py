# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Starting a Synthesizer model from a T5 or a Synthesizer checkpoint.

mesh names every variable after the layer class, so a SynthesizerAttention
layer's q/k/v/o live under `.../SynthesizerAttention/` while a released T5
checkpoint has them under `.../SelfAttention/`. When it initialises from a
checkpoint, mesh (`tpu_estimator_model_fn`) asks
`utils.init_checkpoint_variable_mapping` for the checkpoint name of every
global variable of the graph (weights, optimizer slots, global_step), restores
those whose answer is in the checkpoint and silently leaves all the others at
their initializers. `synthesizer/init_from_t5.gin` makes the answer come from
`vanilla_to_synthesizer`, which never re-initialises silently:

  * The mapped name is tried first:
      .../SynthesizerAttention/{q,k,v,o,relative_attention_bias}[_slot_*]
          -> .../SelfAttention/same
      .../SynthesizerAttention/kv[_slot_*]  (the value projection G of R, D,
          FR, FD) -> .../SelfAttention/v[_slot_*]
    then the graph's own name, so that a Synthesizer checkpoint (e.g. GLUE
    finetuning after Synthesizer pretraining on C4) restores everything,
    then, for a norm scale, its name in the other naming: today's mesh
    writes `.../layer_NNN/rms_norm/scale` and `encoder/rms_norm/scale`, the
    released T5.1.0 checkpoints (mesh's legacy LayerStack) hold
    `.../layer_NNN/layer_norm/scale` and `encoder/final_layer_norm/scale`.
    Every released family restores without a remapping by hand
    (docs/finetuning.md lists them).
  * Synthesizer-only variables (random/R, dense/w1, mixture/alpha_logits, ...
    and their slots) that are in neither form start fresh by design, and so
    do the optimizer slots when the checkpoint holds none (released
    checkpoints may have been saved without them).
  * Any other variable in neither form is an error that lists all of them,
    unless it matches a regular expression of
    `mtf_synthesizer.vanilla_to_synthesizer.allow_fresh` (searched in the
    graph name), e.g. `['_slot_']` for a checkpoint that holds some
    optimizer slots but not all. So is a shape that differs from the checkpoint's.
  * The checkpoint is `mtf_synthesizer.vanilla_to_synthesizer.checkpoint`,
    else `utils.run.init_checkpoint` (the stock CLI). `MtfModel.estimator`
    of this package binds the former to its `init_checkpoint`; a caller of
    `t5.models.MtfModel.train(init_checkpoint=...)` binds it too (mesh takes
    that checkpoint as a Python argument, which a mapping cannot see). mesh's
    `init_variable_filter` is read from its gin binding, the only way mesh
    takes it.
  * Restoring is the graph's `tf.GraphKeys.INIT_OP` (`add_init_op`): the op
    the Estimator's Scaffold runs to start a run from scratch. It restores
    every mapped variable, with a cast where the checkpoint stores another
    floating-point dtype than the graph's (bfloat16 and float32: mesh's
    master variables are bfloat16 unless
    `utils.get_variable_dtype.master_dtype` says otherwise, and checkpoints
    are written in either; TF's `init_from_checkpoint`, which mesh calls
    with the mapped names, reads a variable in its own dtype only and stops
    with `expected dtype float does not equal original dtype bfloat16`).
  * Every variable is logged once per graph and checkpoint as restored (with
    its source and any cast) or fresh (with the reason) while the graph is
    built, with a line that says what is about to be restored:
      init_from_t5: restoring 40 from /path/model.ckpt-N, 6 fresh: ...
    and, once the session has run the restore (so, not when a run resumes
    from its own model directory), the summary line on standard error (on
    TPU, the host's):
      init_from_t5: 40 restored from /path/model.ckpt-N, 6 fresh: a, b, ...
"""

import re
import sys
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple
import weakref

from absl import logging
import gin
from mesh_tensorflow.transformer import utils as mtf_utils
import tensorflow.compat.v1 as tf

from mtf_synthesizer.checkpoints import names
from mtf_synthesizer.checkpoints import release

MAPPING = "mtf_synthesizer.vanilla_to_synthesizer"
ALLOW_FRESH = MAPPING + ".allow_fresh"
# mesh's model_fn reads its variable filter from gin only.
INIT_VARIABLE_FILTER = "tpu_estimator_model_fn.init_variable_filter"
LOG_PREFIX = "init_from_t5: "

_VANILLA_SCOPE = "SelfAttention"
_SHARED = re.compile(r"^(q|k|v|o|relative_attention_bias)(_slot_\w+)?$")
_VALUE = re.compile(r"^kv(_slot_\w+)?$")
_INIT_SCOPE = "init_from_t5"


def checkpoint_name(graph_name: str) -> str:
  """Returns the vanilla checkpoint's name for a graph variable name.

  Args:
    graph_name: a variable name in the Synthesizer model's graph.

  Returns:
    The name to read it from (unchanged outside SynthesizerAttention).
  """
  parts = names.split_scope(graph_name, release.SCOPE)
  if parts is None:
    return graph_name
  prefix, local = parts
  vanilla = prefix + _VANILLA_SCOPE + "/"
  if _SHARED.match(local):
    return vanilla + local
  match = _VALUE.match(local)
  if match:
    return vanilla + "v" + (match.group(1) or "")
  return graph_name  # synthesizer-only: not in a vanilla checkpoint


def is_synthesizer_only(graph_name: str) -> bool:
  """Whether a graph variable has no counterpart in a vanilla T5 checkpoint.

  Args:
    graph_name: a variable name in the Synthesizer model's graph.

  Returns:
    True for SynthesizerAttention's own weights (random/R, dense/w1,
    mixture/alpha_logits, ...) and their optimizer slots.
  """
  return (names.split_scope(graph_name, release.SCOPE) is not None
          and checkpoint_name(graph_name) == graph_name)


class Resolution(NamedTuple):
  """Where each graph variable comes from.

  Attributes:
    sources: graph name -> the name to give mesh (a checkpoint name when
      restored; a name mesh will not restore otherwise).
    restored: graph name -> checkpoint name, for the restored variables.
    fresh: graph name -> why it keeps its initializer.
    casts: graph name -> (stored dtype, graph dtype), for the restored
      variables whose dtypes differ.
  """
  sources: Dict[str, str]
  restored: Dict[str, str]
  fresh: Dict[str, str]
  casts: Dict[str, Tuple[tf.DType, tf.DType]] = {}


def _suggest_allow_fresh(variables: Sequence[str]) -> str:
  """A gin binding that would let `variables` start fresh."""
  if all(names.SLOT in name for name in variables):
    patterns = ["'%s'" % names.SLOT]
  else:
    patterns = ["'^%s$'" % re.escape(name) for name in variables[:3]]
    if len(variables) > 3:
      patterns.append("...")
  return "%s = [%s]" % (ALLOW_FRESH, ", ".join(patterns))


def resolve(graph_shapes: Dict[str, Optional[List[int]]],
            checkpoint_shapes: Dict[str, List[int]],
            checkpoint: str = "",
            allow_fresh: Iterable[str] = (),
            restorable: Optional[Iterable[str]] = None,
            not_asked: Iterable[str] = (),
            graph_dtypes: Optional[Dict[str, tf.DType]] = None,
            checkpoint_dtypes: Optional[Dict[str, tf.DType]] = None
            ) -> Resolution:
  """Decides, for every graph variable, what initialises it.

  Args:
    graph_shapes: graph variable name -> shape (None: not checked).
    checkpoint_shapes: checkpoint variable name -> shape.
    checkpoint: the checkpoint's path, for messages.
    allow_fresh: regular expressions; a graph variable whose name matches one
      (re.search) may start fresh when the checkpoint lacks it.
    restorable: the checkpoint names mesh will restore from (after its
      `init_variable_filter`); default: all of checkpoint_shapes.
    not_asked: graph names mesh does not restore (`should_load_variable` is
      False for them); they start fresh.
    graph_dtypes: graph variable name -> dtype (default: not compared).
    checkpoint_dtypes: checkpoint variable name -> dtype.

  Returns:
    A Resolution covering every name of graph_shapes.

  Raises:
    ValueError: listing every variable that is in neither its mapped nor its
      own form in the checkpoint (and not allowed to be fresh), every shape
      that differs from the checkpoint's, and every dtype that differs
      other than between two floating-point types.
  """
  allow = [re.compile(p) for p in allow_fresh]
  restorable = (set(checkpoint_shapes) if restorable is None
                else set(restorable))
  not_asked = set(not_asked)
  sources, restored, fresh, casts = {}, {}, {}, {}
  has_slots = any(names.SLOT in n for n in checkpoint_shapes)
  missing, mismatched = [], []
  for name in sorted(graph_shapes):
    mapped = checkpoint_name(name)
    candidates = list(dict.fromkeys(
        [mapped, name] + names.norm_aliases(mapped)
        + names.norm_aliases(name)))
    source = next((c for c in candidates if c in checkpoint_shapes), None)
    sources[name] = source or mapped
    if name in not_asked:
      fresh[name] = "should_load_variable is False"
    elif source is not None and source not in restorable:
      fresh[name] = "%s is excluded by init_variable_filter" % source
    elif source is not None:
      shape = graph_shapes[name]
      if shape is not None and list(shape) != list(checkpoint_shapes[source]):
        mismatched.append(
            "Cannot initialise %s %s from %s:%s, whose shape is %s." % (
                name, list(shape), checkpoint, source,
                list(checkpoint_shapes[source])))
      restored[name] = source
      stored = (checkpoint_dtypes or {}).get(source)
      wanted = (graph_dtypes or {}).get(name)
      if stored is not None and wanted is not None and stored != wanted:
        if stored.is_floating and wanted.is_floating:
          casts[name] = (stored, wanted)
        else:
          mismatched.append(
              "Cannot initialise %s (%s) from %s:%s, stored as %s." % (
                  name, wanted.name, checkpoint, source, stored.name))
    else:
      pattern = next((p for p in allow if p.search(name)), None)
      if pattern is not None:
        fresh[name] = "not in %s; allowed by %s %r" % (
            checkpoint, ALLOW_FRESH, pattern.pattern)
      elif is_synthesizer_only(name):
        fresh[name] = "synthesizer-only, not in %s" % checkpoint
      elif names.SLOT in name and not has_slots:
        fresh[name] = "%s holds no optimizer slots" % checkpoint
      else:
        missing.append((name, candidates))
  errors = []
  if missing:
    errors.append(
        "%s%d variable(s) would silently keep their initializers: %s has "
        "them under neither their mapped nor their own name:\n%s\n"
        "Check that the model gin matches the checkpoint's. To start them "
        "from their initializers on purpose, pass e.g.\n"
        "  --gin_param=\"%s\"\n(regular expressions searched in the graph "
        "names; '%s' matches every optimizer slot, for a checkpoint saved "
        "without them)." % (
            LOG_PREFIX, len(missing), checkpoint,
            "\n".join("  %s (looked for %s)" % (n, " or ".join(c))
                      for n, c in missing),
            _suggest_allow_fresh([n for n, _ in missing]), names.SLOT))
  if mismatched:
    errors.append("\n".join(mismatched) + "\nCheck that the model gin "
                  "(d_model, num_heads, d_kv, ...) matches the checkpoint's.")
  if errors:
    raise ValueError("\n".join(errors))
  return Resolution(sources, restored, fresh, casts)


def _casts_note(resolution: Resolution) -> str:
  """e.g. " (12 cast from bfloat16 to float32)", or ""."""
  kinds = {}
  for stored, wanted in resolution.casts.values():
    key = "%s to %s" % (stored.name, wanted.name)
    kinds[key] = kinds.get(key, 0) + 1
  return "".join(" (%d cast from %s)" % (n, kind)
                 for kind, n in sorted(kinds.items()))


def plan(resolution: Resolution, checkpoint: str) -> str:
  """The line logged while the graph is built, before anything is restored.

  Args:
    resolution: from `resolve`.
    checkpoint: the checkpoint's path.

  Returns:
    e.g. "init_from_t5: restoring 40 from ckpt, 2 fresh: a, b".
  """
  fresh = sorted(resolution.fresh)
  return "%srestoring %d from %s%s, %d fresh%s" % (
      LOG_PREFIX, len(resolution.restored), checkpoint,
      _casts_note(resolution), len(fresh),
      (": " + ", ".join(fresh)) if fresh else "")


def summary(resolution: Resolution, checkpoint: str) -> str:
  """The one-line summary of a Resolution.

  Args:
    resolution: what resolve() returned.
    checkpoint: the checkpoint's path.

  Returns:
    e.g. "init_from_t5: 40 restored from ckpt, 2 fresh: a, b".
  """
  fresh = sorted(resolution.fresh)
  return "%s%d restored from %s, %d fresh%s" % (
      LOG_PREFIX, len(resolution.restored), checkpoint, len(fresh),
      (": " + ", ".join(fresh)) if fresh else "")


def _gin_value(parameter: str, default=None):
  """The value bound to a gin parameter, or `default` when it is unbound."""
  try:
    return gin.query_parameter(parameter)
  except ValueError:  # not bound
    return default


def _checkpoint_file(checkpoint: str) -> str:
  """A checkpoint prefix, or the latest one of a directory."""
  if tf.io.gfile.isdir(checkpoint):
    return tf.train.latest_checkpoint(checkpoint) or checkpoint
  return checkpoint


def _restore(variable: tf.Variable, checkpoint: str, source: str,
             stored: tf.DType) -> tf.Operation:
  """An op that assigns `source` from the checkpoint, cast, to `variable`.

  As TF's `init_from_checkpoint` restores a variable (a RestoreV2 op on the
  variable's host CPU, then an assignment), with a cast between the read and
  the assignment when the dtypes differ.

  Args:
    variable: a graph variable.
    checkpoint: the checkpoint prefix.
    source: the variable's name in the checkpoint.
    stored: the dtype it is stored in.

  Returns:
    The assignment.
  """
  with tf.device(variable.device), tf.device("/cpu:0"):
    value = tf.raw_ops.RestoreV2(
        prefix=checkpoint, tensor_names=[source], shape_and_slices=[""],
        dtypes=[stored])[0]
    value = tf.cast(value, variable.dtype.base_dtype)
  value.set_shape(variable.shape)
  return tf.assign(variable, value).op


def add_init_op(resolution: Resolution, checkpoint: str,
                stored: Dict[str, tf.DType], line: str) -> tf.Operation:
  """Makes the default graph's session initialisation restore `resolution`.

  The op goes to the graph's `tf.GraphKeys.INIT_OP` collection, which the
  Estimator's `tf.train.Scaffold` runs in place of its default (every
  variable's initializer) when a run starts from scratch, and not when it
  resumes from its model directory. It restores every variable of
  `resolution.restored` (cast where the dtypes differ: TF's
  `init_from_checkpoint` reads only in the variable's own dtype), runs the
  fresh variables' initializers, then prints `line` on standard error. The
  restoring initializers that mesh's `init_from_checkpoint` call sets are
  left in the graph unused.

  Args:
    resolution: what `resolve` decided for the graph's global variables.
    checkpoint: the checkpoint's path (a prefix or a directory).
    stored: checkpoint name -> the dtype stored there.
    line: the line printed once everything is restored.

  Returns:
    The op, now the collection's only item.

  Raises:
    ValueError: something other than this module put an op in the
      collection (the Scaffold would run only one of them).
  """
  graph = tf.get_default_graph()
  collection = graph.get_collection_ref(tf.GraphKeys.INIT_OP)
  others = [op for op in collection
            if not op.name.startswith(_INIT_SCOPE + "/")]
  if others:
    raise ValueError("%sthe graph's %s collection already holds %s; the "
                     "session would run only one of them." % (
                         LOG_PREFIX, tf.GraphKeys.INIT_OP, others))
  del collection[:]  # an op of this module for an earlier checkpoint
  checkpoint = _checkpoint_file(checkpoint)
  variables = {v.op.name: v for v in tf.global_variables()}
  steps = []
  with tf.name_scope(_INIT_SCOPE + "/"):
    for name in sorted(resolution.fresh):
      if name in variables:
        steps.append(variables[name].initializer)
    for name, source in sorted(resolution.restored.items()):
      if name in variables:
        steps.append(_restore(variables[name], checkpoint, source,
                              stored[source]))
    with tf.device("/cpu:0"), tf.control_dependencies(steps):
      printed = tf.print(line, output_stream=sys.stderr)
    init_op = tf.group(printed, *steps, name="init_op")
  collection.append(init_op)
  return init_op


class _Mapper:
  """Resolves a graph's variables once per checkpoint, then answers mesh."""

  def __init__(self):
    self._graph = None  # weak reference
    self._key = None
    self._sources: Dict[str, str] = {}

  def __call__(self, graph_name: str, checkpoint: str, variable_filter: str,
               allow_fresh: Tuple[str, ...]) -> str:
    graph = tf.get_default_graph()
    key = (checkpoint, variable_filter, allow_fresh)
    if self._graph is None or self._graph() is not graph or key != self._key:
      self._graph, self._key, self._sources = None, None, {}
      variables = tf.global_variables()
      resolution, stored = self._resolve(
          checkpoint, variable_filter, allow_fresh,
          {v.op.name: v.shape.as_list() for v in variables},
          {v.op.name: v.dtype.base_dtype for v in variables})
      logging.log(logging.WARNING if resolution.fresh else logging.INFO,
                  "%s", plan(resolution, checkpoint))
      add_init_op(resolution, checkpoint, stored,
                  summary(resolution, checkpoint))
      self._sources = dict(resolution.sources)
      self._graph, self._key = weakref.ref(graph), key
    if graph_name not in self._sources:  # not a global variable of graph
      self._sources.update(self._resolve(
          checkpoint, variable_filter, allow_fresh, {graph_name: None},
          {})[0].sources)
    return self._sources[graph_name]

  def _resolve(self, checkpoint, variable_filter, allow_fresh, graph_shapes,
               graph_dtypes) -> Tuple[Resolution, Dict[str, tf.DType]]:
    reader = tf.train.load_checkpoint(checkpoint)
    checkpoint_shapes = reader.get_variable_to_shape_map()
    stored = reader.get_variable_to_dtype_map()
    restorable = None
    if variable_filter:
      pattern = re.compile(variable_filter)
      restorable = [n for n in checkpoint_shapes if pattern.search(n)]
    not_asked = [n for n in graph_shapes
                 if not mtf_utils.should_load_variable(n)]
    resolution = resolve(graph_shapes, checkpoint_shapes, checkpoint,
                         allow_fresh, restorable, not_asked, graph_dtypes,
                         stored)
    for name in sorted(graph_shapes):
      if name in resolution.casts:
        logging.info("%s%s <- %s (cast from %s to %s)", LOG_PREFIX, name,
                     resolution.restored[name],
                     *(dtype.name for dtype in resolution.casts[name]))
      elif name in resolution.restored:
        logging.info("%s%s <- %s", LOG_PREFIX, name, resolution.restored[name])
      else:
        logging.info("%s%s is fresh (%s)", LOG_PREFIX, name,
                     resolution.fresh[name])
    return resolution, stored


_MAPPER = _Mapper()


@gin.configurable(module="mtf_synthesizer")
def vanilla_to_synthesizer(name: str,
                           checkpoint: Optional[str] = None,
                           allow_fresh: Sequence[str] = ()) -> str:
  """mapping_fn for utils.init_checkpoint_variable_mapping.

  The first call for a graph and checkpoint resolves all the graph's global
  variables (see the module docstring), logs each and a summary line, sets
  the graph's initialisation op (`add_init_op`), and raises if any variable
  would silently keep its initializer.

  Args:
    name: a graph variable name.
    checkpoint: the checkpoint mesh restores from; default: the value bound
      to `utils.run.init_checkpoint` (the stock CLI).
      `mtf_synthesizer.MtfModel` binds it to its `init_checkpoint`; bind it
      yourself when calling `t5.models.MtfModel.train(init_checkpoint=...)`
      or `finetune`, whose checkpoint mesh receives as a Python argument
      that a mapping_fn cannot see.
    allow_fresh: regular expressions (re.search in the graph names) of
      variables that may start from their initializers when the checkpoint
      has them in neither their mapped nor their own form, e.g. ['_slot_']
      for a checkpoint that holds some optimizer slots but not all (a
      checkpoint with none starts them fresh without it).

  Returns:
    The variable's name in the checkpoint (its mapped name when it is in
    neither form: mesh then leaves it at its initializer).

  Raises:
    ValueError: no checkpoint is known, or some variables are missing from
      it (all are listed, with the binding that allows them), or their
      shapes differ from the checkpoint's.
  """
  if checkpoint is None:
    checkpoint = _gin_value("utils.run.init_checkpoint")
  if not checkpoint:
    raise ValueError(
        "%sno checkpoint to map %s from: bind %s.checkpoint to the "
        "checkpoint mesh restores (utils.run.init_checkpoint binds it for "
        "the stock CLI, mtf_synthesizer.MtfModel for its init_checkpoint)."
        % (LOG_PREFIX, name, MAPPING))
  variable_filter = _gin_value(INIT_VARIABLE_FILTER) or ""
  if isinstance(allow_fresh, str):
    allow_fresh = [allow_fresh]
  return _MAPPER(name, checkpoint, variable_filter, tuple(allow_fresh))
