# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""`make test-tpu-vm`: README's TPU VM installation, replayed on a CPU.

A Cloud TPU VM (`tpu-vm-tf-2.15.x-se`) has CPython 3.10 with Google's TPU
build of TensorFlow 2.15 installed; README's "Setting up the TPU VM" makes
a `--system-site-packages` virtualenv over that Python and installs the
package into it with `--no-deps`. Here:

  1. a copy of this machine's CPython 3.10 with PyPI's `tensorflow==2.15.0`
     (the same version's CPU build, which is what a CPU can run) stands in
     for the image's Python, in `.tpu-vm/image-python` (built once, kept);
  2. README's installation block runs line by line in the checkout, as
     written, but for the interpreter (`python3` is the stand-in's) and the
     line that a CPU machine has no use for (`sudo apt-get`, which installs
     Ubuntu's venv module);
  3. the virtualenv's TensorFlow must be the stand-in's (same version, same
     place) and no torch may be in it;
  4. the test modules given (the Makefile's TPU_VM_LEG: every shipped gin
     file through the stock CLI, recipes 1 and 2 at tiny scale, the
     TPU-mesh lowering (`SimdMeshImpl`, XLA) and the TPU preflight) run in
     it.

Steps 1 and 2 run again only when what they read changed: the stand-in
when its TensorFlow pin did, the replay when README's block or a lock file
did (a stamp in `.venv-tpu`, as `make` keeps `.venv`), but for the line
that installs the checkout, which runs every time; `make clean` removes
both. `--environment-only` stops after step 3, so that CI builds
this environment (downloads and unpacking, mostly) while the CPython 3.11
suite runs (`.ci/run`).

Usage: python3.10 .ci/tpu_vm_leg.py [--environment-only] [pytest arguments]
"""

import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(REPO, ".tpu-vm")
IMAGE_PYTHON = os.path.join(WORK, "image-python")
# The image's TensorFlow, as PyPI builds it for a CPU.
TENSORFLOW = "tensorflow==2.15.0"
VENV = os.path.join(REPO, ".venv-tpu")
LOCKS = ("requirements-tpu-vm.lock", "requirements-tpu-vm-test.lock")
TEST_LOCK = LOCKS[1]
# The replay's stamp: what it read, hashed.
REPLAY_STAMP = os.path.join(VENV, ".readme-replay")
# Held while a command builds the checkout (`pip install .`): the
# Makefile's `install` takes it too (flock), since both build in build/.
BUILD_LOCK = os.path.join(REPO, ".checkout-build.lock")
TENSORFLOW_PLACE = ("import tensorflow as tf; "
                    "print(tf.__version__, tf.__file__)")


def log(message: str) -> None:
  print("==> tpu-vm: " + message, flush=True)


def run(argv, **kwargs) -> str:
  """Runs a command in the checkout; returns its stdout; fails loudly."""
  proc = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, text=True,
                        check=False, **kwargs)
  sys.stdout.write(proc.stdout)
  if proc.returncode:
    sys.exit("tpu-vm: %r failed with status %d" % (argv, proc.returncode))
  return proc.stdout


def build_image_python() -> str:
  """The stand-in for the image's Python; returns its `python3`."""
  python3 = os.path.join(IMAGE_PYTHON, "bin", "python3")
  stamp = os.path.join(IMAGE_PYTHON, ".tensorflow")
  if os.path.exists(stamp):
    with open(stamp) as f:
      if f.read() == TENSORFLOW:
        return python3
  log("copying CPython %s to %s" % (sys.version.split()[0], IMAGE_PYTHON))
  shutil.rmtree(IMAGE_PYTHON, ignore_errors=True)
  shutil.copytree(sys.base_prefix, IMAGE_PYTHON, symlinks=True)
  log("installing %s into it (the image's TensorFlow)" % TENSORFLOW)
  run([python3, "-m", "pip", "install", "-q", "--root-user-action=ignore",
       TENSORFLOW])
  with open(stamp, "w") as f:
    f.write(TENSORFLOW)
  return python3


def readme_install_block() -> list:
  """The lines of README's block that makes `.venv-tpu`."""
  with open(os.path.join(REPO, "README.md")) as f:
    blocks = re.findall(r"```sh\n(.*?)```", f.read(), re.S)
  (block,) = [b for b in blocks if "--system-site-packages" in b]
  return [l for l in block.splitlines() if l.strip()]


def replay(lines: list, python3: str) -> None:
  """Runs README's installation lines as a TPU VM user would."""
  for line in lines:
    argv = shlex.split(line)
    if argv[:2] == ["sudo", "apt-get"]:
      log("skipped (a CPU machine has no use for it): " + line)
      continue
    if argv[0] == "python3":
      line = shlex.quote(python3) + line[len("python3"):]
    log("README: " + line)
    with open(BUILD_LOCK, "a") as lock:
      if builds_checkout(line):
        fcntl.flock(lock, fcntl.LOCK_EX)
      run(["bash", "-c", "set -euo pipefail; " + line])


def builds_checkout(line: str) -> bool:
  """Whether a README line installs the checkout itself (`pip install .`)."""
  return "." in shlex.split(line)


def replay_key(lines: list) -> str:
  """What the replay read: README's block and the lock files, hashed."""
  digest = hashlib.sha256("\n".join(lines).encode())
  for name in LOCKS:
    with open(os.path.join(REPO, name), "rb") as f:
      digest.update(f.read())
  return digest.hexdigest()


def build_environment() -> str:
  """Steps 1-3; returns `.venv-tpu`'s python."""
  python3 = build_image_python()
  image_tf = run([python3, "-c", TENSORFLOW_PLACE],
                 stderr=subprocess.DEVNULL).split()
  lines = readme_install_block()
  key = replay_key(lines)
  replayed = None
  if os.path.exists(REPLAY_STAMP):
    with open(REPLAY_STAMP) as f:
      replayed = f.read()
  if replayed == key:
    log("README's installation already replayed into .venv-tpu from "
        "nothing, with this README and these locks; the checkout's own "
        "installation again:")
    replay([l for l in lines if builds_checkout(l)], python3)
  else:
    shutil.rmtree(VENV, ignore_errors=True)
    replay(lines, python3)
  venv_python = os.path.join(VENV, "bin", "python")
  venv_tf = run([venv_python, "-c", TENSORFLOW_PLACE],
                stderr=subprocess.DEVNULL).split()
  if venv_tf != image_tf:
    sys.exit("tpu-vm: the installation replaced the image's TensorFlow: "
             "%s, was %s" % (venv_tf, image_tf))
  log("TensorFlow kept: %s at %s" % tuple(venv_tf))
  run([venv_python, "-c", "import importlib.util, sys; "
       "sys.exit('torch is installed' if importlib.util.find_spec('torch') "
       "else 0)"])
  if not os.path.exists(REPLAY_STAMP):
    run([venv_python, "-m", "pip", "install", "-q", "--no-deps", "-r",
         TEST_LOCK])
    with open(REPLAY_STAMP, "w") as f:
      f.write(key)
  return venv_python


def main() -> int:
  if sys.version_info[:2] != (3, 10):
    sys.exit("tpu-vm: run with CPython 3.10 (the TPU VM image's), not %s"
             % sys.version.split()[0])
  args = sys.argv[1:]
  environment_only = "--environment-only" in args
  venv_python = build_environment()
  if environment_only:
    return 0
  log("tests: " + " ".join(args))
  argv = [venv_python, "-m", "pytest", "-q", "-rfEs", "-p",
          "no:cacheprovider", "-n", os.environ.get("TEST_WORKERS", "auto"),
          "--maxprocesses=4", "--dist", "loadfile",
          "--no-loadscope-reorder"] + args
  return subprocess.run(argv, cwd=os.path.join(REPO, "tests"),
                        check=False).returncode


if __name__ == "__main__":
  sys.exit(main())
