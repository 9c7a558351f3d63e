# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Whether the tests' stock-CLI runs write the graph beside checkpoints.

TF's estimator writes the whole training graph into the model directory:
`graph.pbtxt` and a copy in the TensorBoard events when the session starts,
and `model.ckpt-N.meta` with every checkpoint. Nothing in T5 or mesh reads
them back (training, evaluation, decoding and export rebuild the graph from
gin), but writing them takes time that grows with the graph: on the tiny
CPU model of the tests, 17 of the 41 seconds of a two-step run. With the
environment variable `MTF_SYNTH_GRAPH_FILES=0`, the test suite's stock-CLI
runs (through `sitecustomize.py` here) make the estimator skip them (mesh's `CheckpointSaverHook(save_graph_def=False)`,
and `RunConfig(checkpoint_save_graph_def=False)` for the estimator's own):
checkpoints then hold the variables and the state file only, and
TensorBoard has no graph tab. Unset or 1: TF's default, the files are
written. A user's runs keep TF's default: the switch is the suite's, not
the package's.
"""

import tensorflow.compat.v1 as tf
from tensorflow_estimator.python.estimator.tpu import tpu_config

import switches

ENV_VAR = "MTF_SYNTH_GRAPH_FILES"
# (class, keyword argument): the default to change.
_DEFAULTS = ((tf.train.CheckpointSaverHook, "save_graph_def"),
             (tpu_config.RunConfig, "checkpoint_save_graph_def"))
_ORIGINAL_INITS = {cls: cls.__init__ for cls, _ in _DEFAULTS}


def _without_graph_files(cls, keyword):
  original = _ORIGINAL_INITS[cls]

  def init(self, *args, **kwargs):
    kwargs.setdefault(keyword, False)
    original(self, *args, **kwargs)
  return init


def install_from_env() -> bool:
  """Applies `MTF_SYNTH_GRAPH_FILES`; returns whether the graph is written.

  Returns:
    False when the variable is 0, else True.

  Raises:
    ValueError: when the variable is set to anything but 0 or 1.
  """
  written = switches.switch_from_env(ENV_VAR)
  for cls, keyword in _DEFAULTS:
    cls.__init__ = (_ORIGINAL_INITS[cls] if written
                    else _without_graph_files(cls, keyword))
  return written
