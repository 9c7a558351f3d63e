# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every name the documents give exists, and the README's counts are true.

The documents are README.md and every page under docs/ but docs/history/
(dated records, which name the code as it was). From their code (inline
spans and blocks) and their links:

  * a repository path (`mtf_synthesizer/...`, `tools/...`, `gin/...`, ...)
    names a file or folder of the checkout;
  * a gin file as the stock CLI takes it (`synthesizer/random.gin`,
    `models/t5.1.1.tiny.gin`) is in this package's gin folder or t5's;
  * a dotted module path (`mtf_synthesizer.jobs.commands.local_train`) is
    a module, or a module and attributes of it;
  * an installed command (`mtf-synthesizer-...`) is one of setup.py's;
  * a relative link names a file, and its `#anchor` a heading of it.

docs/README.md, the index, lists every page. README.md's counts of the
installed commands and of the variants are those of setup.py and of the
attention table (`mtf_synthesizer/attentions.py`). LICENSE is setup.py's
licence, and CITATION.cff cites the paper the README links.
"""

import glob
import importlib
import importlib.util
import inspect
import os
import re
from typing import Dict, Iterator, List, Set, Tuple

import gin
from markdown_it import MarkdownIt
from mesh_tensorflow.transformer import transformer as mtf_transformer
import pytest
import t5.models

import conftest
import mtf_synthesizer  # pylint: disable=unused-import  (gin names)
from mtf_synthesizer import attentions
from mtf_synthesizer.stock_cli import gin_path

REPO = conftest.REPO
T5_GIN = os.path.join(os.path.dirname(t5.models.__file__), "gin")
TOP_FOLDERS = ("mtf_synthesizer", "t5_tasks", "tools", "tests", "workbench",
               "gin", "docs")
GIN_FOLDERS = ("synthesizer", "baselines", "experiments", "models",
               "learning_rate_schedules", "objectives")
MESH_GIN = os.path.join(os.path.dirname(mtf_transformer.__file__), "gin")
# Names the documents give that a checkout does not hold (or not under
# that name), and why.
NOT_IN_THE_CHECKOUT = {
    "mtf_synthesizer/gin/": "where setup.py installs gin/",
    "synthesizer/nonexistent.gin": "docs/quickstart.md's example of an error",
    "operative_config.gin": "a model directory's, which mesh writes",
    "config.gin": "a converted directory's, which "
                  "mtf-synthesizer-flax-from-mesh writes",
    "model.gin": "a model directory's, which mtf-synthesizer-jax-train "
                 "writes",
    # The package's own name for core.synthesizers (gin's `synthesizers.*`),
    # also a former path that docs/architecture.md explains.
    "mtf_synthesizer.synthesizers": "mtf_synthesizer/__init__.py exports it",
}
NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def documents() -> List[str]:
  """README.md and docs' pages but the history, repository-relative."""
  pages = sorted(glob.glob(os.path.join(REPO, "docs", "**", "*.md"),
                           recursive=True))
  return ["README.md"] + [
      os.path.relpath(p, REPO) for p in pages
      if not os.path.relpath(p, REPO).startswith(os.path.join("docs",
                                                              "history"))]


def _read(doc: str) -> str:
  with open(os.path.join(REPO, doc)) as f:
    return f.read()


def _tokens(doc: str):
  return MarkdownIt("commonmark").parse(_read(doc))


def code_of(doc: str) -> List[str]:
  """The text of a document's inline code spans and code blocks."""
  out = []
  for token in _tokens(doc):
    if token.type in ("fence", "code_block"):
      out.append(token.content)
    for child in token.children or []:
      if child.type == "code_inline":
        out.append(child.content)
  return out


def links_of(doc: str) -> List[str]:
  """The targets of a document's links and images."""
  out = []
  for token in _tokens(doc):
    for child in token.children or []:
      if child.type == "link_open":
        out.append(child.attrs["href"])
      elif child.type == "image":
        out.append(child.attrs["src"])
  return out


def slug(heading: str) -> str:
  """A heading's anchor as GitHub writes it."""
  text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
  text = re.sub(r"[^\w\- ]", "", text.lower())
  return text.replace(" ", "-")


def anchors_of(doc: str) -> Set[str]:
  """The anchors of a document's headings (repeats get -1, -2, ...)."""
  seen: Dict[str, int] = {}
  out = set()
  tokens = _tokens(doc)
  for i, token in enumerate(tokens):
    if token.type == "heading_open":
      name = slug(tokens[i + 1].content)
      count = seen.get(name, 0)
      seen[name] = count + 1
      out.add(name if not count else "%s-%d" % (name, count))
  return out


# Paths: a top folder of the checkout, then path characters. Placeholders
# (<...>, {...}, *, $) and elisions make a path a pattern: not checked.
PATH = re.compile(r"(?<![\w./*>}$-])((?:%s)/[\w./-]*[\w/])" % "|".join(
    TOP_FOLDERS))
GIN_FILE = re.compile(r"(?<![\w./*>}$-])((?:(?:%s)/)?[\w.-]+\.gin)\b" %
                      "|".join(GIN_FOLDERS))
MODULE = re.compile(r"(?<![\w./*>}$-])((?:mtf_synthesizer|t5_tasks)"
                    r"(?:\.[A-Za-z_]\w*)+)")
COMMAND = re.compile(r"(?<![\w./*>}$-])(mtf-synthesizer-[a-z0-9-]*[a-z0-9])")


def _is_pattern(text: str, end: int) -> bool:
  return text[end:end + 1] in ("<", "{", "*", "$") or text[
      end:end + 3] == "..."


def names(doc: str) -> Iterator[Tuple[str, str]]:
  """(kind, name) for each name in a document's code."""
  for code in code_of(doc):
    for kind, pattern in (("path", PATH), ("gin", GIN_FILE),
                          ("module", MODULE), ("command", COMMAND)):
      for match in pattern.finditer(code):
        if not _is_pattern(code, match.end()):
          yield kind, match.group(1)


def _path_exists(name: str) -> bool:
  return name in NOT_IN_THE_CHECKOUT or os.path.exists(
      os.path.join(REPO, name.rstrip("/")))


def _gin_files() -> Set[str]:
  """The gin files the stock CLI finds: this package's, t5's, mesh's."""
  out = set()
  for folder in (gin_path.GIN_DIR, T5_GIN, MESH_GIN):
    for path in glob.glob(os.path.join(folder, "**", "*.gin"),
                          recursive=True):
      out.add(os.path.relpath(path, folder))
  return out


def _gin_exists(name: str) -> bool:
  """A gin file by its path on gin's search path, or by its name alone."""
  if name.startswith("gin/"):
    return _path_exists(name)
  if name in NOT_IN_THE_CHECKOUT:
    return True
  files = _gin_files()
  if "/" in name:
    return name in files
  return name in {os.path.basename(f) for f in files}


def _gin_configurable(name: str) -> bool:
  """A gin configurable (`mtf_synthesizer.vanilla_to_synthesizer`), or one
  and a parameter of it."""
  registry = gin.config._REGISTRY  # pylint: disable=protected-access
  if registry.matching_selectors(name):
    return True
  selector, _, parameter = name.rpartition(".")
  if not registry.matching_selectors(selector):
    return False
  configurable = registry.get_match(selector)
  return parameter in inspect.signature(configurable.wrapped).parameters


def _module_exists(name: str) -> bool:
  """A module, or a module and a chain of its attributes; a gin name; a
  file of the checkout."""
  if _path_exists(name) or _gin_configurable(name):
    return True
  parts = name.split(".")
  for i in range(len(parts), 0, -1):
    module = ".".join(parts[:i])
    try:
      found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
      found = None
    if found is None:
      continue
    value = importlib.import_module(module)
    if value.__name__ != module:
      return False  # a former path, kept working by an alias
    for j, attribute in enumerate(parts[i:]):
      if hasattr(value, attribute):
        value = getattr(value, attribute)
        if inspect.ismodule(value):
          return False  # a module under another name: a former path
      elif callable(value) and j == len(parts) - i - 1:
        # A gin binding's parameter: `module.function.parameter`.
        return attribute in inspect.signature(value).parameters
      else:
        return False
    return True
  return False


def installed_commands() -> List[str]:
  """setup.py's console scripts, by name."""
  setup = _read("setup.py")
  block = re.search(r'"console_scripts": \[(.*?)\]', setup, re.S).group(1)
  return re.findall(r'"(mtf-synthesizer-[\w-]+)=', block)


CHECKS = {"path": _path_exists, "gin": _gin_exists,
          "module": _module_exists,
          "command": lambda name: name in installed_commands()}


@pytest.mark.parametrize("doc", documents())
def test_every_name_in_the_code_exists(doc):
  missing = sorted({"%s %s" % (kind, name) for kind, name in names(doc)
                    if not CHECKS[kind](name)})
  assert not missing, "%s names what does not exist:\n%s" % (
      doc, "\n".join(missing))


# Repository paths that the code's text names without holding them.
NOT_IN_THE_CODE_CHECKOUT = {
    # transformers' own test files, in the release's tests/ folder.
    "tests/test_modeling_common.py", "tests/test_configuration_common.py",
    "tests/generation/test_utils.py",
}
_CODE_PATH = re.compile(
    r"\b(?:%s)/[\w./-]*\w\.(?:md|py|gin|json|lock|txt)\b" % "|".join(
        TOP_FOLDERS))


def code_files() -> List[str]:
  """The repository's Python files (packages, tools, tests, workbench)."""
  found = ["setup.py", "_mtf_synthesizer_hooks.py",
           "_mtf_synthesizer_commands.py"]
  for top in ("mtf_synthesizer", "t5_tasks", "tools", "tests", "workbench"):
    for path in sorted(glob.glob(os.path.join(REPO, top, "**", "*.py"),
                                 recursive=True)):
      relative = os.path.relpath(path, REPO)
      if not relative.startswith(os.path.join("tests", "transformers_tests")):
        found.append(relative)
  return found


def test_the_code_names_existing_files():
  """A docstring or comment that points to a page or a module names one."""
  missing = []
  for path in code_files():
    for name in sorted(set(_CODE_PATH.findall(_read(path)))):
      if name not in NOT_IN_THE_CODE_CHECKOUT and not os.path.exists(
          os.path.join(REPO, name)):
        missing.append("%s: %s" % (path, name))
  assert not missing, "\n".join(missing)


@pytest.mark.parametrize("doc", documents())
def test_every_relative_link_and_anchor_exists(doc):
  problems = []
  for link in links_of(doc):
    if re.match(r"[a-z]+:", link):
      continue  # https:, mailto:
    path, _, anchor = link.partition("#")
    target = os.path.normpath(os.path.join(os.path.dirname(doc), path)) \
        if path else doc
    if not os.path.exists(os.path.join(REPO, target)):
      problems.append("%s: no such file" % link)
    elif anchor and target.endswith(".md") and anchor not in anchors_of(
        target):
      problems.append("%s: %s has no heading #%s" % (link, target, anchor))
  assert not problems, "%s:\n%s" % (doc, "\n".join(problems))


def test_the_index_lists_every_page():
  index = "docs/README.md"
  listed = {os.path.normpath(os.path.join("docs", l.partition("#")[0]))
            for l in links_of(index) if not re.match(r"[a-z]+:", l)}
  pages = {os.path.relpath(p, REPO) for p in glob.glob(
      os.path.join(REPO, "docs", "**", "*.md"), recursive=True)}
  pages.discard(index)
  assert pages - listed == set(), "pages the index does not list"


def _counts(text: str, noun: str) -> List[int]:
  """Every count written as a word before `noun` (e.g. "ten variants")."""
  words = re.findall(r"\b(\w+) %s\b" % noun, " ".join(text.split()))
  return [NUMBERS[w] for w in words if w in NUMBERS]


def test_readme_counts_the_installed_commands():
  readme = _read("README.md")
  commands = installed_commands()
  assert _counts(readme, "commands") == [len(commands)]
  rows = re.findall(r"^\| `(mtf-synthesizer-[\w-]+)` \|", readme, re.M)
  assert rows == commands


def test_readme_counts_the_variants():
  readme = _read("README.md")
  counts = _counts(readme, "variants")
  assert counts and set(counts) == {len(attentions.VARIANTS)}, counts


def test_the_licence_and_the_citation_are_the_packages():
  """LICENSE is setup.py's licence; CITATION.cff cites the README's paper."""
  import yaml  # pylint: disable=g-import-not-at-top
  licence = _read("LICENSE").split()
  assert licence[:4] == ["Apache", "License", "Version", "2.0,"]
  assert re.search(r'license="Apache 2\.0"', _read("setup.py"))
  citation = yaml.safe_load(_read("CITATION.cff"))
  assert citation["license"] == "Apache-2.0"
  assert citation["version"] == re.search(r'version="([^"]+)"',
                                          _read("setup.py")).group(1)
  paper = citation["preferred-citation"]
  readme = " ".join(_read("README.md").split())
  assert "[*%s*](%s)" % (paper["title"], paper["url"]) in readme
