# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Reading the test suite's 0/1 switches of its stock-CLI runs."""

import os


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
