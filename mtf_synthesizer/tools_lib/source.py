# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Which version of the package's code a tool runs.

The benchmark and the reproduction record it beside their results, so that a
number can be tied to the code that produced it. The tools import the
installed package unless `PYTHONPATH=.` puts a checkout first: the installed
copy is named by a digest of its files, since it has no git history.
"""

import hashlib
import os
import subprocess
from typing import Optional, Tuple

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def source_commit(package_dir: Optional[str] = None) -> str:
  """The git commit of the tree holding the package ("+dirty" when edited).

  Args:
    package_dir: the package's directory (default: the imported package).

  Returns:
    The commit, or "unknown" when the package is not in a git checkout
    (e.g. the installed copy in site-packages).
  """
  top = os.path.dirname(package_dir or PACKAGE_DIR)
  if not os.path.exists(os.path.join(top, ".git")):
    return "unknown"
  try:
    commit = subprocess.run(["git", "-C", top, "rev-parse", "HEAD"],
                            capture_output=True, text=True, check=True
                            ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", top, "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
  return commit + ("+dirty" if dirty else "")


def files_digest(package_dir: Optional[str] = None) -> str:
  """SHA-1 (12 hex digits) of the package's .py files, names and contents."""
  root = package_dir or PACKAGE_DIR
  digest = hashlib.sha1()
  for folder, dirs, files in sorted(os.walk(root)):
    dirs.sort()
    for name in sorted(f for f in files if f.endswith(".py")):
      path = os.path.join(folder, name)
      digest.update(os.path.relpath(path, root).encode("utf-8") + b"\0")
      with open(path, "rb") as f:
        digest.update(f.read() + b"\0")
  return digest.hexdigest()[:12]


def code_version(package_dir: Optional[str] = None) -> str:
  """"commit <sha>[+dirty]" for a checkout, else "installed copy <digest>".

  Args:
    package_dir: the package's directory (default: the imported package).

  Returns:
    A short description of the code that runs.
  """
  commit = source_commit(package_dir)
  if commit != "unknown":
    return "commit %s" % commit
  return "installed copy, files %s" % files_digest(package_dir)


def measured_code(repo_dir: str,
                  package_dir: Optional[str] = None) -> Tuple[str, bool]:
  """The imported package's code, told against a checkout's working tree.

  Args:
    repo_dir: a checkout of this repository (e.g. the one a tool is in).
    package_dir: the package's directory (default: the imported package).

  Returns:
    (description, same): `same` when the package is that checkout's, or an
    installed copy of the same files (`make install`); the description is
    then the checkout's `code_version`, else the package's own.
  """
  package_dir = package_dir or PACKAGE_DIR
  checkout = os.path.join(repo_dir, "mtf_synthesizer")
  same = (os.path.realpath(package_dir) == os.path.realpath(checkout) or (
      os.path.isdir(checkout) and
      files_digest(package_dir) == files_digest(checkout)))
  return code_version(checkout if same else package_dir), same
