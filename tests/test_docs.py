# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every command and snippet of README.md and docs/*.md works as written.

The code blocks are read from the documents (`doc_blocks`: a new block is
found without a list to update). Every command is checked by name:

  * the stock CLI's: its flags parse as the CLI's own absl flags, its
    `--module_import`s import, its gin files are on the CLI's search path
    (this package's gin folder, t5's, any `--gin_location_prefix`), its gin
    files and bindings parse as the CLI parses them (mesh's defaults first,
    every configurable of mesh, t5, this package and t5_tasks registered,
    unknown names refused) and its MIXTURE_NAME is a registered task or
    mixture;
  * a tool's: the script exists and its own argument parser accepts the
    arguments; `make`'s: the targets and variables are the Makefile's;
    `git worktree add`'s commit exists; files named exist; environment
    variables are read by the code.

Then every command that can run offline runs (`pytest.mark.slow`), with no
other change than the substitutions listed beside it, which the documents
state (a temporary directory, a few steps, no TPU, a tiny local model in
place of a released one): here docs/variants.md's training command, the
`make demo` recipe in a short form, the serving export and its decoding
(CLI and Python), docs/finetuning.md's Python API block, the attention
pictures and the TPU tool's dry runs; the quickstart's, the baselines', the
export commands and the README's recipes run in the tests that already
trained those models, or in tests/test_recipes.py
(RUN_ELSEWHERE). A command that does not run says why (`obstacle`), and
one that could but is run by no test fails `test_every_command_runs_or_
says_why`.
"""

import argparse
import concurrent.futures
import contextlib
import copy
import dataclasses
import importlib.util
import io
import json
import math
import os
import re
import shlex
import socket
import subprocess
import sys
from typing import Callable, Dict, List, Optional, Sequence
from unittest import mock

from absl import flags
import gin
from mesh_tensorflow.transformer import transformer as mtf_transformer
import pytest
import seqio
import t5.models
from t5.models import mesh_transformer
# pylint: disable=unused-import
from t5.models import mesh_transformer_main  # defines the CLI's flags
# pylint: enable=unused-import

import conftest
import doc_blocks
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.stock_cli import gin_path
import t5_tasks  # pylint: disable=unused-import  (registers the tasks)
from t5_tasks import pydocs

BLOCKS = doc_blocks.read_blocks()
COMMANDS = doc_blocks.commands(BLOCKS)
CLI = doc_blocks.CLI
# The gin folders the stock CLI searches (`--gin_location_prefix` adds
# more): t5's, which it adds itself, and this package's, which
# `--module_import=mtf_synthesizer` adds. mesh's defaults.gin it parses by
# its path.
T5_GIN = os.path.join(os.path.dirname(t5.models.__file__), "gin")
CLI_GIN_FOLDERS = (gin_path.GIN_DIR, T5_GIN)
MESH_DEFAULTS = os.path.join(os.path.dirname(mtf_transformer.__file__), "gin",
                             "defaults.gin")
# Programs whose commands are parsed here and never run, and why.
EXTERNAL = {
    "cd": "changes the directory of the commands after it",
    "git": "makes a work tree of an earlier commit",
    "gcloud": "creates a Cloud TPU (a Google Cloud project)",
    "tensorboard": "serves TensorBoard until it is stopped",
    "docker": "needs a Docker engine and TensorFlow Serving's image",
    "curl": "needs a running TensorFlow Serving server",
    "run_gpu_checks.sh": "the GPU checks: minutes of a CUDA device (its "
                         "tools run at tiny dims in their own tests)",
    "pip": "installs packages from a package index",
    "sudo": "changes the machine's system packages",
    "tar": "unpacks the checkout on a TPU VM (make test-tpu-vm replays the "
           "installation after it)",
}
# Tools whose commands are parsed here and not run, and why.
TOOLS_NOT_RUN = {
    "tools/reproduce.py": "the reproduction study: 165 runs, about two "
                          "hours (tests/test_reproduction.py runs the tool "
                          "on tiny settings)",
    "tools/benchmark.py": "builds every model at several shapes: minutes "
                          "(--quick) to 38 minutes (tests/test_benchmark.py "
                          "runs the quick reference block)",
    "tools/mesh_comm_audit.py": "lowers every variant on two meshes "
                                "(tests/test_mesh_comm.py)",
    "tools/inductor_census.py": "compiles each model's training step "
                                "(minutes a model on a CPU; "
                                "tests/test_torch_inductor_census.py counts "
                                "a small function's)",
    "tools/benchmark_torch.py": "times every variant and transformers' T5 "
                                "(a minute or more; "
                                "tests/test_torch_benchmark.py runs it at "
                                "tiny dims)",
    "tools/mesh_training_reference.py": "two stock-CLI runs per case "
                                        "(minutes; tests/test_mesh_training_"
                                        "reference.py reruns the CLI from "
                                        "the kept checkpoints)",
    "tools/benchmark_jax.py": "times the Flax, mesh and PyTorch training "
                              "steps of five variants (minutes; "
                              "tests/test_jax_benchmark.py runs it at tiny "
                              "dims)",
    "tools/benchmark_jax_train.py": "trains with the stock CLI and the JAX "
                                    "trainer, four runs (minutes; "
                                    "tests/test_jax_train_benchmark.py "
                                    "checks its reading and report on "
                                    "canned event files)",
}
# Tools run in this process: they only print (no network, no subprocess).
IN_PROCESS_TOOLS = ("tools/tpu_job.py", "tools/paper_commands.py")
# Commands that other test modules run, as their documents give them.
RUN_ELSEWHERE = {
    ("docs/quickstart.md", "synthesizer/random.gin"): "test_cli.py",
    ("docs/quickstart.md", "perplexity_eval.gin"): "test_cli.py",
    ("docs/quickstart.md", "infer.gin"): "test_cli.py",
    ("docs/baselines.md", "baselines/lightweight_conv.gin"):
        "test_baselines_cli.py",
    ("docs/baselines.md", "baselines/linformer.gin"): "test_baselines_cli.py",
    ("docs/export.md", "--mode=export_predict"): "test_export.py",
    ("docs/export.md", "saved_model_predict.py"): "test_export.py",
    ("README.md", "mtf-synthesizer-export-hf"): "test_hf_export.py",
    ("README.md", "synthesizer/init_from_t5.gin"): "test_recipes.py",
    ("README.md", "rte_dense_vanilla/operative_config.gin"): "test_recipes.py",
    ("docs/pytorch.md", "train_fsdp.py"): "test_torch_training.py",
    ("docs/export.md", "from_t5.py"): "test_from_t5_command.py",
    ("docs/pytorch.md", "from_t5.py"): "test_from_t5_command.py",
    ("docs/pytorch_benchmark.md", "check_torch_device.py"):
        "test_torch_device_check.py",
    ("docs/pytorch_benchmark.md", "compare_cuda_choices.py --device cpu "
     "--batch 2"): "test_torch_cuda_choices.py",
    ("docs/pytorch_benchmark.md", "--choices routes"):
        "test_torch_cuda_choices.py",
    ("docs/development.md", "tools/mesh_reference.py"):
        "test_mesh_reference.py",
    ("docs/jax.md", "t5.1.1-encdec-t5_attention"): "jax/test_jax_docs.py",
    ("docs/jax_training.md", "flax/train/tiny_offline.gin"):
        "jax/test_jax_docs.py",
}
# Commands run here (`ran`, below), by the same markers.
RUN_HERE = (
    ("README.md", "make demo"),
    ("docs/quickstart.md", "make demo"),
    ("docs/variants.md", "--model_dir=/tmp/syn"),
    ("docs/serving.md", "--mode=export_predict"),
    ("docs/serving.md", "saved_model_predict.py"),
    ("docs/analysis.md", "attention_pictures.py"),
)
# The Python blocks run here, by a marker of each.
PYTHON_RUNS = (("docs/finetuning.md", "model.finetune("),
               ("docs/serving.md", "model.export("))
# Python blocks that other test modules run, where their models are.
PYTHON_RUN_ELSEWHERE = {
    ("docs/jax.md", "checkpointing.restore("): "jax/test_jax_docs.py",
    ("docs/jax.md", "decoding.beam_search("): "jax/test_jax_docs.py",
    ("README.md", "model.generate("): "test_hf_export.py",
    ("docs/export.md", "mesh_optimizer(model"): "test_hf_export.py",
    ("docs/export.md", "model, info = from_t5("): "test_from_t5_command.py",
    ("docs/pytorch.md", "torch.onnx.export("): "test_onnx.py",
    ("docs/export.md", "tf_format.load_checkpoint("):
        "test_tf_checkpoint_reader.py",
    ("docs/development.md", "flax_names.flax_params("):
        "test_flax_names.py",
}


def _line(command: doc_blocks.Command) -> str:
  return " ".join(command.full_argv())


def _script(command: doc_blocks.Command) -> Optional[str]:
  """A Python command's script, repository-relative (None for `-m`)."""
  argv = command.full_argv()
  if doc_blocks.tool_of(argv[0]):
    return doc_blocks.tool_of(argv[0])
  if not doc_blocks.is_python(argv[0]) or len(argv) < 2 or argv[1] == "-m":
    return None
  path = _repo_file(argv[1], command.cwd)
  return os.path.relpath(path, conftest.REPO) if path else argv[1]


def _repo_file(path: str, cwd: str) -> Optional[str]:
  """The repository's file that a command's relative path names, or None.

  A path that leaves the repository (a work tree of it beside it, or the
  checkout by its folder's name, as docs/reproduction.md writes them) is
  matched from its first part that is an entry of the repository's top.

  Args:
    path: the path as written.
    cwd: the command's directory, relative to the repository.

  Returns:
    The absolute path of the existing file, or None.
  """
  full = os.path.normpath(os.path.join(cwd, path))
  if not full.startswith(".."):
    candidate = os.path.join(conftest.REPO, full)
    return candidate if os.path.exists(candidate) else None
  parts = full.split(os.sep)
  top = set(os.listdir(conftest.REPO))
  for i, part in enumerate(parts):
    candidate = os.path.join(conftest.REPO, *parts[i:])
    if part in top and os.path.exists(candidate):
      return candidate
  return None


def obstacle(command: doc_blocks.Command) -> Optional[str]:
  """Why a command cannot run offline here, or None if it can.

  Args:
    command: the command.

  Returns:
    The reason, or None.
  """
  argv = command.full_argv()
  line = " ".join(argv)
  if command.program in EXTERNAL:
    return EXTERNAL[command.program]
  if command.elided:
    return "an outline: `...` stands for arguments left out"
  if command.is_flags and command.continues is None:
    return "bindings to add to a training command"
  if command.program == "make" and ({"test", "test-tpu-vm", "test-jax"} &
                                    set(argv[1:])):
    return "the test suite itself"
  if argv[0].startswith(".venv-tpu/") and "tpu" not in command.flag_names():
    return ("the TPU VM's installation: make test-tpu-vm replays it "
            "(.ci/tpu_vm_leg.py)")
  if command.program == "make" and "jax-env" in argv[1:]:
    return "builds .venv-jax (make test-jax builds it first)"
  if command.program == "make" and "install" in argv[1:]:
    return "reinstalls the package into .venv (make test installs it first)"
  if doc_blocks.is_python(argv[0]) and argv[1:2] == ["-m"]:
    return "runs a module of this test suite"
  if "tpu" in command.flag_names() or "--platform=tpu" in argv:
    return "runs on a Cloud TPU"
  if re.search(r"\bgpu:\d", line):
    return "needs GPUs"
  if "gs://" in line:
    return "reads or writes a Cloud Storage bucket"
  return TOOLS_NOT_RUN.get(_script(command))


def _runs_in_process(command: doc_blocks.Command) -> bool:
  script = _script(command)
  return script in IN_PROCESS_TOOLS and (
      script != "tools/tpu_job.py" or "--dry_run" in command.argv)


def _matches(command: doc_blocks.Command, key) -> bool:
  """Whether a command (its own words, not what it continues) is `key`'s."""
  doc, marker = key
  return command.block.doc == doc and marker in " ".join(command.argv)


def _ids(found: Sequence[doc_blocks.Command]) -> List[str]:
  return ["%s-%s" % (c.where, c.program) for c in found]


# --- the documents' blocks -------------------------------------------------


def test_the_parser_finds_the_documents_commands():
  # The parser's own check: what the documents hold, by kind.
  programs = {c.program for c in COMMANDS}
  assert {CLI, "make", "python", "git", "docker", "curl"} <= programs
  assert len([c for c in COMMANDS if c.program == CLI]) >= 15
  assert any(c.is_flags and c.continues for c in COMMANDS)
  assert {b.lang for b in BLOCKS} >= {"sh", "python", ""}


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in
                                   doc_blocks.SHELL_LANGUAGES],
                         ids=lambda b: b.where)
def test_shell_blocks_hold_only_commands(block):
  """A shell line whose program this test does not know is an error."""
  _, text = doc_blocks.parse_block(block)
  assert not text, ("%s: lines that are no command this test knows (add "
                    "the program to doc_blocks.PROGRAMS and a check here):"
                    "\n%s" % (block.where, "\n".join(text)))


def test_every_command_runs_or_says_why():
  runs = dict(RUN_ELSEWHERE)
  runs.update({key: "test_docs.py" for key in RUN_HERE})
  unexplained = []
  for command in COMMANDS:
    ran = [key for key in runs if _matches(command, key)]
    if not ran and not _runs_in_process(command) and not obstacle(command):
      unexplained.append("%s: %s" % (command.where, _line(command)))
  assert not unexplained, (
      "commands that run offline but no test runs (add them to test_docs' "
      "runs):\n" + "\n".join(unexplained))
  for key, module in runs.items():
    found = [c.where for c in COMMANDS if _matches(c, key)]
    assert len(found) == 1, (key, found)
    with open(os.path.join(conftest.REPO, "tests", module)) as f:
      assert key[0] in f.read(), (module, key)


def test_every_python_block_is_run():
  runs = list(PYTHON_RUNS) + list(PYTHON_RUN_ELSEWHERE)
  for block in BLOCKS:
    if block.lang == "python":
      compile(block.text, block.where, "exec")
      assert [k for k in runs if k[0] == block.doc and
              k[1] in block.text], "%s: no test runs it" % block.where
  for doc, marker in runs:
    doc_blocks.find_block(doc, "python", marker)
  for (doc, marker), module in PYTHON_RUN_ELSEWHERE.items():
    with open(os.path.join(conftest.REPO, "tests", module)) as f:
      text = f.read()
    assert doc in text and marker in text, (module, doc, marker)


# --- names: the stock CLI --------------------------------------------------


def _cli_problems(command: doc_blocks.Command) -> List[str]:
  """What in a stock-CLI command names nothing real."""
  argv = [CLI] + command.full_argv()[1:]
  parsed = copy.deepcopy(flags.FLAGS)
  try:
    rest = parsed(argv)
  except flags.Error as e:
    return ["the stock CLI refuses it: %s" % e]
  problems = []
  if rest[1:]:
    problems.append("arguments the CLI does not take: %s" % rest[1:])
  for module in parsed.module_import or []:
    if importlib.util.find_spec(module) is None:
      problems.append("--module_import=%s: no such module" % module)
  folders = list(CLI_GIN_FOLDERS) + list(parsed.gin_location_prefix)
  files = [f for f in parsed.gin_file or [] if "://" not in f]
  for name in files:
    if not any(os.path.isfile(os.path.join(d, name)) for d in folders):
      problems.append("--gin_file=%s: not in %s" % (name, folders))
  if problems:
    return problems
  gin.clear_config()
  try:
    for folder in folders:
      gin.add_config_file_search_path(folder)
    gin.parse_config_file(MESH_DEFAULTS)
    gin.parse_config_files_and_bindings(
        files, parsed.gin_param or [],
        skip_unknown=mesh_transformer.DEPRECATED_GIN_REFERENCES,
        finalize_config=False)
    try:
      mixture = gin.query_parameter("%MIXTURE_NAME")
    except ValueError:
      mixture = None
    if mixture is not None:
      seqio.get_mixture_or_task(mixture)
  except (ValueError, KeyError, OSError, ImportError) as e:
    problems.append("gin: %s: %s" % (type(e).__name__, e))
  finally:
    gin.clear_config()
  return problems


CLI_COMMANDS = [c for c in COMMANDS if c.program == CLI]


@pytest.mark.parametrize("command", CLI_COMMANDS, ids=_ids(CLI_COMMANDS))
def test_cli_command_names_real_flags_files_bindings_and_tasks(command):
  problems = _cli_problems(command)
  assert not problems, "%s: %s\n%s" % (command.where, _line(command),
                                       "\n".join(problems))


# --- names: tools, make, git, files, environment ---------------------------


class _Parsed(Exception):
  """A tool's parser accepted its arguments (raised instead of running)."""


def _tool_problems(command: doc_blocks.Command) -> List[str]:
  """What in a `python ...` command names nothing real."""
  argv = command.full_argv()
  if argv[1:3] == ["-m", "pytest"]:
    files = [a for a in argv[3:] if a.endswith(".py")]
    return ["%s: no such test module" % f for f in files
            if not _repo_file(f, command.cwd)] + (
                [] if files else ["no test module named"])
  path = _repo_file(argv[1], command.cwd)
  if path is None:
    return ["%s: no such script" % argv[1]]
  err = io.StringIO()
  with contextlib.ExitStack() as stack:
    for name in ("parse_args", "parse_intermixed_args"):
      stack.enter_context(mock.patch.object(
          argparse.ArgumentParser, name,
          _parse_and_stop(getattr(argparse.ArgumentParser, name))))
    stack.enter_context(mock.patch.object(sys, "argv", [path] + argv[2:]))
    # Tools that switch TF to graph mode before main() (tools/benchmark.py)
    # must not switch this process: later tests need TF's eager default.
    stack.enter_context(mock.patch(
        "tensorflow.compat.v1.disable_v2_behavior", lambda: None))
    stack.enter_context(contextlib.redirect_stderr(err))
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    try:
      conftest.run_script(path)
    except _Parsed:
      return []
    except SystemExit as e:
      return ["%s refuses its arguments (exit %s): %s" % (
          argv[1], e.code, err.getvalue()[-1500:])]
  return ["%s did not parse its arguments with argparse: teach this test "
          "its parser" % argv[1]]


def _parse_and_stop(parse: Callable) -> Callable:
  """An argparse method that parses as `parse`, then raises `_Parsed`."""
  def parse_and_stop(parser, *args, **kwargs):
    raise _Parsed(parse(parser, *args, **kwargs))
  return parse_and_stop


def _make_problems(command: doc_blocks.Command) -> List[str]:
  with open(os.path.join(conftest.REPO, "Makefile")) as f:
    makefile = f.read()
  targets = set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", makefile, re.M))
  variables = set(re.findall(r"^([A-Z_]+)\s*[?:]?=", makefile, re.M))
  problems = []
  for arg in command.argv[1:]:
    if "=" in arg:
      if arg.split("=", 1)[0] not in variables:
        problems.append("make: no variable %s" % arg)
    elif arg not in targets:
      problems.append("make: no target %r (targets: %s)" % (
          arg, sorted(targets)))
  return problems


def _git_problems(command: doc_blocks.Command) -> List[str]:
  argv = command.argv
  if argv[1:2] == ("archive",):  # the tracked files of a commit
    return [] if argv[-1] == "HEAD" else ["git archive: not of HEAD"]
  if argv[1:3] != ("worktree", "add") or len(argv) != 5:
    return ["git %s: teach this test what to check" % " ".join(argv[1:])]
  if not os.path.isdir(os.path.join(conftest.REPO, ".git")):
    return []  # a source tree without history
  proc = subprocess.run(
      ["git", "-C", conftest.REPO, "cat-file", "-e", argv[4] + "^{commit}"],
      capture_output=True, text=True, check=False)
  return [] if proc.returncode == 0 else ["git: no commit %s" % argv[4]]


def _file_problems(command: doc_blocks.Command) -> List[str]:
  """Files that the command reads and the repository does not have."""
  problems = []
  for arg in command.full_argv()[1:]:
    value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg \
        else arg
    if (re.fullmatch(r"[\w.][\w./-]*\.(py|json|md)", value) and
        not _repo_file(value, command.cwd)):
      problems.append("%s: no such file" % value)
  return problems


def _source_text() -> str:
  """The package's, the tasks' and the tools' Python source."""
  paths = [os.path.join(conftest.REPO, "_mtf_synthesizer_hooks.py")]
  for folder in ("mtf_synthesizer", "t5_tasks", "tools"):
    for root, _, names in os.walk(os.path.join(conftest.REPO, folder)):
      paths += [os.path.join(root, n) for n in names if n.endswith(".py")]
  text = []
  for path in paths:
    with open(path) as f:
      text.append(f.read())
  return "\n".join(text)


def _env_problems(command: doc_blocks.Command, source: str) -> List[str]:
  return ["environment variable %s: the code never reads it" % name
          for name in command.full_env()
          if name != "PYTHONPATH" and name not in source]


def _torchrun_problems(command: doc_blocks.Command) -> List[str]:
  """torchrun's own options, then its script's as a `python` command's."""
  from torch.distributed import run  # pylint: disable=g-import-not-at-top
  err = io.StringIO()
  try:
    with contextlib.redirect_stderr(err):
      args = run.get_args_parser().parse_args(command.argv[1:])
  except SystemExit as e:
    return ["torchrun refuses its options (exit %s): %s" % (
        e.code, err.getvalue()[-1500:])]
  script = dataclasses.replace(command, argv=(
      "python", args.training_script, *args.training_script_args))
  return _tool_problems(script)


def _lock_version(lock: str, package: str) -> Optional[str]:
  """A package's version in a lock file (None: not there)."""
  with open(os.path.join(conftest.REPO, lock)) as f:
    found = re.search(r"^%s==([^ \\\n]+)" % re.escape(package), f.read(),
                      re.M)
  return found.group(1) if found else None


def _adds_jax_tpu(argv: Sequence[str]) -> bool:
  """Whether pip installs `jax[tpu]` alone, at the JAX lock's jax version.

  Over .venv-jax it adds the TPU runtime that jax names and keeps the
  lock's packages (docs/tpu.md): no --no-deps there.

  Args:
    argv: the pip command.

  Returns:
    True for `pip install "jax[tpu]==V"`, V the lock's jax.
  """
  wanted = "jax[tpu]==%s" % _lock_version("requirements-jax.lock", "jax")
  return [a for a in argv[2:] if not a.startswith("-")] == [wanted]


def _pip_problems(command: doc_blocks.Command) -> List[str]:
  """`pip install`: --no-deps (see the README), and its files exist."""
  argv = command.argv
  if argv[1:2] != ("install",):
    return ["pip %s: teach this test what to check" % " ".join(argv[1:])]
  problems = [] if "--no-deps" in argv or _adds_jax_tpu(argv) else [
      "pip install without --no-deps (the pins need it: README.md)"]
  for i, arg in enumerate(argv):
    if arg == "-r" and not _repo_file(argv[i + 1], command.cwd):
      problems.append("-r %s: no such file" % argv[i + 1])
    if arg == "." and not os.path.isfile(os.path.join(
        conftest.REPO, command.cwd, "setup.py")):
      problems.append(". is no package")
  return problems


_CHECKS: Dict[str, Callable[[doc_blocks.Command], List[str]]] = {
    "make": _make_problems,
    "pip": _pip_problems,
    "git": _git_problems,
    "torchrun": _torchrun_problems,
}


def _other_problems(command: doc_blocks.Command, source: str) -> List[str]:
  problems = _file_problems(command) + _env_problems(command, source)
  tool = doc_blocks.tool_of(command.argv[0])
  if tool:  # an installed command: its script's parser takes the arguments
    problems += _tool_problems(dataclasses.replace(
        command, argv=("python", tool) + command.argv[1:]))
  elif (command.argv[:3] == ("python3", "-m", "venv") or
        command.argv[:2] == (".venv-tpu/bin/python", "-c")):
    pass  # the TPU VM's installation, which make test-tpu-vm replays
  elif doc_blocks.is_python(command.argv[0]):
    problems += _tool_problems(command)
  elif command.program in _CHECKS:
    problems += _CHECKS[command.program](command)
  elif command.program not in EXTERNAL and command.program != CLI:
    problems.append("no check for %s: add one" % command.program)
  return problems


def test_other_commands_name_real_tools_flags_targets_and_files():
  source = _source_text()
  problems = []
  for command in COMMANDS:
    for problem in _other_problems(command, source):
      problems.append("%s: %s\n  %s" % (command.where, _line(command),
                                        problem))
  assert not problems, "\n".join(problems)


def test_quickstart_span_corruption_limit_is_the_longest_accepted():
  """docs/quickstart.md's longest pydocs_span_corruption input."""
  with open(os.path.join(conftest.REPO, "docs", "quickstart.md")) as f:
    limit = int(re.search(r"inputs longer than ([\d,]+) tokens for "
                          r"`pydocs_span_corruption`", f.read()).group(1)
                .replace(",", ""))
  extra_ids = 100
  assert pydocs.max_noise_spans(limit) <= extra_ids
  assert pydocs.max_noise_spans(limit + 1) > extra_ids


def test_make_demo_is_the_quickstarts_command():
  """docs/quickstart.md: `make demo  # = <command>` is the recipe."""
  block = doc_blocks.find_block("docs/quickstart.md", "sh", "make demo")
  shown = re.search(r"make demo\s+# = (.*)", block.text).group(1).strip()
  assert _make_demo_recipe() == shlex.split(shown)


def _make_demo_recipe(demo_dir: Optional[str] = None) -> List[str]:
  """`make demo`'s tools/demo.py line, from `make -n` (nothing runs)."""
  argv = ["make", "-n", "-C", conftest.REPO, "demo"]
  if demo_dir:
    argv.append("DEMO_DIR=" + demo_dir)
  proc = subprocess.run(argv, capture_output=True, text=True, check=True,
                        timeout=60)
  (line,) = [l for l in proc.stdout.splitlines() if "tools/demo.py" in l]
  return shlex.split(line)


# --- the tools that only print, in process ---------------------------------


IN_PROCESS = [c for c in COMMANDS if _runs_in_process(c)]


@pytest.mark.parametrize("command", IN_PROCESS, ids=_ids(IN_PROCESS))
def test_printing_tools_run_as_written(command, monkeypatch, capsys):
  def forbidden(*args, **kwargs):
    raise AssertionError("network or subprocess: %r" % (args,))
  for module, name in ((socket, "socket"), (socket, "create_connection"),
                       (subprocess, "Popen"), (subprocess, "run")):
    monkeypatch.setattr(module, name, forbidden)
  argv = command.full_argv()
  status = conftest.run_tool(os.path.basename(argv[1]), argv[2:])
  out = capsys.readouterr()
  assert status == 0, "%s\n%s" % (_line(command), out.err[-3000:])
  assert "t5_mesh_transformer" in out.out, out.out[-3000:]


# --- running the documents' offline commands -------------------------------


@dataclasses.dataclass
class Run:
  """What a documented command did: its text, status and output's tail."""
  what: str
  returncode: int
  output: str
  value: object = None

  def check(self) -> None:
    assert self.returncode == 0, "%s\nexit %d\n%s" % (
        self.what, self.returncode, self.output[-3000:])


def _run(argv: Sequence[str], env: Optional[Dict[str, str]] = None,
         cwd: str = conftest.REPO) -> Run:
  """Runs a command (stdout and stderr merged)."""
  proc = subprocess.run(list(argv), stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, errors="replace",
                        cwd=cwd, env=dict(os.environ, **(env or {})),
                        timeout=900, check=False)
  return Run(commands.format_command(argv), proc.returncode, proc.stdout)


def _saved_model(export_dir: str) -> str:
  (stamp,) = [d for d in os.listdir(export_dir) if d.isdigit()]
  return os.path.join(export_dir, stamp)


def _cli_argv(command: doc_blocks.Command,
              replacements: Dict[str, str]) -> List[str]:
  """A CLI command with the replacements, run by the installed CLI."""
  return [commands.cli_path()] + command.substituted(replacements)[1:]


def _python_block(block: doc_blocks.Block, replacements: Dict[str, str],
                  names: Dict[str, object], epilogue: str,
                  cwd: str) -> Run:
  """Runs a Python block with replacements, after binding `names`."""
  code = doc_blocks.substitute_text(block.text, replacements)
  path = os.path.join(cwd, "block_%s_%d.py" % (
      os.path.basename(block.doc)[:-3], block.line))
  with open(path, "w") as f:
    f.write("".join("%s = %r\n" % item for item in names.items()) + code +
            epilogue)
  run = _run([sys.executable, path], cwd=cwd)
  run.what = "%s, with %s:\n%s" % (block.where, names, code)
  return run


# docs/variants.md's training command: a temporary model directory, 2 steps.
README_TRAIN = {"--model_dir=/tmp/syn": "--model_dir={model_dir}",
                "utils.run.train_steps=100": "utils.run.train_steps=2"}
# docs/serving.md's export: a tiny local model (64 positions) for the
# bucket's, as serving.md says.
SERVING_EXPORT = {"--model_dir=gs://my-bucket/c4_random": "--model_dir={model}",
                  "--export_dir=gs://my-bucket/c4_random/export":
                      "--export_dir={export}",
                  "--input_sequence_length=512": "--input_sequence_length=64",
                  "--target_sequence_length=512":
                      "--target_sequence_length=64"}
# docs/finetuning.md's Python API block off TPU, as that page says beside it.
README_API = {
    '"gs://my-bucket/sst2_rv"': "MODEL_DIR",
    '("tokens_per_batch", 65536)': '("tokens_per_batch", 256)',
    '{"inputs": 512, "targets": 512}': '{"inputs": 64, "targets": 64}',
    '"SynthesizerAttention.max_length = 512"':
        '"SynthesizerAttention.max_length = 64"',
    '"glue_sst2_v002"': '"pydocs_span_corruption"',
    "finetune_steps=25000": "finetune_steps=1",
    '"gs://t5-data/pretrained_models/base"': "PRETRAINED_MODEL_DIR",
    '"gs://my-bucket/sst2_rv/export"': "EXPORT_DIR",
}
# docs/serving.md's Python block: its `model_dir=...` is a trained model's.
SERVING_API = {
    "model_dir=...": "model_dir=MODEL_DIR",
    '{"inputs": 512, "targets": 512}': '{"inputs": 64, "targets": 64}',
}
# docs/analysis.md's models (trained as conftest trains them, 2 steps here)
# and output folder.
PICTURES = {"--output_dir=runs/attention_pictures/png": "--output_dir={out}",
            "R=runs/attention_pictures/random": "R={random}",
            "R+V=runs/attention_pictures/random_vanilla":
                "R+V={random_vanilla}",
            "mesh=runs/attention_pictures/t5_attention": "mesh={mesh}"}
# `make demo` in its shortest form: one variant, one step, one batch.
DEMO_FLAGS = ["--variants=random", "--train_steps=1", "--eval_steps=1"]
INPUTS = ["A class definition defines a class object.",
          "for x in range(3): print(x)"]


def _formatted(replacements: Dict[str, str], **values) -> Dict[str, str]:
  return {k: v.format(**values) for k, v in replacements.items()}


@pytest.fixture(scope="module")
def ran(trained_models, tmp_path_factory):
  """Runs the documents' offline commands, two at a time."""
  root = tmp_path_factory.mktemp("docs")
  models = {name: trained_models[name][0]
            for name in ("random", "random_vanilla", conftest.MESH_ATTENTION)}
  for name in models:
    result = trained_models[name][1]
    assert result.returncode == 0, result.stderr[-3000:]

  def readme_train():
    command = doc_blocks.find("docs/variants.md", "--model_dir=/tmp/syn")
    return _run(_cli_argv(command, _formatted(
        README_TRAIN, model_dir=str(root / "syn"))), command.full_env())

  def serving():
    export = str(root / "serving_export")
    command = doc_blocks.find("docs/serving.md", "--mode=export_predict")
    run = _run(_cli_argv(command, _formatted(
        SERVING_EXPORT, model=models["random"], export=export)),
               command.full_env())
    if run.returncode:
      return run, None
    predict = doc_blocks.find("docs/serving.md", "saved_model_predict.py")
    argv = predict.substituted({"<export_dir>/<timestamp>":
                                _saved_model(export)})
    return run, _run([sys.executable] + argv[1:])

  def readme_api():
    cwd = root / "readme_api"
    cwd.mkdir()
    (cwd / "inputs.txt").write_text("\n".join(INPUTS) + "\n")
    block = doc_blocks.find_block("docs/finetuning.md", "python",
                                  "model.finetune(")
    return _python_block(
        block, README_API,
        {"TPU": None, "MODEL_DIR": str(cwd / "sst2_rv"),
         "PRETRAINED_MODEL_DIR": models[conftest.MESH_ATTENTION],
         "EXPORT_DIR": str(cwd / "export")},
        "\nprint('RESULT ' + __import__('json').dumps("
        "{'scores': [float(s) for s in scores], 'targets': targets}))\n",
        str(cwd))

  def serving_api():
    cwd = root / "serving_api"
    cwd.mkdir()
    block = doc_blocks.find_block("docs/serving.md", "python", "model.export(")
    return _python_block(
        block, SERVING_API,
        {"MODEL_DIR": models["random"], "export_dir": str(cwd / "export"),
         "task": "pydocs_span_corruption"},
        "\nprint('RESULT ' + (path.decode() if isinstance(path, bytes) "
        "else path))\n", str(cwd))

  def pictures():
    command = doc_blocks.find("docs/analysis.md", "attention_pictures.py")
    argv = command.substituted(_formatted(
        PICTURES, out=str(root / "png"), random=models["random"],
        random_vanilla=models["random_vanilla"],
        mesh=models[conftest.MESH_ATTENTION]))
    return _run([sys.executable] + argv[1:], command.full_env())

  def demo():
    out = str(root / "demo")
    recipe = _make_demo_recipe(out)
    return _run([sys.executable] + recipe[1:] + DEMO_FLAGS)

  jobs = {"readme_api": readme_api, "demo": demo,
          "readme_train": readme_train, "serving": serving,
          "pictures": pictures, "serving_api": serving_api}
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    futures = {name: pool.submit(job) for name, job in jobs.items()}
    out = {name: future.result() for name, future in futures.items()}
  out["root"] = root
  return out


@pytest.mark.slow
def test_readme_training_command(ran):
  ran["readme_train"].check()
  assert os.path.exists(ran["root"] / "syn" / "model.ckpt-2.index")


@pytest.mark.slow
def test_serving_export_command_and_decoding(ran):
  export, predict = ran["serving"]
  export.check()
  predict.check()
  lines = [json.loads(l) for l in predict.output.splitlines()
           if l.startswith("{")]
  (result,) = lines
  assert result["input"].startswith('The "assert" statement')
  assert isinstance(result["output"], str)


@pytest.mark.slow
def test_readme_python_api_block(ran):
  """Finetunes R+V from the plain model, predicts, scores and exports."""
  run = ran["readme_api"]
  run.check()
  cwd = ran["root"] / "readme_api"
  step = conftest.TRAIN_STEPS + 1  # 1 finetune step
  assert (cwd / "sst2_rv" / ("model.ckpt-%d.index" % step)).exists()
  with open(cwd / ("decodes.txt-%d" % step)) as f:
    assert len(f.read().rstrip("\n").split("\n")) == len(INPUTS)
  (line,) = [l for l in run.output.splitlines() if l.startswith("RESULT ")]
  result = json.loads(line[len("RESULT "):])
  assert result["targets"] == ["..."]
  assert all(math.isfinite(s) and s < 0 for s in result["scores"])
  assert os.path.isfile(os.path.join(_saved_model(str(cwd / "export")),
                                     "saved_model.pb"))


@pytest.mark.slow
def test_serving_python_block(ran):
  run = ran["serving_api"]
  run.check()
  (line,) = [l for l in run.output.splitlines() if l.startswith("RESULT ")]
  path = line[len("RESULT "):]
  assert os.path.dirname(path) == str(ran["root"] / "serving_api" / "export")
  assert os.path.isfile(os.path.join(path, "saved_model.pb"))


@pytest.mark.slow
def test_attention_pictures_command(ran):
  ran["pictures"].check()
  names = sorted(os.listdir(ran["root"] / "png"))
  assert names == ["histograms.png", "input_R.png", "input_R_V.png",
                   "input_mesh.png", "mixture_R_V.png", "synthetic_R.png",
                   "synthetic_R_V.png"], names


@pytest.mark.slow
def test_make_demo_writes_its_table_and_files(ran):
  """`make demo`'s recipe, short: docs/quickstart.md's table and files."""
  ran["demo"].check()
  out = ran["root"] / "demo"
  with open(out / "results.json") as f:
    results = json.load(f)
  names = DEMO_FLAGS[0].split("=")[1].split(",")
  assert [r["variant"] for r in results["results"]] == names
  assert not results["failed"]
  table = (out / "results.md").read_text()
  shown = doc_blocks.find_block("docs/quickstart.md", "", "| variant |").text
  header = shown.splitlines()[:2]
  assert table.splitlines()[:2] == header, table
  for name in names:
    (row,) = [l for l in table.splitlines() if l.startswith("| %s |" % name)]
    assert len(row.split("|")) == len(header[0].split("|")), row
    model = out / name / "model"
    assert (out / name / "train.log").exists()
    assert (out / name / "eval.log").exists()
    assert (model / "operative_config.gin").exists()
    assert [d for d in os.listdir(model) if d.startswith(
        "eval_pydocs_span_corruption_validation_")], os.listdir(model)
