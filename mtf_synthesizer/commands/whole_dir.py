# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A command's output directory, written whole or not at all.

`mtf-synthesizer-export-hf` and `mtf-synthesizer-from-t5` write their model
with `written_whole(out_dir, overwrite)`: the files go into a new directory
beside OUT_DIR (the same parent, `.<name>.partial-<id>`), which is renamed
to OUT_DIR once every file is written. A run that fails removes it; a run
that is killed leaves it under its hidden name, never as OUT_DIR, so no
interrupted run leaves a directory that loads as a model. An OUT_DIR that
holds files is refused (`OutputDirError`) unless `overwrite`: then the old
directory is moved aside when the new one is complete, the new one takes
its name and the old one is deleted, so no old file is left beside the new
ones. An empty OUT_DIR is replaced without --overwrite. An OUT_DIR that is
or holds the command's input is refused, even with --overwrite. A run
killed while it moves the directories may leave the old one as
`.<name>.old-<id>`.

Only the standard library is imported (the commands start without
TensorFlow).
"""

import contextlib
import os
import secrets
import shutil
from typing import Iterator, List, Sequence


class OutputDirError(OSError):
  """The output directory cannot be written whole (it holds files...)."""


def _entries(path: str) -> List[str]:
  """The names in a directory, sorted."""
  return sorted(os.listdir(path))


def check(out_dir: str, overwrite: bool = False,
          inputs: Sequence[str] = ()) -> None:
  """Refuses an output directory that a command may not write.

  Args:
    out_dir: the directory the command is asked to write.
    overwrite: whether an existing directory with files may be replaced.
    inputs: the paths the command reads (a model directory, a checkpoint);
      out_dir may be none of them nor hold one, even with overwrite.

  Raises:
    OutputDirError: out_dir is a file, is or holds one of inputs, or is a
      directory that holds files and overwrite is False (the message names
      it and some of its files).
  """
  if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
    raise OutputDirError("%s exists and is not a directory" % out_dir)
  real_out = os.path.realpath(out_dir)
  for path in inputs:
    real = os.path.realpath(path)
    if os.path.exists(path) and (
        real == real_out or real.startswith(real_out.rstrip(os.sep) +
                                            os.sep)):
      raise OutputDirError(
          "the output directory %s holds the input %s; name another "
          "directory" % (out_dir, path))
  if overwrite or not os.path.isdir(out_dir):
    return
  entries = _entries(out_dir)
  if entries:
    raise OutputDirError(
        "the output directory %s already holds files (%s); pass "
        "--overwrite to replace it whole, or name another directory" % (
            out_dir, ", ".join(entries[:5] + (["..."] if len(entries) > 5
                                              else []))))


def _sibling(path: str, kind: str) -> str:
  """Creates an empty, hidden directory beside `path`; returns its path."""
  parent, name = os.path.split(path)
  while True:
    candidate = os.path.join(parent, ".%s.%s-%d-%s" % (
        name, kind, os.getpid(), secrets.token_hex(4)))
    try:
      os.mkdir(candidate)  # the umask's permissions, as os.makedirs gives
    except FileExistsError:
      continue
    return candidate


@contextlib.contextmanager
def written_whole(out_dir: str, overwrite: bool = False,
                  inputs: Sequence[str] = ()) -> Iterator[str]:
  """Yields a new directory to write; it becomes out_dir when all went well.

  Args:
    out_dir: the directory to produce (its parent is created if missing).
    overwrite: replace an out_dir that holds files.
    inputs: the paths the command reads, which out_dir may not be or hold.

  Yields:
    The directory to write the files into, beside out_dir.

  Raises:
    OutputDirError: out_dir may not be written (`check`), at the start or,
      when another process filled it meanwhile, at the end.
  """
  out_dir = os.path.realpath(out_dir)  # a link's directory is replaced
  check(out_dir, overwrite, inputs)
  os.makedirs(os.path.dirname(out_dir), exist_ok=True)
  partial = _sibling(out_dir, "partial")
  try:
    yield partial
    if os.path.isdir(out_dir) and _entries(out_dir):
      check(out_dir, overwrite, inputs)  # filled meanwhile: refused again
      old = _sibling(out_dir, "old")
      os.replace(out_dir, old)  # onto the empty directory just made
      try:
        os.replace(partial, out_dir)
      except OSError:
        os.replace(old, out_dir)  # the old directory back
        raise
      shutil.rmtree(old)
    else:
      os.replace(partial, out_dir)  # also onto an empty out_dir
  finally:
    if os.path.isdir(partial):
      shutil.rmtree(partial, ignore_errors=True)
