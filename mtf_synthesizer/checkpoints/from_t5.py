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
their initializers. `synthesizer/init_from_t5.gin` binds two functions of
this module there, so that nothing is re-initialised silently:
`vanilla_to_synthesizer`, the name mapping (a pure function of the name and
the checkpoint's list of variables), and `restore_with_casts`, bound to
mesh's `utils.should_load_variable.filter_fn`, which mesh asks first: the
step that checks the whole graph against the checkpoint, logs it, and
restores with casts.

  * The mapping tries the mapped name first:
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
  * Any other variable in neither form is an error of the restore step
    that lists all of them, unless it matches a regular expression of
    `mtf_synthesizer.restore_with_casts.allow_fresh` (searched in the graph
    name), e.g. `['_slot_']` for a checkpoint that holds some optimizer
    slots but not all. So is a shape that differs from the checkpoint's.
  * The checkpoint is `mtf_synthesizer.vanilla_to_synthesizer.checkpoint`,
    else `utils.run.init_checkpoint` (the stock CLI). `MtfModel.estimator`
    of this package binds the former to its `init_checkpoint`; a caller of
    `t5.models.MtfModel.train(init_checkpoint=...)` binds it too (mesh takes
    that checkpoint as a Python argument, which a mapping cannot see). mesh's
    `init_variable_filter` is read from its gin binding, the only way mesh
    takes it.
  * Restoring is the graph's `tf.GraphKeys.INIT_OP` (`add_init_op`, set by
    the restore step): the op the Estimator's Scaffold runs to start a run
    from scratch, in place of every variable's initializer. It restores
    every mapped variable, with a cast where the checkpoint stores another
    floating-point dtype than the graph's (bfloat16 and float32: mesh's
    master variables are bfloat16 unless
    `utils.get_variable_dtype.master_dtype` says otherwise, and checkpoints
    are written in either; TF's `init_from_checkpoint`, which mesh calls
    with the mapped names, reads a variable in its own dtype only and stops
    with `expected dtype float does not equal original dtype bfloat16`).
    Each restore is TF's own RestoreV2 op, as `init_from_checkpoint`
    builds it; the initializers that mesh's `init_from_checkpoint` call
    sets from the mapping are left in the graph unused: the Scaffold runs
    this op instead. mesh offers no later point (its model_fn asks the
    filter and the mapping, then builds the restore, then returns), and
    TF's restore cannot be told to cast.
  * Every variable is logged once per graph and checkpoint as restored (with
    its source and any cast) or fresh (with the reason) while the graph is
    built, with a line that says what is about to be restored:
      init_from_t5: restoring 40 from /path/model.ckpt-N, 6 fresh: ...
    and, once the session has run the restore (so, not when a run resumes
    from its own model directory), the summary line on standard error (on
    TPU, the host's):
      init_from_t5: 40 restored from /path/model.ckpt-N, 6 fresh: a, b, ...
"""

import functools
import re
import sys
from typing import (Callable, Dict, Iterable, List, NamedTuple, Optional,
                    Sequence, Tuple)
import weakref

from absl import logging
import gin
import tensorflow.compat.v1 as tf

from mtf_synthesizer.checkpoints import names
from mtf_synthesizer.checkpoints import release

MAPPING = "mtf_synthesizer.vanilla_to_synthesizer"
RESTORE = "mtf_synthesizer.restore_with_casts"
ALLOW_FRESH = RESTORE + ".allow_fresh"
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


def candidate_names(graph_name: str) -> List[str]:
  """The checkpoint names a graph variable is restored from, first found.

  Args:
    graph_name: a variable name in the Synthesizer model's graph.

  Returns:
    Its mapped name (`checkpoint_name`), its own name, then the other
    namings of a norm scale, without repeats.
  """
  mapped = checkpoint_name(graph_name)
  return list(dict.fromkeys(
      [mapped, graph_name] + names.norm_aliases(mapped)
      + names.norm_aliases(graph_name)))


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
    candidates = candidate_names(name)
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


def _checkpoint_or_error(checkpoint: Optional[str], asking: str) -> str:
  """`checkpoint`, else the one gin binds; raises when there is none."""
  if checkpoint is None:
    checkpoint = _gin_value(MAPPING + ".checkpoint")
  if checkpoint is None:
    checkpoint = _gin_value("utils.run.init_checkpoint")
  if not checkpoint:
    raise ValueError(
        "%sno checkpoint to %s: bind %s.checkpoint to the checkpoint mesh "
        "restores (utils.run.init_checkpoint binds it for the stock CLI, "
        "mtf_synthesizer.MtfModel for its init_checkpoint)." % (
            LOG_PREFIX, asking, MAPPING))
  return checkpoint


@functools.lru_cache(maxsize=16)
def _index(prefix: str, stamp: Tuple[int, int]
           ) -> Tuple[Dict[str, List[int]], Dict[str, tf.DType]]:
  """A checkpoint's variable shapes and dtypes (cached per file version)."""
  del stamp  # part of the cache key only
  reader = tf.train.load_checkpoint(prefix)
  return reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()


def checkpoint_index(checkpoint: str
                     ) -> Tuple[Dict[str, List[int]], Dict[str, tf.DType]]:
  """The variables a checkpoint holds: name -> shape, name -> dtype.

  Read once per checkpoint file (again when its index file changes).

  Args:
    checkpoint: a checkpoint prefix, or a directory (its latest checkpoint).

  Returns:
    (shapes, dtypes), by checkpoint name.
  """
  prefix = _checkpoint_file(checkpoint)
  index = prefix + ".index"
  stamp = (0, 0)
  if tf.io.gfile.exists(index):
    stat = tf.io.gfile.stat(index)
    stamp = (stat.mtime_nsec, stat.length)
  return _index(prefix, stamp)


class _Restorer:
  """Resolves a graph's variables once per checkpoint and sets the restore."""

  def __init__(self):
    self._graph = None  # weak reference
    self._key = None

  def __call__(self, checkpoint: str, variable_filter: str,
               allow_fresh: Tuple[str, ...], filter_fn) -> None:
    graph = tf.get_default_graph()
    key = (checkpoint, variable_filter, allow_fresh, filter_fn)
    if self._graph is not None and self._graph() is graph and (
        key == self._key):
      return
    self._graph, self._key = None, None
    variables = tf.global_variables()
    graph_shapes = {v.op.name: v.shape.as_list() for v in variables}
    checkpoint_shapes, stored = checkpoint_index(checkpoint)
    restorable = None
    if variable_filter:
      pattern = re.compile(variable_filter)
      restorable = [n for n in checkpoint_shapes if pattern.search(n)]
    not_asked = [n for n in graph_shapes
                 if filter_fn is not None and not filter_fn(n)]
    resolution = resolve(graph_shapes, checkpoint_shapes, checkpoint,
                         allow_fresh, restorable, not_asked,
                         {v.op.name: v.dtype.base_dtype for v in variables},
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
    logging.log(logging.WARNING if resolution.fresh else logging.INFO,
                "%s", plan(resolution, checkpoint))
    add_init_op(resolution, checkpoint, stored,
                summary(resolution, checkpoint))
    self._graph, self._key = weakref.ref(graph), key


_RESTORER = _Restorer()


@gin.configurable(module="mtf_synthesizer")
def vanilla_to_synthesizer(name: str, checkpoint: Optional[str] = None) -> str:
  """mapping_fn for utils.init_checkpoint_variable_mapping: a name mapping.

  A pure function of the name and the checkpoint's list of variables (read
  once per checkpoint file): it neither reads nor changes the graph, so it
  answers the same whenever, however often and in whatever order it is
  asked. Deciding what is restored or fresh, logging it, and restoring with
  casts is the step `restore_with_casts`, which init_from_t5.gin binds
  beside it.

  Args:
    name: a graph variable name.
    checkpoint: the checkpoint mesh restores from; default: the value bound
      to `utils.run.init_checkpoint` (the stock CLI).
      `mtf_synthesizer.MtfModel` binds it to its `init_checkpoint`; bind it
      yourself when calling `t5.models.MtfModel.train(init_checkpoint=...)`
      or `finetune`, whose checkpoint mesh receives as a Python argument
      that a mapping_fn cannot see.

  Returns:
    The first of `candidate_names(name)` that the checkpoint holds, else
    the mapped name (mesh then leaves the variable alone).

  Raises:
    ValueError: no checkpoint is known.
  """
  checkpoint = _checkpoint_or_error(checkpoint, "map %s from" % name)
  held, _ = checkpoint_index(checkpoint)
  candidates = candidate_names(name)
  return next((c for c in candidates if c in held), candidates[0])


@gin.configurable(module="mtf_synthesizer")
def restore_with_casts(name: str,
                       checkpoint: Optional[str] = None,
                       allow_fresh: Sequence[str] = (),
                       filter_fn: Optional[Callable[[str], bool]] = None
                       ) -> bool:
  """filter_fn for utils.should_load_variable: the restore step.

  mesh asks `utils.should_load_variable` about every global variable before
  it asks the mapping, when it starts from a checkpoint. The first question
  for a graph and checkpoint resolves all the graph's global variables (see
  the module docstring): it raises if any would silently keep its
  initializer, logs each and the plan line, and sets the graph's
  initialisation op (`add_init_op`), which restores every mapped variable
  with TF's RestoreV2 op, cast where the checkpoint stores another
  floating-point dtype. Later questions only answer.

  Args:
    name: a graph variable name.
    checkpoint: the checkpoint; default: the one bound to
      `mtf_synthesizer.vanilla_to_synthesizer.checkpoint`, else
      `utils.run.init_checkpoint`.
    allow_fresh: regular expressions (re.search in the graph names) of
      variables that may start from their initializers when the checkpoint
      has them in neither their mapped nor their own form, e.g. ['_slot_']
      for a checkpoint that holds some optimizer slots but not all (a
      checkpoint with none starts them fresh without it).
    filter_fn: a filter of your own (what `utils.should_load_variable`'s
      filter_fn would be without this step): the variables it refuses start
      fresh.

  Returns:
    Whether mesh should restore the variable: `filter_fn(name)`, True
    without one.

  Raises:
    ValueError: no checkpoint is known, or some variables are missing from
      it (all are listed, with the binding that allows them), or their
      shapes differ from the checkpoint's.
  """
  checkpoint = _checkpoint_or_error(checkpoint, "restore %s from" % name)
  if isinstance(allow_fresh, str):
    allow_fresh = [allow_fresh]
  variable_filter = _gin_value(INIT_VARIABLE_FILTER) or ""
  _RESTORER(checkpoint, variable_filter, tuple(allow_fresh), filter_fn)
  return filter_fn(name) if filter_fn is not None else True
