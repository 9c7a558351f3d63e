# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The one way `t5_tasks` registers its seqio tasks and mixtures.

Every task and mixture goes through `register` (directly or through
`add_task`, `derive_from_t5` and `add_mixture`, which build the task or
mixture and hand it on), which checks the name and puts it in seqio's
registry.

Naming rule (checked by `check_name`, for tasks and mixtures alike): a name
is lowercase snake_case (`[a-z][a-z0-9_]*`) and

* a task over a public dataset, i.e. one whose vocabulary falls back on T5's
  SentencePiece model, and a mixture of such tasks, is named
  `synth_<data>` (`PREFIX`), so that it never takes the name of t5's task
  over the same data;
* an offline task, i.e. one whose vocabulary falls back on bytes
  (`vocabulary.OFFLINE_VOCABULARY`: data generated here or shipped with
  Python, no download), is named after its data (`listops`, `key_presence`,
  `pydocs_lm`).

Re-registration replaces: registering a name that `t5_tasks` registered
before (a module reloaded or imported again, a test) replaces the earlier
task or mixture, so the newest definition wins. A name that something else
registered (one of t5's tasks: its vocabulary is not a
`vocabulary.LazyVocabulary`) is never replaced: that raises `ValueError`.
"""

import re
from typing import Any, Callable, Mapping, Optional, Sequence, Set, TypeVar

import seqio
import t5.data.tasks  # pylint: disable=unused-import  (registers t5's tasks)

from t5_tasks import vocabulary

PREFIX = "synth_"
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")

Provider = TypeVar("Provider", seqio.Task, seqio.Mixture)


def tokenize_and_eos() -> list:
  """The preprocessors that end every text task here.

  Returns:
    A new list: tokenize, the cache point, EOS appended after truncation (so
    it is still there when a text is cut).
  """
  return [seqio.preprocessors.tokenize, seqio.CacheDatasetPlaceholder(),
          seqio.preprocessors.append_eos_after_trim]


def _fallbacks(provider: seqio.DatasetProviderBase) -> Set[Optional[str]]:
  """The fallback names of a provider's vocabularies (None: not lazy)."""
  return {feature.vocabulary.default
          if isinstance(feature.vocabulary, vocabulary.LazyVocabulary)
          else None
          for feature in provider.output_features.values()}


def check_name(provider: seqio.DatasetProviderBase) -> None:
  """Checks a task's or mixture's name against the naming rule.

  See the module docstring for the rule.

  Args:
    provider: a `seqio.Task` or `seqio.Mixture`, not yet registered.

  Raises:
    ValueError: the name breaks the rule, the provider does not take its
      vocabulary from `t5_tasks.vocabulary`, or the name belongs to a task
      or mixture registered by something else (e.g. t5).
  """
  name = provider.name
  fallbacks = _fallbacks(provider)
  if None in fallbacks:
    raise ValueError(f"{name!r}: every feature must use a "
                     "t5_tasks.vocabulary.LazyVocabulary.")
  if not NAME_PATTERN.fullmatch(name):
    raise ValueError(f"{name!r} is not lowercase snake_case.")
  if (fallbacks != {vocabulary.OFFLINE_NAME} and
      not name.startswith(PREFIX)):
    raise ValueError(
        f"{name!r} is over a public dataset (its vocabulary falls back on "
        f"{sorted(fallbacks)}, not {vocabulary.OFFLINE_NAME!r}), so its name "
        f"must start with {PREFIX!r}.")
  for registry in (seqio.TaskRegistry, seqio.MixtureRegistry):
    if (name in registry.names() and
        None in _fallbacks(registry.get(name))):
      raise ValueError(f"{name!r} is registered by another package; "
                       "t5_tasks does not replace it.")


def register(provider: Provider) -> Provider:
  """Registers a task or mixture, replacing an earlier one of `t5_tasks`.

  Args:
    provider: a `seqio.Task` or `seqio.Mixture` named by the naming rule.

  Returns:
    `provider`, now in `seqio.TaskRegistry` or `seqio.MixtureRegistry`.

  Raises:
    ValueError: see `check_name`.
  """
  check_name(provider)
  registry = (seqio.MixtureRegistry if isinstance(provider, seqio.Mixture)
              else seqio.TaskRegistry)
  registry.remove(provider.name)
  registry.add_provider(provider.name, provider)
  return provider


def add_task(name: str,
             source: seqio.DataSource,
             preprocessors: Sequence[Callable[..., Any]],
             metric_fns: Sequence[Callable[..., Any]] = (),
             postprocess_fn: Optional[Callable[..., Any]] = None,
             output_features: Optional[Mapping[str, seqio.Feature]] = None
             ) -> seqio.Task:
  """Registers a new task (see `register`).

  Args:
    name: task name, by the naming rule (module docstring).
    source: where the examples come from.
    preprocessors: seqio preprocessors.
    metric_fns: seqio metric functions.
    postprocess_fn: maps decoded predictions/targets before the metrics.
    output_features: defaults to `vocabulary.output_features()`
      (`inputs` and `targets`, both with EOS, T5's fallback vocabulary).

  Returns:
    The registered task.
  """
  return register(seqio.Task(
      name,
      source=source,
      preprocessors=list(preprocessors),
      output_features=(output_features if output_features is not None
                       else vocabulary.output_features()),
      metric_fns=list(metric_fns),
      postprocess_fn=postprocess_fn))


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
    name: new task name, `synth_<data>` (module docstring).
    t5_task_name: a task registered by `t5.data.tasks`.
    source: replaces t5's source (e.g. another TFDS version) when given.
    metric_fns: replaces t5's metric functions when given.

  Returns:
    The registered task.
  """
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
  return register(t5_task.replace(**kwargs))


def add_mixture(name: str, tasks: Sequence[Any],
                default_rate: Any = None) -> seqio.Mixture:
  """Registers a mixture of registered tasks (see `register`).

  Args:
    name: mixture name, by the naming rule (module docstring).
    tasks: task names or (name, rate) pairs, as `seqio.MixtureRegistry.add`.
    default_rate: rate of the tasks given without one.

  Returns:
    The registered mixture.
  """
  return register(seqio.Mixture(name, tasks, default_rate=default_rate))
