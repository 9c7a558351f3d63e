# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The workbench runs the checkout (workbench/checkout.py): the tools import
the working tree's packages, so do the stock-CLI processes they start, and a
result is named by the checkout's commit."""

import os
import re
import subprocess
import sys

import conftest
from workbench import checkout


def _git(*args):
  return subprocess.run(["git", "-C", conftest.REPO] + list(args),
                        capture_output=True, text=True, check=True
                        ).stdout.strip()


def test_the_checkout_is_named_by_its_commit():
  assert os.path.realpath(checkout.ROOT) == os.path.realpath(conftest.REPO)
  if not os.path.exists(os.path.join(conftest.REPO, ".git")):
    assert checkout.commit() == "unknown"
    return
  edited = _git("status", "--porcelain", "--untracked-files=no")
  assert checkout.commit() == _git("rev-parse", "HEAD") + (
      "+dirty" if edited else "")


def test_subprocesses_import_the_working_tree(monkeypatch):
  monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/elsewhere",
                                                    checkout.ROOT]))
  checkout.use_for_subprocesses()
  assert os.environ["PYTHONPATH"].split(os.pathsep) == [checkout.ROOT,
                                                         "/elsewhere"]
  code = ("import mtf_synthesizer, workbench; "
          "print(mtf_synthesizer.__file__); print(workbench.__file__)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, check=True, cwd="/").stdout.split()
  for path in out:
    assert os.path.realpath(path).startswith(
        os.path.realpath(checkout.ROOT) + os.sep), out


def test_every_tool_finds_the_checkout_one_way():
  # Each tool imports tools/_checkout.py before the checkout's packages, and
  # none reaches for sys.path itself.
  for name in sorted(os.listdir(conftest.TOOLS)):
    if not name.endswith(".py") or name == "_checkout.py":
      continue
    with open(os.path.join(conftest.TOOLS, name)) as f:
      source = f.read()
    assert "sys.path" not in source, name
    first_party = re.search(
        r"^(from|import) (mtf_synthesizer|workbench|t5_tasks)\b", source,
        re.MULTILINE)
    if first_party:  # (tools/saved_model_predict.py needs TF only)
      found = re.search(r"^import _checkout\b", source, re.MULTILINE)
      assert found and found.start() < first_party.start(), name


def test_a_tool_imports_the_working_tree_without_pythonpath(tmp_path):
  # Run as `python tools/paper_commands.py --help` runs, from another
  # directory, with no PYTHONPATH: Python puts the script's folder first on
  # sys.path, then runs it.
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  tool = os.path.join(conftest.TOOLS, "paper_commands.py")
  code = ("import os, runpy, sys\n"
          "sys.argv = [%r, '--help']\n"
          "sys.path[0] = os.path.dirname(sys.argv[0])\n"
          "try:\n"
          "  runpy.run_path(sys.argv[0], run_name='__main__')\n"
          "except SystemExit:\n"
          "  pass\n"
          "print(sys.modules['mtf_synthesizer'].__file__)\n"
          "print(sys.path[0])\n" % tool)
  out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, check=True, cwd=str(tmp_path), env=env
                       ).stdout.split()
  assert os.path.realpath(out[-2]).startswith(
      os.path.realpath(checkout.ROOT) + os.sep), out
  assert os.path.realpath(out[-1]) == os.path.realpath(checkout.ROOT), out


def test_the_product_installs_no_workbench():
  # setup.py's packages, as pip would find them, and what they import.
  import setuptools  # pylint: disable=g-import-not-at-top
  packages = setuptools.find_packages(
      conftest.REPO, include=["mtf_synthesizer*", "t5_tasks*"])
  assert "mtf_synthesizer" in packages and "t5_tasks" in packages
  assert not [p for p in packages if p.startswith("workbench")]
  with open(os.path.join(conftest.REPO, "setup.py")) as f:
    assert 'include=["mtf_synthesizer*",' in f.read()
  for package in ("mtf_synthesizer", "t5_tasks"):
    for folder, _, files in os.walk(os.path.join(conftest.REPO, package)):
      for name in files:
        if name.endswith(".py"):
          with open(os.path.join(folder, name)) as f:
            source = f.read()
          assert not re.search(r"^\s*(from|import) workbench\b", source,
                               re.MULTILINE), os.path.join(folder, name)
