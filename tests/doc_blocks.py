# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The code blocks of README.md and docs/*.md, and the commands in them.

The documents are parsed as CommonMark (markdown-it), so every fenced or
indented code block is found, a new one included, without a list to keep.
A block's text is cut into logical lines (backslash continuations joined);
a logical line is a shell command when its first word, after any
`NAME=value` assignments, names a program of PROGRAMS (by its last path
part, so `.venv/bin/t5_mesh_transformer` is the stock CLI), and `&&` joins
several. A line that starts with a flag (`--...`) continues the last
stock-CLI command of its document (the quickstart appends its evaluation
and decoding flags so). Any other line is text: a shell block (`sh`,
`bash`, `shell`) may hold none, an unlabelled block may (output, a
diagram).

Tests take commands from here rather than copying them, and change them
only through `substituted`, whose every replacement must be found: a test
then fails when the document changes under it.
"""

import dataclasses
import glob
import os
import re
import shlex
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from markdown_it import MarkdownIt

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = "t5_mesh_transformer"
SHELL_LANGUAGES = ("sh", "bash", "shell")
# Programs whose lines are commands, by the last part of their path (any
# `python`, `python3`, `python3.11` too, see `is_python`).
# The package's installed commands (setup.py's console scripts), each with
# the checkout's script of the same name in tools/.
INSTALLED = ("mtf-synthesizer-export-hf", "mtf-synthesizer-from-t5",
             "mtf-synthesizer-tpu-job",
             "mtf-synthesizer-convert-release-checkpoint",
             "mtf-synthesizer-flax-from-mesh", "mtf-synthesizer-jax-train")
PROGRAMS = (CLI, "make", "cd", "git", "gcloud", "tensorboard", "docker",
            "curl", "torchrun", "run_gpu_checks.sh", "pip", "sudo",
            "tar") + INSTALLED
ELISION = "..."


def documents() -> List[str]:
  """README.md and docs/*.md, repository-relative, in order."""
  docs = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
  return ["README.md"] + [os.path.relpath(d, REPO) for d in docs]


def tool_of(program: str) -> Optional[str]:
  """The checkout's script of an installed command, repository-relative.

  Args:
    program: a program as written (any path).

  Returns:
    `tools/<name>.py` for a command of INSTALLED, else None.
  """
  name = os.path.basename(program)
  if name not in INSTALLED:
    return None
  return "tools/%s.py" % name[len("mtf-synthesizer-"):].replace("-", "_")


def is_python(program: str) -> bool:
  """Whether a program path names a Python interpreter."""
  return re.fullmatch(r"python(3(\.\d+)?)?", os.path.basename(program)) \
      is not None


@dataclasses.dataclass(frozen=True)
class Block:
  """A code block of a document.

  Attributes:
    doc: the document, repository-relative.
    line: the document's line (1-based) of the block's first text line.
    lang: the fence's language ("" for none or an indented block).
    text: the block's text.
  """
  doc: str
  line: int
  lang: str
  text: str

  @property
  def where(self) -> str:
    return "%s:%d" % (self.doc, self.line)


@dataclasses.dataclass(frozen=True)
class Command:
  """A shell command of a block, as written.

  Attributes:
    block: the block it is in.
    line: the document's line (1-based) where it starts.
    env: its `NAME=value` assignments, in order.
    argv: the program as written and its arguments, `...` left out.
    elided: whether `...` stood for left-out arguments.
    cwd: the directory it runs in, relative to the repository, from the
      block's `cd` commands before it ("" for the top).
    continues: for a line of flags, the stock-CLI command it continues
      (None: a command of its own, or flags that continue no command).
  """
  block: Block
  line: int
  env: Tuple[Tuple[str, str], ...]
  argv: Tuple[str, ...]
  elided: bool = False
  cwd: str = ""
  continues: Optional["Command"] = None

  @property
  def where(self) -> str:
    return "%s:%d" % (self.block.doc, self.line)

  @property
  def is_flags(self) -> bool:
    """Whether this is a line of flags (it has no program of its own)."""
    return self.argv[0].startswith("--")

  @property
  def program(self) -> str:
    """The program's name: the last part of its path; CLI for flags."""
    return CLI if self.is_flags else os.path.basename(self.argv[0])

  @property
  def text(self) -> str:
    """The command on one line, for messages."""
    return " ".join(shlex.quote(a) for a in self.argv)

  def full_argv(self) -> List[str]:
    """The whole command line: a line of flags after what it continues."""
    if not self.is_flags:
      return list(self.argv)
    head = self.continues.full_argv() if self.continues else [CLI]
    return head + list(self.argv)

  def full_env(self) -> Dict[str, str]:
    """The environment assignments, those of the continued command first."""
    env = self.continues.full_env() if self.continues else {}
    env.update(self.env)
    return env

  def values(self, flag: str) -> List[str]:
    """The values of `--flag=value` and `--flag value` in the whole line."""
    argv = self.full_argv()
    out = []
    for i, arg in enumerate(argv):
      if arg.startswith("--%s=" % flag):
        out.append(arg.split("=", 1)[1])
      elif arg == "--" + flag and i + 1 < len(argv) and not argv[
          i + 1].startswith("--"):
        out.append(argv[i + 1])
    return out

  def flag_names(self) -> List[str]:
    """The names of the `--flags` of the whole line."""
    return [a[2:].split("=", 1)[0] for a in self.full_argv()
            if a.startswith("--")]

  def substituted(self, replacements: Mapping[str, str]) -> List[str]:
    """The whole argv with the replacements made (see `substitute`)."""
    return substitute(self.full_argv(), replacements)


def read_blocks(docs: Optional[Sequence[str]] = None) -> List[Block]:
  """Every code block of the documents, in order.

  Args:
    docs: repository-relative paths (default: `documents()`).

  Returns:
    The blocks.
  """
  parser = MarkdownIt("commonmark")
  out = []
  for doc in documents() if docs is None else docs:
    with open(os.path.join(REPO, doc)) as f:
      tokens = parser.parse(f.read())
    for token in tokens:
      if token.type == "fence":
        out.append(Block(doc, token.map[0] + 2,
                         token.info.strip().split(" ")[0], token.content))
      elif token.type == "code_block":
        out.append(Block(doc, token.map[0] + 1, "", token.content))
  return out


def _open_quote(text: str) -> bool:
  """Whether a command's text ends inside a quoted string."""
  try:
    shlex.split(text, comments=True)
  except ValueError:
    return True
  return False


def logical_lines(text: str) -> List[Tuple[int, str]]:
  """The logical lines of a block's text.

  Backslash continuations are joined with a space; a command whose quoted
  string spans lines (curl's `-d '{...}'`) takes the next lines, joined with
  a newline, until the quote closes.

  Args:
    text: the block's text.

  Returns:
    [(offset of the first physical line in the block, text)].
  """
  out, current, start = [], "", 0
  for offset, raw in enumerate(text.split("\n")):
    line = raw.rstrip()
    if not current:
      start = offset
    elif not current.endswith(" "):
      current += "\n"
    if line.endswith("\\"):
      current += line[:-1].strip() + " "
      continue
    current += line.strip()
    if _starts_command(current) and _open_quote(current):
      continue
    if current.strip():
      out.append((start, current.strip()))
    current = ""
  if current.strip():
    out.append((start, current.strip()))
  return out


def _split_words(line: str) -> Optional[List[List[str]]]:
  """The `&&`-separated word lists of a line, or None if it is not shell."""
  try:
    words = shlex.split(line, comments=True)
  except ValueError:  # unbalanced quotes: prose
    return None
  parts, current = [], []
  for word in words:
    if word == "&&":
      parts.append(current)
      current = []
    else:
      current.append(word)
  return [p for p in parts + [current] if p]


def _is_command(words: Sequence[str]) -> bool:
  """Whether words (environment assignments removed) are a command."""
  return (words[0].startswith("--") or
          os.path.basename(words[0]) in PROGRAMS or is_python(words[0]))


def _starts_command(text: str) -> bool:
  """Whether text starts with a command (after any assignments)."""
  words = [w for w in text.split() if not re.fullmatch(
      r"[A-Z_][A-Z0-9_]*=\S*", w)]
  return bool(words) and _is_command(words)


def parse_block(block: Block, last_cli: Optional[Command] = None
                ) -> Tuple[List[Command], List[str]]:
  """The commands of a block, and its lines that are not commands.

  Args:
    block: the block.
    last_cli: the document's last stock-CLI command before the block (a
      line of flags continues it).

  Returns:
    (commands, text lines).
  """
  commands, text = [], []
  cwd = ""
  for offset, line in logical_lines(block.text):
    parts = _split_words(line)
    if parts is None:
      text.append(line)
      continue
    for words in parts:
      env = []
      while len(words) > 1 and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        env.append(tuple(words.pop(0).split("=", 1)))
      if not _is_command(words):
        text.append(line)
        break
      argv = tuple(w for w in words if w != ELISION)
      command = Command(block, block.line + offset, tuple(env), argv,
                        elided=ELISION in words, cwd=cwd,
                        continues=last_cli if words[0].startswith("--")
                        else None)
      commands.append(command)
      if command.program == "cd" and len(argv) == 2:
        cwd = os.path.normpath(os.path.join(cwd, argv[1]))
      if command.program == CLI and not command.is_flags:
        last_cli = command
  return commands, text


def commands(blocks: Optional[Sequence[Block]] = None) -> List[Command]:
  """Every command of the blocks (default: of every document), in order."""
  out = []
  last_cli: Dict[str, Command] = {}
  for block in read_blocks() if blocks is None else blocks:
    found, _ = parse_block(block, last_cli.get(block.doc))
    for command in found:
      out.append(command)
      if command.program == CLI and not command.is_flags:
        last_cli[block.doc] = command
  return out


def find(doc: str, *markers: str,
         program: Optional[str] = None) -> Command:
  """The one command of a document whose own words hold every marker.

  Args:
    doc: the document, repository-relative.
    *markers: substrings of the command's line (for a line of flags, of the
      flags, not of the command they continue).
    program: if given, the command's program (e.g. CLI).

  Returns:
    The command.

  Raises:
    AssertionError: none or several match (the document changed).
  """
  found = [c for c in commands(read_blocks([doc]))
           if (program is None or c.program == program) and
           all(m in " ".join(c.argv) for m in markers)]
  assert len(found) == 1, "%s: %d commands with %s, not one: %s" % (
      doc, len(found), markers, [c.where for c in found])
  return found[0]


def find_block(doc: str, lang: str, marker: str) -> Block:
  """The one block of a document in `lang` whose text holds `marker`."""
  found = [b for b in read_blocks([doc])
           if b.lang == lang and marker in b.text]
  assert len(found) == 1, "%s: %d %s blocks with %r, not one" % (
      doc, len(found), lang, marker)
  return found[0]


def substitute(argv: Sequence[str], replacements: Mapping[str, str]
               ) -> List[str]:
  """Arguments with text replaced; each text must be in one argument.

  Args:
    argv: the arguments.
    replacements: old text -> new text, applied in order, each inside the
      one argument that holds it.

  Returns:
    The new arguments.

  Raises:
    AssertionError: a text is in no argument or in several (the document
      changed: the substitution must follow it).
  """
  out = list(argv)
  for old, new in replacements.items():
    hits = [i for i, arg in enumerate(out) if old in arg]
    assert len(hits) == 1, "%r is in %d arguments of %s, not one" % (
        old, len(hits), " ".join(argv))
    out[hits[0]] = out[hits[0]].replace(old, new)
  return out


def substitute_text(text: str, replacements: Mapping[str, str]) -> str:
  """Text with each old text, found exactly once, replaced (in order)."""
  for old, new in replacements.items():
    assert text.count(old) == 1, "%r is %d times in:\n%s" % (
        old, text.count(old), text)
    text = text.replace(old, new)
  return text


def drop(argv: Sequence[str], *markers: str) -> List[str]:
  """Arguments without those that hold a marker; each marker must match."""
  for marker in markers:
    assert any(marker in a for a in argv), (marker, argv)
  return [a for a in argv if not any(m in a for m in markers)]


def to_stock_command(argv: Sequence[str], env: Mapping[str, str]):
  """A stock-CLI argv as a `commands.Command` (the same flags, in order).

  The CLI's repeated flags keep their order; the others go to `flags`.

  Args:
    argv: the program (any path of the CLI) and its flags.
    env: environment assignments.

  Returns:
    A `commands.Command` that runs the installed CLI.
  """
  from mtf_synthesizer.jobs import commands  # pylint: disable=g-import-not-at-top
  assert os.path.basename(argv[0]) == CLI, argv
  fields = {"model_dir": [], "module_import": [], "gin_file": [],
            "gin_param": []}
  flags = []
  for arg in argv[1:]:
    assert arg.startswith("--"), "not a flag: %r" % arg
    name = arg[2:].split("=", 1)[0]
    if name in fields and "=" in arg:
      fields[name].append(arg.split("=", 1)[1])
    else:
      flags.append(arg)
  (model_dir,) = fields["model_dir"]
  return commands.Command(
      model_dir, fields["gin_file"], fields["gin_param"],
      module_imports=fields["module_import"], flags=flags, env=dict(env))
