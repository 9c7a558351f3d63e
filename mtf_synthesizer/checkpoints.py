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
    finetuning after Synthesizer pretraining on C4) restores everything.
  * Synthesizer-only variables (random/R, dense/w1, mixture/alpha_logits, ...
    and their slots) that are in neither form start fresh by design.
  * Any other variable in neither form is an error that lists all of them,
    unless it matches a regular expression of
    `mtf_synthesizer.vanilla_to_synthesizer.allow_fresh` (searched in the
    graph name), e.g. `['_slot_']` for a checkpoint without optimizer slots.
    So is a shape that differs from the checkpoint's.
  * The checkpoint is the one mesh is restoring, whether it came from gin
    (`utils.run.init_checkpoint`) or from Python
    (`t5.models.MtfModel.train(init_checkpoint=...)`, `MtfModel.finetune`).
  * Every variable is logged once per graph and checkpoint as restored (with
    its source) or fresh (with the reason), then one summary line (a warning
    when some start fresh):
      init_from_t5: 40 restored from /path/model.ckpt-N, 6 fresh: a, b, ...
"""

import inspect
import os
import re
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple
import weakref

from absl import logging
import gin
from mesh_tensorflow.transformer import utils as mtf_utils
import tensorflow.compat.v1 as tf

from mtf_synthesizer import release

ALLOW_FRESH = "mtf_synthesizer.vanilla_to_synthesizer.allow_fresh"
LOG_PREFIX = "init_from_t5: "

_SCOPE = "/%s/" % release.SCOPE
_VANILLA_SCOPE = "/SelfAttention/"
_SHARED = re.compile(r"^(q|k|v|o|relative_attention_bias)(_slot_\w+)?$")
_VALUE = re.compile(r"^kv(_slot_\w+)?$")
_SLOT = "_slot_"
# The module whose model_fn holds the checkpoint being restored.
_MESH_UTILS = os.path.join("mesh_tensorflow", "transformer", "utils.py")


def checkpoint_name(graph_name: str) -> str:
  """Returns the vanilla checkpoint's name for a graph variable name.

  Args:
    graph_name: a variable name in the Synthesizer model's graph.

  Returns:
    The name to read it from (unchanged outside SynthesizerAttention).
  """
  if _SCOPE not in graph_name:
    return graph_name
  prefix, local = graph_name.split(_SCOPE, 1)
  if _SHARED.match(local):
    return prefix + _VANILLA_SCOPE + local
  match = _VALUE.match(local)
  if match:
    return prefix + _VANILLA_SCOPE + "v" + (match.group(1) or "")
  return graph_name  # synthesizer-only: not in a vanilla checkpoint


def is_synthesizer_only(graph_name: str) -> bool:
  """Whether a graph variable has no counterpart in a vanilla T5 checkpoint.

  Args:
    graph_name: a variable name in the Synthesizer model's graph.

  Returns:
    True for SynthesizerAttention's own weights (random/R, dense/w1,
    mixture/alpha_logits, ...) and their optimizer slots.
  """
  return _SCOPE in graph_name and checkpoint_name(graph_name) == graph_name


class Resolution(NamedTuple):
  """Where each graph variable comes from.

  Attributes:
    sources: graph name -> the name to give mesh (a checkpoint name when
      restored; a name mesh will not restore otherwise).
    restored: graph name -> checkpoint name, for the restored variables.
    fresh: graph name -> why it keeps its initializer.
  """
  sources: Dict[str, str]
  restored: Dict[str, str]
  fresh: Dict[str, str]


def _suggest_allow_fresh(names: Sequence[str]) -> str:
  """A gin binding that would let `names` start fresh."""
  if all(_SLOT in name for name in names):
    patterns = ["'%s'" % _SLOT]
  else:
    patterns = ["'^%s$'" % re.escape(name) for name in names[:3]]
    if len(names) > 3:
      patterns.append("...")
  return "%s = [%s]" % (ALLOW_FRESH, ", ".join(patterns))


def resolve(graph_shapes: Dict[str, Optional[List[int]]],
            checkpoint_shapes: Dict[str, List[int]],
            checkpoint: str = "",
            allow_fresh: Iterable[str] = (),
            restorable: Optional[Iterable[str]] = None,
            not_asked: Iterable[str] = ()) -> Resolution:
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

  Returns:
    A Resolution covering every name of graph_shapes.

  Raises:
    ValueError: listing every variable that is in neither its mapped nor its
      own form in the checkpoint (and not allowed to be fresh), and every
      shape that differs from the checkpoint's.
  """
  allow = [re.compile(p) for p in allow_fresh]
  restorable = (set(checkpoint_shapes) if restorable is None
                else set(restorable))
  not_asked = set(not_asked)
  sources, restored, fresh = {}, {}, {}
  missing, mismatched = [], []
  for name in sorted(graph_shapes):
    mapped = checkpoint_name(name)
    candidates = list(dict.fromkeys([mapped, name]))
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
    else:
      pattern = next((p for p in allow if p.search(name)), None)
      if pattern is not None:
        fresh[name] = "not in %s; allowed by %s %r" % (
            checkpoint, ALLOW_FRESH, pattern.pattern)
      elif is_synthesizer_only(name):
        fresh[name] = "synthesizer-only, not in %s" % checkpoint
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
            _suggest_allow_fresh([n for n, _ in missing]), _SLOT))
  if mismatched:
    errors.append("\n".join(mismatched) + "\nCheck that the model gin "
                  "(d_model, num_heads, d_kv, ...) matches the checkpoint's.")
  if errors:
    raise ValueError("\n".join(errors))
  return Resolution(sources, restored, fresh)


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


def _mesh_restore_args() -> Optional[Tuple[str, str]]:
  """The checkpoint mesh is restoring, read from mesh's model_fn frame.

  mesh passes the checkpoint to `tpu_estimator_model_fn` as a Python
  argument (from `utils.run.init_checkpoint` or from
  `MtfModel.train(init_checkpoint=...)`), not through gin, and calls the
  mapping from inside the model_fn: its frame holds the path and the
  `init_variable_filter` in force.

  Returns:
    (init_checkpoint, init_variable_filter), or None outside such a call.
  """
  frame = inspect.currentframe()
  try:
    while frame is not None:
      if frame.f_code.co_filename.endswith(_MESH_UTILS):
        local = frame.f_locals
        path = local.get("init_checkpoint")
        if isinstance(path, str) and path:
          variable_filter = local.get("init_variable_filter")
          return path, (variable_filter
                        if isinstance(variable_filter, str) else "")
      frame = frame.f_back
  finally:
    del frame
  return None


def _gin_init_checkpoint() -> Optional[str]:
  try:
    return gin.query_parameter("utils.run.init_checkpoint")
  except ValueError:  # not bound
    return None


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
      self._sources = self._resolve(
          checkpoint, variable_filter, allow_fresh,
          {v.op.name: v.shape.as_list() for v in tf.global_variables()},
          log_summary=True)
      self._graph, self._key = weakref.ref(graph), key
    if graph_name not in self._sources:  # not a global variable of graph
      self._sources.update(self._resolve(
          checkpoint, variable_filter, allow_fresh, {graph_name: None},
          log_summary=False))
    return self._sources[graph_name]

  def _resolve(self, checkpoint, variable_filter, allow_fresh, graph_shapes,
               log_summary):
    checkpoint_shapes = tf.train.load_checkpoint(
        checkpoint).get_variable_to_shape_map()
    restorable = None
    if variable_filter:
      pattern = re.compile(variable_filter)
      restorable = [n for n in checkpoint_shapes if pattern.search(n)]
    not_asked = [n for n in graph_shapes
                 if not mtf_utils.should_load_variable(n)]
    resolution = resolve(graph_shapes, checkpoint_shapes, checkpoint,
                         allow_fresh, restorable, not_asked)
    for name in sorted(graph_shapes):
      if name in resolution.restored:
        logging.info("%s%s <- %s", LOG_PREFIX, name, resolution.restored[name])
      else:
        logging.info("%s%s is fresh (%s)", LOG_PREFIX, name,
                     resolution.fresh[name])
    if log_summary:  # a warning when anything starts fresh
      logging.log(logging.WARNING if resolution.fresh else logging.INFO,
                  "%s", summary(resolution, checkpoint))
    return resolution.sources


_MAPPER = _Mapper()


@gin.configurable(module="mtf_synthesizer")
def vanilla_to_synthesizer(name: str,
                           checkpoint: Optional[str] = None,
                           allow_fresh: Sequence[str] = ()) -> str:
  """mapping_fn for utils.init_checkpoint_variable_mapping.

  The first call for a graph and checkpoint resolves all the graph's global
  variables (see the module docstring), logs each and a summary line, and
  raises if any would silently keep its initializer.

  Args:
    name: a graph variable name.
    checkpoint: the checkpoint to read; default: the one mesh is restoring
      (found in mesh's model_fn, so it may come from gin or from Python),
      else the value bound to `utils.run.init_checkpoint`.
    allow_fresh: regular expressions (re.search in the graph names) of
      variables that may start from their initializers when the checkpoint
      has them in neither their mapped nor their own form, e.g. ['_slot_']
      for a checkpoint saved without optimizer slots.

  Returns:
    The variable's name in the checkpoint (its mapped name when it is in
    neither form: mesh then leaves it at its initializer).

  Raises:
    ValueError: no checkpoint is known, or some variables are missing from
      it (all are listed, with the binding that allows them), or their
      shapes differ from the checkpoint's.
  """
  variable_filter = ""
  if checkpoint is None:
    found = _mesh_restore_args()
    if found is not None:
      checkpoint, variable_filter = found
    else:
      checkpoint = _gin_init_checkpoint()
  if not checkpoint:
    raise ValueError(
        "%sno checkpoint to map %s from: mesh's model_fn has no "
        "init_checkpoint and utils.run.init_checkpoint is unset. Bind "
        "mtf_synthesizer.vanilla_to_synthesizer.checkpoint." % (LOG_PREFIX,
                                                                name))
  if isinstance(allow_fresh, str):
    allow_fresh = [allow_fresh]
  return _MAPPER(name, checkpoint, variable_filter, tuple(allow_fresh))
