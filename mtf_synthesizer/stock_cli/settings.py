# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Edits of the stock CLI's session config (`MTF_SYNTH_CPU_DEVICES`).

`set_session_edit` changes the estimator's default session config, the one
the stock CLI's sessions get on CPU (mesh passes none there, and gin cannot
reach it), by named edits of TF's default. The edits apply in the order of
their names, whatever order the settings are installed in, and without any
edit TF's own function is back in place.
"""

from typing import Callable, Dict, Optional

import tensorflow.compat.v1 as tf
from tensorflow_estimator.python.estimator import run_config

SessionEdit = Callable[[tf.ConfigProto], None]

_TF_DEFAULT = run_config.get_default_session_config
_EDITS: Dict[str, SessionEdit] = {}


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
