# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What the stock CLI's `MTF_SYNTH_*` settings share (`entry.py`).

  * `switch_from_env` reads a 0/1 switch (`MTF_SYNTH_GRAPH_FILES`,
    `MTF_SYNTH_GRAPH_OPTIMIZER`).
  * `set_session_edit` changes the estimator's default session config, the
    one the stock CLI's sessions get on CPU (mesh passes none there, and gin
    cannot reach it), by named edits of TF's default. The edits apply in
    the order of their names, whatever order the settings are installed in,
    and without any edit TF's own function is back in place.
"""

import os
from typing import Callable, Dict, Optional

import tensorflow.compat.v1 as tf
from tensorflow_estimator.python.estimator import run_config

SessionEdit = Callable[[tf.ConfigProto], None]

_TF_DEFAULT = run_config.get_default_session_config
_EDITS: Dict[str, SessionEdit] = {}


def switch_from_env(env_var: str) -> bool:
  """Reads a switch: unset, empty or 1 is on, 0 is off.

  Args:
    env_var: the environment variable.

  Returns:
    False when it is 0, else True.

  Raises:
    ValueError: when it is set to anything but 0 or 1.
  """
  value = os.environ.get(env_var, "").strip()
  if value not in ("", "0", "1"):
    raise ValueError("%s must be 0 or 1, got %r." % (env_var, value))
  return value != "0"


def _edited_default_session_config() -> tf.ConfigProto:
  config = _TF_DEFAULT()
  for name in sorted(_EDITS):
    _EDITS[name](config)
  return config


def set_session_edit(name: str, edit: Optional[SessionEdit]) -> None:
  """Sets (or, with None, removes) one edit of the default session config.

  Args:
    name: the setting's name; a later call with the same name replaces it.
    edit: changes a ConfigProto in place; None removes the edit.
  """
  if edit is None:
    _EDITS.pop(name, None)
  else:
    _EDITS[name] = edit
  run_config.get_default_session_config = (
      _edited_default_session_config if _EDITS else _TF_DEFAULT)
