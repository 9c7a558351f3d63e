# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The trainer's input: seqio's tasks and mixtures, as numpy batches.

The tasks are those the mesh side trains on (`t5_tasks` registers the
paper's and t5's own), read by seqio (tf.data) in the JAX environment and
converted by seqio's feature converters without packing (the Flax model
reads whole sequences): `EncDecFeatureConverter` for an encoder-decoder
(`inputs` and `targets`), `LMFeatureConverter` for a decoder-only model
(`targets`). Each host reads its shard of the global batch
(`seqio.ShardInfo`: the process index of the process count).

Imports TensorFlow and seqio when called, not when imported; TensorFlow
(the CPU build the lock installs) is kept off any accelerator
(`tensorflow_on_cpu`): the TPU or GPU is JAX's.
"""

import importlib
import os
from typing import Dict, Iterator, Mapping, Optional, Sequence

import numpy as np

DEFAULT_MODULES = ("t5_tasks",)


class TaskError(ValueError):
  """A task or mixture that is not registered, or a split it lacks."""


def tensorflow_on_cpu():
  """TensorFlow, its accelerators hidden (tf.data runs on the host).

  Returns:
    The tensorflow module.
  """
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for kind in ("GPU", "TPU"):
    try:
      tf.config.set_visible_devices([], kind)
    except (RuntimeError, ValueError):  # none of that kind, or too late
      pass
  return tf


def import_modules(modules: Sequence[str] = DEFAULT_MODULES) -> None:
  """Imports the modules that register tasks (`--module_import`'s).

  Args:
    modules: module names.
  """
  import gin  # pylint: disable=g-import-not-at-top
  tensorflow_on_cpu()
  with gin.unlock_config():  # they may add configurables
    for name in modules:
      importlib.import_module(name)


def get_task(name: str):
  """The registered seqio task or mixture called `name`.

  Args:
    name: its name.

  Returns:
    The seqio Task or Mixture.

  Raises:
    TaskError: none is registered under that name.
  """
  import seqio  # pylint: disable=g-import-not-at-top
  try:
    return seqio.get_mixture_or_task(name)
  except ValueError as e:
    raise TaskError("unknown task or mixture %r (registered by the "
                    "module imports: %s)" % (name, e)) from e


def converter(decoder_only: bool):
  """seqio's feature converter of the model, without packing."""
  import seqio  # pylint: disable=g-import-not-at-top
  if decoder_only:
    return seqio.LMFeatureConverter(pack=False)
  return seqio.EncDecFeatureConverter(pack=False)


def batches(task_name: str, split: str,
            task_feature_lengths: Mapping[str, int], batch_size: int,
            decoder_only: bool = False, shuffle: bool = True,
            seed: Optional[int] = None, repeat: bool = True,
            skip_batches: int = 0, shard_index: int = 0,
            num_shards: int = 1, use_cached: bool = False
            ) -> Iterator[Dict[str, np.ndarray]]:
  """This host's part of each global batch, as int32 arrays.

  Args:
    task_name: a task or mixture.
    split: its split ("train", "validation").
    task_feature_lengths: {"inputs": L, "targets": L} (a decoder-only
      model: {"targets": L}).
    batch_size: the global batch (every host's sequences).
    decoder_only: convert for a decoder-only model.
    shuffle: shuffle the examples (the task's own shuffle buffer).
    seed: the shuffle's seed (None: not deterministic).
    repeat: cycle through the split forever (training); else once, the
      last batch padded with empty rows (evaluation).
    skip_batches: global batches skipped at the start (a resumed run's
      steps).
    shard_index: this host's index.
    num_shards: the hosts.
    use_cached: read the task's cache (`seqio_cache_tasks`).

  Yields:
    feature -> [batch_size / num_shards, length] int32.

  Raises:
    TaskError: an unknown task, or a split it lacks.
  """
  import seqio  # pylint: disable=g-import-not-at-top
  task = get_task(task_name)
  if split not in task.splits:
    raise TaskError("%s has no split %r (it has %s)" % (
        task_name, split, ", ".join(sorted(task.splits))))
  if batch_size % num_shards:
    raise TaskError("a batch of %d does not divide over %d hosts" %
                    (batch_size, num_shards))
  local = batch_size // num_shards
  lengths = dict(task_feature_lengths)
  ds = task.get_dataset(
      lengths, split=split, use_cached=use_cached, shuffle=shuffle,
      seed=seed, num_epochs=None if repeat else 1,
      shard_info=(seqio.ShardInfo(shard_index, num_shards)
                  if num_shards > 1 else None))
  ds = converter(decoder_only)(ds, lengths)
  ds = ds.batch(local, drop_remainder=repeat)
  if skip_batches:
    ds = ds.skip(skip_batches)
  for batch in ds.as_numpy_iterator():
    out = {k: np.asarray(v, np.int32) for k, v in batch.items()}
    rows = next(iter(out.values())).shape[0]
    if rows < local:
      out = {k: np.pad(v, ((0, local - rows), (0, 0)))
             for k, v in out.items()}
    yield out
