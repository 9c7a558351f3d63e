# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Early, readable checks of the stock `t5_mesh_transformer` command line.

The stock CLI reports a bad `--model_dir` or `--gin_file` late (after every
`--module_import`), through a TensorFlow or gin traceback. `check_cli_flags()`
runs the same checks when `mtf_synthesizer` is imported by the CLI, and raises
`CliError` with a message that says what is wrong and what to do:

  * `--model_dir` on the local file system must be a directory that can be
    created and written (the check creates it, as the CLI would, and writes
    and removes a probe file; this also fails for root when a parent of the
    path is a regular file, or the file system is read-only);
  * every `--gin_file=synthesizer/<name>.gin` must be one of the variant files
    shipped in `gin/synthesizer` (or exist relative to the current
    directory, which gin searches first).

Outside the stock CLI (absl flags not parsed, or no `--model_dir` flag) it does
nothing. The start-up hook (`_mtf_synthesizer_hooks.py`) calls it when the
stock CLI imports `mtf_synthesizer`; importing the package elsewhere does
not.
"""

import os
import tempfile
from typing import Iterable, List, Optional, Sequence

from mtf_synthesizer.stock_cli import gin_path

GIN_DIR = gin_path.GIN_DIR
_VARIANT_FOLDER = gin_path.VARIANT_FOLDER


class CliError(ValueError):
  """A command-line argument of the stock CLI cannot work."""


def _is_local(path: str) -> bool:
  return "://" not in path


def check_model_dir(model_dir: str) -> None:
  """Checks that `model_dir` can be created and written.

  Paths with a URL scheme (`gs://...`) are not checked.

  Args:
    model_dir: the value of `--model_dir`.

  Raises:
    CliError: the path is empty, or the directory cannot be created or
      written.
  """
  if not model_dir:
    raise CliError("--model_dir is empty: give a directory for checkpoints "
                   "and summaries.")
  if not _is_local(model_dir):
    return
  path = os.path.abspath(model_dir)
  parent = path
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise CliError(
        "--model_dir=%s cannot be created: %s is not a directory (it is a "
        "file). Choose a model_dir whose parents are directories."
        % (model_dir, parent))
  try:
    os.makedirs(path, exist_ok=True)
    with tempfile.TemporaryFile(dir=path, prefix=".write_probe"):
      pass
  except OSError as e:
    raise CliError(
        "--model_dir=%s is not writable (%s: %s). Choose a directory you can "
        "write to." % (model_dir, type(e).__name__, e.strerror or e)) from e


def variant_files() -> List[str]:
  """The shipped variant gin files, as `synthesizer/<name>.gin`."""
  return ["%s/%s.gin" % (_VARIANT_FOLDER, f)
          for f in gin_path.gin_files(_VARIANT_FOLDER)]


def check_gin_files(gin_files: Iterable[str],
                    search_path: Optional[Sequence[str]] = None) -> None:
  """Checks that every `synthesizer/...` gin file exists.

  Other gin files (t5's `models/...`, the user's own) are left to gin.

  Args:
    gin_files: the values of `--gin_file`.
    search_path: the folders to look in; by default the current directory and
      `GIN_DIR`.

  Raises:
    CliError: a `synthesizer/...` file is in none of the folders.
  """
  folders = list(search_path) if search_path is not None else ["", GIN_DIR]
  for name in gin_files:
    if not name.startswith(_VARIANT_FOLDER + "/"):
      continue
    if any(os.path.isfile(os.path.join(f, name)) for f in folders):
      continue
    raise CliError(
        "Unknown gin file --gin_file=%s: not found in the search path %s. "
        "The files in synthesizer/ are: %s."
        % (name, [f or os.getcwd() for f in folders],
           ", ".join(variant_files())))


def check_cli_flags() -> None:
  """Runs the checks on the parsed absl flags of the stock CLI, if any."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flag_values = flags.FLAGS
  if not flag_values.is_parsed() or "model_dir" not in flag_values:
    return
  if "gin_file" in flag_values:
    check_gin_files(flag_values.gin_file or [])
  check_model_dir(flag_values.model_dir)
