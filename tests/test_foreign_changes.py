# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every change the distribution makes to another library's objects is listed.

docs/architecture.md ("What the package changes in other libraries") has one
row per site: the file and the code form found there. This test reads every
Python file of the distribution (setup.py's packages and top-level modules,
the `.pth` line that runs at interpreter start, and tools/), finds the sites
below with Python's own parser, and compares them with the table, both ways:

  * an attribute assigned, deleted or `setattr` on an imported module or
    object (`ops.x = ...`, `run_config.get_default_session_config = ...`),
    or on any object but `self` when the attribute is private
    (`estimator._config = ...`) or the value a function defined here
    (`estimator.train = train_with_ordered_step`);
  * `setattr(...)` on anything but `self`;
  * an edit of `sys.meta_path`, `sys.path_hooks` or `sys.modules`;
  * a call of a private method of another object
    (`graph._set_control_flow_context(...)`, `op._add_control_inputs(...)`);
  * reading the interpreter's frames.
"""

import ast
import os
import re
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.md")
HEADING = "## What the package changes in other libraries"
PACKAGES = ("mtf_synthesizer", "t5_tasks")
TOP_LEVEL = ("_mtf_synthesizer_hooks.py", "_mtf_synthesizer_commands.py")
PTH = "mtf_synthesizer.pth"
TOOLS = "tools"
_OWN = ("self", "cls")
_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear",
             "update", "setdefault", "popitem", "__setitem__",
             "__delitem__"}
_INTERPRETER_STATE = ("sys.meta_path", "sys.path_hooks", "sys.modules")
_FRAMES = {"currentframe", "_getframe", "stack", "getouterframes"}

Site = Tuple[str, str]  # (repo-relative file, code form)


def distribution_files() -> List[str]:
  """Repo-relative paths of the distribution's Python files and the .pth."""
  found = list(TOP_LEVEL) + [PTH]
  for top in PACKAGES + (TOOLS,):
    for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
      dirs[:] = sorted(d for d in dirs if d != "__pycache__")
      found.extend(os.path.relpath(os.path.join(folder, name), ROOT)
                   for name in sorted(files) if name.endswith(".py"))
  return found


def _source(path: str) -> str:
  with open(os.path.join(ROOT, path)) as f:
    text = f.read()
  if path.endswith(".pth"):
    # site.py executes the lines that start with `import`; the others are
    # paths.
    text = "\n".join(line for line in text.splitlines()
                     if line.startswith(("import ", "import\t")))
  return text


def _root(node: ast.AST) -> ast.AST:
  while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
    node = node.func if isinstance(node, ast.Call) else node.value
  return node


def _imported(tree: ast.AST) -> Set[str]:
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update((a.asname or a.name).split(".")[0] for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and not (
        node.module or "").startswith(PACKAGES):
      names.update(a.asname or a.name for a in node.names)
  return names


def _functions(tree: ast.AST) -> Set[str]:
  return {node.name for node in ast.walk(tree)
          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _state(node: ast.AST) -> str:
  """'sys.modules' when node is (a part of) sys.modules, else ''."""
  text = ast.unparse(node)
  return next((s for s in _INTERPRETER_STATE
               if text == s or text.startswith((s + ".", s + "["))), "")


def sites_in(source: str) -> Iterator[str]:
  """The code forms of the changes to other libraries' objects in source.

  Args:
    source: a Python module's text.

  Yields:
    e.g. "ops.register_tensor_conversion_function =",
    "graph._set_control_flow_context(", "sys.meta_path.insert(".
  """
  tree = ast.parse(source)
  imported = _imported(tree)
  functions = _functions(tree)

  def foreign(target: ast.AST) -> bool:
    root = _root(target)
    return isinstance(root, ast.Name) and root.id in imported

  def own(target: ast.AST) -> bool:
    root = _root(target)
    return isinstance(root, ast.Name) and root.id in _OWN

  for node in ast.walk(tree):
    targets, value = [], None
    if isinstance(node, ast.Assign):
      targets, value = node.targets, node.value
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
      targets, value = [node.target], node.value
    elif isinstance(node, ast.Delete):
      targets = node.targets
    for target in targets:
      if isinstance(target, ast.Subscript) and _state(target.value):
        yield _state(target.value) + "[...] " + (
            "=" if value is not None else "del")
      if not isinstance(target, ast.Attribute):
        continue
      replaces_function = (isinstance(value, ast.Lambda) or (
          isinstance(value, ast.Name) and value.id in functions))
      if foreign(target) or (not own(target) and (
          target.attr.startswith("_") or replaces_function)):
        yield ast.unparse(target) + (" =" if value is not None else " del")
    if not isinstance(node, ast.Call):
      continue
    func = node.func
    if isinstance(func, ast.Name) and func.id in ("setattr", "delattr"):
      if node.args and not own(node.args[0]):
        yield "%s(%s, ...)" % (func.id, ast.unparse(node.args[0]))
    if not isinstance(func, ast.Attribute):
      continue
    if func.attr in _MUTATORS and _state(func.value):
      yield ast.unparse(func) + "("
    elif (func.attr.startswith("_") and not func.attr.startswith("__")
          and not own(func.value)):
      yield ast.unparse(func) + "("
    elif func.attr in _FRAMES and ast.unparse(func.value) in ("inspect",
                                                                "sys"):
      yield ast.unparse(func) + "("


def found_sites() -> Dict[Site, int]:
  """(file, code form) -> how often it occurs, over the distribution."""
  counts = {}
  for path in distribution_files():
    # A line of the .pth runs at every interpreter start: each is a site.
    forms = (_source(path).splitlines() if path == PTH
             else sites_in(_source(path)))
    for form in forms:
      counts[(path, form)] = counts.get((path, form), 0) + 1
  return counts


def listed_sites() -> Set[Site]:
  """The (file, code form) pairs of docs/architecture.md's table."""
  with open(DOC) as f:
    text = f.read()
  assert HEADING in text, "docs/architecture.md lost its section " + HEADING
  section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
  listed = set()
  for line in section.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 3 or not cells[0].startswith("`"):
      continue
    path = cells[0].strip("`")
    for form in re.findall(r"`([^`]+)`", cells[1]):
      listed.add((path, form))
  return listed


def test_the_scan_covers_the_distribution():
  files = distribution_files()
  assert "_mtf_synthesizer_hooks.py" in files
  assert "mtf_synthesizer.pth" in files
  assert os.path.join("mtf_synthesizer", "stock_cli", "settings.py") in files
  assert "import _mtf_synthesizer_hooks" in _source(PTH)


@pytest.mark.parametrize("source,form", [
    ("from tensorflow.python.framework import ops\nops.f = g\n", "ops.f ="),
    ("import tensorflow as tf\ntf.compat.v1.x = 1\n", "tf.compat.v1.x ="),
    ("from tensorflow_estimator.python.estimator import run_config\n"
     "run_config.get_default_session_config = (f)\n",
     "run_config.get_default_session_config ="),
    ("import sys\nsys.meta_path.insert(0, F())\n", "sys.meta_path.insert("),
    ("import sys\nsys.modules['t5.x'] = m\n", "sys.modules[...] ="),
    ("import sys\ndel sys.modules[name]\n", "sys.modules[...] del"),
    ("def f(graph):\n  graph._set_control_flow_context(c)\n",
     "graph._set_control_flow_context("),
    ("def f(op):\n  op._add_control_inputs([])\n", "op._add_control_inputs("),
    ("def f(e):\n  e._config = 1\n", "e._config ="),
    ("def f(e):\n  def g():\n    pass\n  e.train = g\n", "e.train ="),
    ("import mesh_tensorflow as mtf\nsetattr(mtf, 'x', 1)\n",
     "setattr(mtf, ...)"),
    ("import inspect\ninspect.currentframe()\n", "inspect.currentframe("),
])
def test_the_scan_finds_each_kind_of_change(source, form):
  assert form in list(sites_in(source))


@pytest.mark.parametrize("source", [
    "class A:\n  def __init__(self):\n    self._x = 1\n    self.f = len\n",
    "def f(config):\n  config.num_layers = 2\n",
    "from mtf_synthesizer import names\nnames.x = 1\n",
    "import sys\nx = sys.modules.get('torch')\n",
])
def test_the_scan_leaves_own_objects_alone(source):
  assert not list(sites_in(source))


def test_every_change_to_another_library_is_listed():
  found = found_sites()
  listed = listed_sites()
  unlisted = sorted(set(found) - listed)
  assert not unlisted, (
      "changes to other libraries' objects without a row in docs/"
      "architecture.md (%s): %s" % (HEADING, unlisted))


def test_every_listed_change_still_exists():
  stale = sorted(listed_sites() - set(found_sites()))
  assert not stale, "rows of docs/architecture.md found nowhere: %s" % stale
