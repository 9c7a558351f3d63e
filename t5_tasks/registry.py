# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Helpers that register `synth_*` tasks, most of them derived from t5's."""

from typing import Any, Callable, Mapping, Optional, Sequence

import seqio
import t5.data.tasks  # pylint: disable=unused-import  (registers t5's tasks)

from t5_tasks import vocabulary

PREFIX = "synth_"


def tokenize_and_eos() -> list:
  """The preprocessors that end every text task here.

  Returns:
    A new list: tokenize, the cache point, EOS appended after truncation (so
    it is still there when a text is cut).
  """
  return [seqio.preprocessors.tokenize, seqio.CacheDatasetPlaceholder(),
          seqio.preprocessors.append_eos_after_trim]


def _check_name(name: str) -> None:
  if not name.startswith(PREFIX) and name not in ("listops",):
    raise ValueError(f"Task/mixture name {name!r} must start with {PREFIX!r}")


def add_task(name: str,
             source: seqio.DataSource,
             preprocessors: Sequence[Callable[..., Any]],
             metric_fns: Sequence[Callable[..., Any]] = (),
             postprocess_fn: Optional[Callable[..., Any]] = None,
             output_features: Optional[Mapping[str, seqio.Feature]] = None
             ) -> seqio.Task:
  """Registers a task that uses the lazy `t5_tasks` vocabulary.

  A task of the same name registered earlier (e.g. by a module reload) is
  replaced.

  Args:
    name: task name, starting with `synth_`.
    source: where the examples come from.
    preprocessors: seqio preprocessors.
    metric_fns: seqio metric functions.
    postprocess_fn: maps decoded predictions/targets before the metrics.
    output_features: defaults to `vocabulary.output_features()`
      (`inputs` and `targets`, both with EOS).

  Returns:
    The registered task.
  """
  _check_name(name)
  seqio.TaskRegistry.remove(name)
  return seqio.TaskRegistry.add(
      name,
      source=source,
      preprocessors=list(preprocessors),
      output_features=(output_features if output_features is not None
                       else vocabulary.output_features()),
      metric_fns=list(metric_fns),
      postprocess_fn=postprocess_fn)


def derive_from_t5(name: str,
                   t5_task_name: str,
                   source: Optional[seqio.DataSource] = None,
                   metric_fns: Optional[Sequence[Callable[..., Any]]] = None
                   ) -> seqio.Task:
  """Registers a copy of one of t5's tasks that uses our vocabulary.

  The copy keeps t5's preprocessors, postprocessor and metrics (unless
  replaced here); only the output features' vocabulary (and optionally the
  data source) change.

  Args:
    name: new task name, starting with `synth_`.
    t5_task_name: a task registered by `t5.data.tasks`.
    source: replaces t5's source (e.g. another TFDS version) when given.
    metric_fns: replaces t5's metric functions when given.

  Returns:
    The registered task.
  """
  _check_name(name)
  t5_task = seqio.TaskRegistry.get(t5_task_name)
  features = {
      key: seqio.Feature(vocabulary=vocabulary.VOCABULARY,
                         add_eos=feature.add_eos,
                         required=feature.required,
                         dtype=feature.dtype,
                         rank=feature.rank)
      for key, feature in t5_task.output_features.items()
  }
  kwargs = {"name": name, "output_features": features}
  if source is not None:
    kwargs["source"] = source
  if metric_fns is not None:
    kwargs["metric_fns"] = list(metric_fns)
  task = t5_task.replace(**kwargs)
  seqio.TaskRegistry.remove(name)
  seqio.TaskRegistry.add_provider(name, task)
  return task


def add_mixture(name: str, tasks: Sequence[Any],
                default_rate: Any = None) -> seqio.Mixture:
  """Registers a mixture (replacing one of the same name).

  Args:
    name: mixture name, starting with `synth_`.
    tasks: task names or (name, rate) pairs, as `seqio.MixtureRegistry.add`.
    default_rate: rate of the tasks given without one.

  Returns:
    The registered mixture.
  """
  _check_name(name)
  seqio.MixtureRegistry.remove(name)
  return seqio.MixtureRegistry.add(name, tasks, default_rate=default_rate)
