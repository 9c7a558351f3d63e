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
import dataclasses
import fcntl
import json
import os
import pathlib
import runpy
import subprocess
import sys
from typing import Callable, Dict, List, Sequence
from unittest import mock

import gin
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(REPO, "tools")
# The suite's start-up file for the processes it starts (cli_site/).
CLI_SITE = os.path.join(REPO, "tests", "cli_site")
sys.path.insert(0, CLI_SITE)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (REPO, CLI_SITE, os.environ.get("PYTHONPATH")) if p)
# The stock-CLI runs of the tests write no graph files beside their
# checkpoints (a quarter of a tiny run's time; `cli_site/graph_files.py`)
# and run no TF graph optimizer (an eighth; `cli_site/graph_optimizer.py`),
# except where a test asks for TF's defaults (test_preemption.py).
os.environ.setdefault("MTF_SYNTH_GRAPH_FILES", "0")
os.environ.setdefault("MTF_SYNTH_GRAPH_OPTIMIZER", "0")


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

# transformers' common tests and this suite's modules of their package
# (transformers_tests/__init__.py) run through test_transformers_common.py.
collect_ignore = ["transformers_tests"]

# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner
from t5_tasks import vocabulary



@pytest.fixture(scope="module")
def one_thread():
  """torch on one thread for a module's tiny models.

  They run fastest so, and the machine's other cores run other modules.
  A module asks for it with `pytestmark = pytest.mark.usefixtures(
  "one_thread")`.
  """
  import torch  # pylint: disable=g-import-not-at-top
  threads = torch.get_num_threads()
  torch.set_num_threads(1)
  yield
  torch.set_num_threads(threads)


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "slow: runs the stock CLI or builds many models (minutes "
      "each); `make test-fast` leaves them out")


def pytest_collection_modifyitems(items):
  """Modules with slow tests first, each module's tests together.

  `make test` hands whole modules to its workers in this order
  (pytest-xdist `--dist loadfile`): the long ones start first, and short
  ones fill in at the end.
  """
  slow = {item.module.__name__ for item in items
          if item.get_closest_marker("slow")}
  items.sort(key=lambda item: item.module.__name__ not in slow)
  for item in items:
    item.extra_keyword_matches.update(_function_keywords(item))


# Each attention of the table by its label and its name.
_ATTENTIONS_BY_KEY = {key: a for a in attentions.ATTENTIONS
                      for key in (a.label, a.name)}


def _function_keywords(item) -> List[str]:
  """The synthesizing functions a test's parameters name (for `-k`).

  A test parametrized by an attention of the table, given as its entry,
  its label ("FR+V") or its name, also matches `-k <function name>`
  ("factorized_random") and `-k <variant name>`.
  """
  callspec = getattr(item, "callspec", None)
  if callspec is None:
    return []
  out = []
  for value in callspec.params.values():
    attention = value if isinstance(value, attentions.Attention) else (
        _ATTENTIONS_BY_KEY.get(value) if isinstance(value, str) else None)
    if attention is not None:
      out.extend((attention.name,) + tuple(attention.components))
  return out


VARIANTS = attentions.VARIANT_NAMES
MESH_ATTENTION = attentions.MESH_SELF_ATTENTION.name  # no variant file


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


def shared_directory(tmp_path_factory, name: str) -> pathlib.Path:
  """A directory that every process of this test run sees.

  Under pytest-xdist (`make test` runs two workers) each worker has its own
  base temporary directory, inside one that all share; alone, the run's own.

  Args:
    tmp_path_factory: pytest's fixture.
    name: the directory's name.

  Returns:
    The directory (created).
  """
  base = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    base = base.parent
  path = base / name
  path.mkdir(exist_ok=True)
  return path


def run_once_across_workers(root: pathlib.Path, names: Sequence[str],
                            job: Callable[[str], Dict[str, object]],
                            threads: int = 2) -> Dict[str, Dict[str, object]]:
  """Runs `job(name)` once per name for the whole test run; returns results.

  Each name is claimed with a file lock in `root`: a process (xdist worker)
  runs the names no other process holds, `threads` at a time, then waits for
  the ones the others are running, and reads every result from `root`. So
  two workers that need the same models share the work instead of doing it
  twice.

  Args:
    root: a `shared_directory`.
    names: what to run.
    job: runs one name; returns a JSON-serializable dict.
    threads: jobs at a time in this process.

  Returns:
    name -> the job's dict.
  """
  def result_path(name):
    return root / (name + ".json")

  def attempt(name, block):
    with open(root / (name + ".lock"), "a") as lock:
      try:
        fcntl.flock(lock, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
      except BlockingIOError:
        return False
      try:
        if not result_path(name).exists():
          temporary = root / (name + ".json.tmp")
          temporary.write_text(json.dumps(job(name)))
          os.replace(temporary, result_path(name))
      finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
    return True

  with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
    claimed = dict(zip(names, pool.map(lambda n: attempt(n, False), names)))
  for name in names:
    if not claimed[name]:
      attempt(name, True)  # another process runs it: wait for its result
  return {name: json.loads(result_path(name).read_text()) for name in names}


@pytest.fixture(scope="session")
def trained_models(tmp_path_factory):
  """Trains every variant and a plain T5 model for TRAIN_STEPS steps.

  Once per test run, whichever workers ask (`run_once_across_workers`).

  Returns:
    name -> (model_dir, runner.Result).
  """
  root = shared_directory(tmp_path_factory, "trained")

  def train(name):
    result = runner.run(commands.local_train(
        str(root / name), name, steps=TRAIN_STEPS, length=LENGTH),
                        timeout=900)
    return {f.name: getattr(result, f.name)
            for f in dataclasses.fields(result) if not f.name.startswith("_")}

  results = run_once_across_workers(root, VARIANTS + (MESH_ATTENTION,), train)
  return {name: (str(root / name), runner.Result(**fields))
          for name, fields in results.items()}


# Inputs that the stock CLI decodes (`infer.gin`) with the trained models,
# for the exports' tests to compare with; the last is longer than the
# models' inputs (LENGTH), which truncate it.
LONG_INPUT = ("Python's documentation, repeated until it is far longer than "
              "the model's inputs. " * 4)
DECODE_INPUTS = ("The \"assert\" statement is a convenient way to insert",
                 "A class definition defines a class object.",
                 "for x in range(3): print(x)",
                 LONG_INPUT)


@pytest.fixture(scope="session")
def cli_decodes_of(trained_models, tmp_path_factory):
  """The stock CLI's greedy decodes of DECODE_INPUTS by trained models.

  Each model decodes once per test run, whichever workers ask
  (`run_once_across_workers`).

  Returns:
    A function: variants -> {variant: [decoded string per input]}.
  """
  root = shared_directory(tmp_path_factory, "decoded")

  def decode(variant):
    input_file = root / (variant + ".inputs.txt")
    input_file.write_text("\n".join(DECODE_INPUTS) + "\n")
    model_dir, trained = trained_models[variant]
    assert trained.returncode == 0, trained.stderr[-3000:]
    result = runner.run(commands.infer(
        commands.local_train(model_dir, variant, TRAIN_STEPS, length=LENGTH),
        str(input_file), str(root / variant)), timeout=900)
    assert result.returncode == 0, (variant, result.stderr[-3000:])
    return {"decodes": cli_decodes(str(root / ("%s-%d" % (variant,
                                                          TRAIN_STEPS))))}

  def get(variants: Sequence[str]) -> Dict[str, List[str]]:
    results = run_once_across_workers(root, list(variants), decode)
    return {v: results[v]["decodes"] for v in variants}

  return get


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


def run_script(path: str) -> Dict[str, object]:
  """Runs a script in this process as `python <path>` runs it.

  Python puts the script's folder first on `sys.path` (a tool finds
  `tools/_checkout.py` there); `runpy.run_path` alone does not.

  Args:
    path: the script.

  Returns:
    The script's globals.
  """
  with mock.patch.object(sys, "path", [os.path.dirname(path)] + sys.path):
    return runpy.run_path(path, run_name="__main__")


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
      run_script(path)
    except SystemExit as e:
      if isinstance(e.code, int):
        return e.code
      return 1 if e.code else 0
  return 0


def run_documented_on_cpu(doc: str, marker: str, output_dir: str,
                          out: pathlib.Path) -> subprocess.CompletedProcess:
  """Runs a documented `.venv/bin/python tools/...` command, GPUs hidden.

  With this interpreter, one thread, and its output folder replaced.

  Args:
    doc: the document.
    marker: a string of the command (`doc_blocks.find`).
    output_dir: the command's output folder as the document gives it.
    out: the folder it writes to instead.

  Returns:
    The finished process; its exit status was 0.
  """
  import doc_blocks  # pylint: disable=g-import-not-at-top
  argv = doc_blocks.find(doc, marker).substituted({
      ".venv/bin/python": sys.executable, output_dir: str(out)})
  env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
  proc = subprocess.run(argv, cwd=REPO, env=env, timeout=600,
                        capture_output=True, text=True)
  assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
  return proc


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


# What a PyTorch user of an export need not have: `pytorch_python` hides it.
WITHOUT_TENSORFLOW = frozenset([
    "tensorflow", "tensorflow_estimator", "tensorflow_text",
    "tensorflow_datasets", "tensorflow_io_gcs_filesystem", "tf_keras",
    "keras", "tfds_nightly", "mesh_tensorflow", "t5", "mtf_synthesizer",
    "_mtf_synthesizer_hooks", "t5_tasks", "seqio", "seqio_nightly", "gin",
    "gin_config"])


def pytorch_python(root: pathlib.Path) -> List[str]:
  """A Python command whose imports cannot find TensorFlow, mesh or us.

  Its path holds the virtual environment's site-packages but for the
  packages (and their metadata) of WITHOUT_TENSORFLOW: a folder of links to
  the others; no `site` (so no .pth start-up hooks either), no PYTHONPATH
  and no current directory (`-I`, so not the checkout). What runs there sees
  an export as a PyTorch-only user does.

  Args:
    root: a folder to hold the links.

  Returns:
    The command's first arguments: the interpreter, without `site`, with the
    links first on its path, running the script given next (then the
    script's arguments).
  """
  import site  # pylint: disable=g-import-not-at-top
  source = [p for p in site.getsitepackages() if p.endswith("site-packages")]
  links = root / "site-packages"
  links.mkdir(exist_ok=True)
  for folder in source:
    for entry in os.listdir(folder):
      top = entry.split("-")[0].split(".")[0].lower().replace("-", "_")
      if (top in WITHOUT_TENSORFLOW or entry.endswith(".pth") or
          top.startswith("tensorflow")):
        continue
      target = links / entry
      if not target.exists():
        os.symlink(os.path.join(folder, entry), target)
  return [sys.executable, "-I", "-S", "-c",
          "import sys, runpy; sys.path.insert(0, %r); "
          "sys.argv = sys.argv[1:]; "
          "runpy.run_path(sys.argv[0], run_name='__main__')" % str(links)]


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


def gin_value(parameter: str):
  """The value bound to a gin parameter, each macro in it (`%NAME`, also
  inside lists and dicts) replaced by the macro's own value."""

  def evaluated(value):
    if isinstance(value, list):
      return [evaluated(v) for v in value]
    if isinstance(value, tuple):
      return tuple(evaluated(v) for v in value)
    if isinstance(value, dict):
      return {k: evaluated(v) for k, v in value.items()}
    if getattr(value, "selector", None) == "gin.macro":
      name = value.scoped_selector.rsplit("/", 1)[0]
      return evaluated(gin.query_parameter("%" + name))
    return value

  return evaluated(gin.query_parameter(parameter))
