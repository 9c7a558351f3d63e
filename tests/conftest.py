# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Shared fixtures: tiny models trained once per session by the stock CLI.

The tests run against the working tree: its root goes first on `sys.path`
(`pythonpath` in pytest.ini) and, here, on `PYTHONPATH` for the stock-CLI
subprocesses, so an edit is tested without reinstalling. The installed copy
is still needed for its start-up hook (`mtf_synthesizer.pth`); a stale one
stops the run with a message to run `make install`.
"""

import ast
import concurrent.futures
import json
import os
import runpy
import subprocess
import sys
from typing import List, Sequence
from unittest import mock

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(REPO, "tools")
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (REPO, os.environ.get("PYTHONPATH")) if p)


def _check_installed_hook():
  """Exits when the installed start-up hook is missing or stale."""
  hooks = sys.modules.get("_mtf_synthesizer_hooks")
  if hooks is None:
    pytest.exit("mtf_synthesizer's start-up hook did not run: the package is "
                "not installed in this environment. Run `make install` (or "
                "`make test`).", returncode=2)
  with open(hooks.__file__) as installed, open(
      os.path.join(REPO, "_mtf_synthesizer_hooks.py")) as source:
    if installed.read() != source.read():
      pytest.exit("The installed start-up hook (%s) differs from the working "
                  "tree's _mtf_synthesizer_hooks.py. Run `make install` (or "
                  "`make test`)." % hooks.__file__, returncode=2)


_check_installed_hook()

# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner
from t5_tasks import vocabulary



def pytest_configure(config):
  config.addinivalue_line(
      "markers", "slow: runs the stock CLI or builds many models (minutes "
      "each); `make test-fast` leaves them out")


VARIANTS = attentions.VARIANT_NAMES
T5_VANILLA = attentions.MESH_SELF_ATTENTION.name  # no variant file


def covering_variants(functions: Sequence[str]) -> List[str]:
  """A sample of the variant table derived from it: few rows, all functions.

  Greedy: the variant that uses the most of the functions not yet covered,
  the table's order breaking ties, until every one of `functions` is used by
  some chosen variant. A new function (or variant) changes the sample by
  itself.

  Args:
    functions: names of synthesizing functions (`synthesizers.BY_NAME`).

  Returns:
    Variant names, in the table's order.
  """
  left, chosen = set(functions), []
  while left:
    best = max(attentions.VARIANTS,
               key=lambda v: len(left & set(v.components)))
    if not left & set(best.components):
      raise ValueError("no variant uses %s" % sorted(left))
    chosen.append(best.name)
    left -= set(best.components)
  return [v for v in attentions.VARIANT_NAMES if v in chosen]
TRAIN_STEPS = 2
LENGTH = 64


@pytest.fixture(scope="session")
def trained_models(tmp_path_factory):
  """Trains every variant and a plain T5 model for TRAIN_STEPS steps.

  Returns:
    name -> (model_dir, runner.Result).
  """
  root = tmp_path_factory.mktemp("trained")

  def train(name):
    model_dir = str(root / name)
    result = runner.run(commands.local_train(
        model_dir, name, steps=TRAIN_STEPS, length=LENGTH), timeout=900)
    return name, (model_dir, result)

  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    return dict(pool.map(train, VARIANTS + (T5_VANILLA,)))


@pytest.fixture(scope="module")
def byte_vocab():
  """Selects the byte vocabulary (offline) for a module's tasks."""
  old = os.environ.get(vocabulary.ENV_VAR)
  os.environ[vocabulary.ENV_VAR] = "byte"
  vocabulary.reset_vocabulary()
  yield
  if old is None:
    del os.environ[vocabulary.ENV_VAR]
  else:
    os.environ[vocabulary.ENV_VAR] = old
  vocabulary.reset_vocabulary()


def run_tool(script: str, argv: Sequence[str]) -> int:
  """Runs a script of tools/ in this process, as `python tools/<script>`.

  In process, so that a test can watch what it prints (capsys) and forbid
  what it must not do (monkeypatch).

  Args:
    script: the file name, e.g. "tpu_job.py".
    argv: its arguments.

  Returns:
    Its exit status.
  """
  path = os.path.join(TOOLS, script)
  with mock.patch.object(sys, "argv", [path] + list(argv)):
    try:
      runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
      if isinstance(e.code, int):
        return e.code
      return 1 if e.code else 0
  return 0


# Run in a fresh interpreter: refuses to import anything but TensorFlow's
# own dependencies, then decodes with tools/saved_model_predict.py.
TF_ONLY = """\
import json, runpy, sys
BLOCKED = {"mesh_tensorflow", "t5", "mtf_synthesizer", "t5_tasks", "seqio",
           "gin", "tensorflow_text", "tensorflow_datasets"}
class Block:
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in BLOCKED:
      raise ImportError("the SavedModel needs " + name)
sys.meta_path.insert(0, Block())
tool = runpy.run_path(sys.argv[1])
requests = json.loads(sys.argv[2])
out = {d: tool["predict"](d, inputs, batch) for d, inputs, batch in requests}
loaded = sorted(m.split(".")[0] for m in sys.modules)
print("RESULT " + json.dumps({"outputs": out, "modules": loaded}))
"""


def cli_decodes_from_lines(lines):
  """Decoded strings from mesh's output lines, Python bytes literals."""
  return [ast.literal_eval(line).decode("utf-8", "replace") for line in lines]


def cli_decodes(path):
  """The decodes in a file written by the CLI (mesh writes str(bytes))."""
  with open(path) as f:
    return cli_decodes_from_lines(
        [line for line in f.read().split("\n") if line])


def tf_only_predict(requests):
  """[(saved model, inputs, batch)] -> {saved model: results}, in TF only."""
  proc = subprocess.run(
      [sys.executable, "-c", TF_ONLY,
       os.path.join(TOOLS, "saved_model_predict.py"),
       json.dumps(requests)],
      capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  (line,) = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
  result = json.loads(line[len("RESULT "):])
  assert not {"mesh_tensorflow", "t5", "mtf_synthesizer", "gin"} & set(
      result["modules"])
  return result["outputs"]
