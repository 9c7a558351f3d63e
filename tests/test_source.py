# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Which code a tool measures (tools_lib/source.py): a checkout is named by
its git commit, an installed copy by its files, and a copy is told apart
from the checkout it came from only when its files differ."""

import os
import shutil
import subprocess

import conftest
from mtf_synthesizer.tools_lib import source


def _git(*args):
  return subprocess.run(["git", "-C", conftest.REPO] + list(args),
                        capture_output=True, text=True, check=True
                        ).stdout.strip()


def test_the_checkout_is_named_by_its_commit():
  # pytest imports the working tree (pytest.ini), as `PYTHONPATH=.` does.
  assert os.path.realpath(source.PACKAGE_DIR) == os.path.realpath(
      os.path.join(conftest.REPO, "mtf_synthesizer"))
  if not os.path.exists(os.path.join(conftest.REPO, ".git")):
    # A source tree without git history is named by its files.
    want = "installed copy, files %s" % source.files_digest()
  else:
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    want = "commit " + _git("rev-parse", "HEAD") + ("+dirty" if dirty else "")
  assert source.measured_code(conftest.REPO) == (want, True)


def test_an_installed_copy_is_the_checkout_only_with_the_same_files(
    tmp_path):
  copy = tmp_path / "site-packages" / "mtf_synthesizer"
  shutil.copytree(source.PACKAGE_DIR, copy,
                  ignore=shutil.ignore_patterns("__pycache__"))
  assert source.source_commit(str(copy)) == "unknown"
  checkout_digest = source.files_digest(
      os.path.join(conftest.REPO, "mtf_synthesizer"))
  assert source.files_digest(str(copy)) == checkout_digest
  description, same = source.measured_code(conftest.REPO, str(copy))
  assert same and description.startswith("commit ")
  with open(copy / "layer.py", "a") as f:
    f.write("\n# an edit the checkout does not have\n")
  description, same = source.measured_code(conftest.REPO, str(copy))
  assert not same
  assert description == "installed copy, files %s" % (
      source.files_digest(str(copy)))
  assert source.files_digest(str(copy)) != checkout_digest
