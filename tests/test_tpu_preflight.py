# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Cloud TPU preflight (`stock_cli/tpu_checks.py`), as far as a CPU goes.

The first check is real here: this suite's TensorFlow is PyPI's (on the TPU
VM leg, its stand-in for the image's), which cannot drive a TPU, so every
run that asks for one must stop at it, with status 2, one line and no
traceback, before any graph is built: the stock CLI with the package
imported, and `mtf-synthesizer-tpu-job` run exactly as README's recipe 2
prints it, with a PATH that does not hold its environment. The others
(the runtime, the TPU's name, multi-host slices) are checked with what a
CPU can fake: the environment, a folder of device files, and a stand-in for
the first check.
"""

import os
import re
import subprocess
import sys

import pytest

import conftest
import doc_blocks
from mtf_synthesizer.jobs import cloud_tpu
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.stock_cli import tpu_checks

README = "README.md"
TPU_JOB = doc_blocks.find(README, "mtf-synthesizer-tpu-job")
# A PATH without any Python environment's bin/.
BARE_PATH = "/usr/bin:/bin"


def _yes():
  return True


def _no():
  return False


@pytest.fixture(name="tpu_vm")
def _tpu_vm(tmp_path):
  """A device folder as a v3-8 TPU VM has it."""
  for i in range(4):
    (tmp_path / ("accel%d" % i)).write_text("")
  return str(tmp_path)


@pytest.fixture(name="no_tpu")
def _no_tpu(tmp_path):
  return str(tmp_path)


def _error(**kwargs) -> str:
  kwargs.setdefault("environ", {})
  with pytest.raises(tpu_checks.TpuPreflightError) as err:
    tpu_checks.check(**kwargs)
  return str(err.value)


def test_this_tensorflow_cannot_drive_a_tpu():
  """PyPI's build registers no kernel for any TPU system op."""
  assert not tpu_checks.tensorflow_drives_tpu()


def test_a_tensorflow_without_tpu_kernels_is_named_with_the_fix(tpu_vm):
  message = _error(tpu="local", dev_dir=tpu_vm, drives_tpu=_no)
  assert "cannot drive a TPU" in message
  assert "--system-site-packages" in message
  assert "requirements-tpu-vm.lock" in message
  assert "TPU Node" not in message
  assert tpu_checks.SKIP_ENV in message


def test_a_name_off_a_tpu_vm_is_a_tpu_node(no_tpu):
  message = _error(tpu="my-tpu", dev_dir=no_tpu, drives_tpu=_no)
  assert "cannot drive a TPU" in message and "TPU Node" in message


@pytest.mark.parametrize("variable,value", [
    ("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "/lib/libtpu.so"),
    ("NEXT_PLUGGABLE_DEVICE_USE_C_API", "true")])
def test_the_pjrt_runtime_asks_for_a_stream_executor_image(tpu_vm, variable,
                                                           value):
  message = _error(tpu="local", dev_dir=tpu_vm, drives_tpu=_yes,
                   environ={variable: value})
  assert "PJRT" in message and variable in message
  assert "tpu-vm-tf-2.15.1-se" in message
  assert "#90807" in message


def test_a_name_on_a_tpu_vm_suggests_local(tpu_vm):
  message = _error(tpu="synth-v3-8", dev_dir=tpu_vm, drives_tpu=_yes)
  assert "--tpu=local" in message and "8470" in message


def test_local_off_a_tpu_vm_names_no_tpu(no_tpu):
  message = _error(tpu="local", dev_dir=no_tpu, drives_tpu=_yes)
  assert "has none" in message


@pytest.mark.parametrize("topology,hosts", [
    ("v3-32", 4), ("4x4", 4), ("v4-16", 2), ("v4-32", 4)])
def test_a_multi_host_slice_must_be_meant(tpu_vm, topology, hosts):
  """A pod is named; without the switch one line says why not, whatever
  the name (the name check used to fire first for a named pod)."""
  for tpu in ("synth-pod", "local"):
    message = _error(tpu=tpu, tpu_topology=topology, dev_dir=tpu_vm,
                     drives_tpu=_yes)
    assert "spans %d hosts" % hosts in message
    assert "SentencepieceOp" in message and "#965" in message
    assert "#830" in message
    assert tpu_checks.MULTI_HOST_ENV in message
  switch = {tpu_checks.MULTI_HOST_ENV: "1"}
  (warning,) = tpu_checks.check("synth-pod", topology, dev_dir=tpu_vm,
                                drives_tpu=_yes, environ=switch)
  assert "SentencepieceOp" in warning and "#830" in warning
  message = _error(tpu="local", tpu_topology=topology, dev_dir=tpu_vm,
                   drives_tpu=_yes, environ=switch)
  assert "addressed by its name" in message


@pytest.mark.parametrize("topology,version,cores_per_chip", [
    ("v3-8", None, None), ("2x2", None, None), ("v2-8", None, None),
    ("2x2x1", "v4", 1), (None, None, None)])
def test_a_single_host_tpu_vm_passes(tpu_vm, topology, version,
                                     cores_per_chip):
  assert tpu_checks.check("local", topology, tpu_version=version,
                          logical_cores_per_chip=cores_per_chip,
                          dev_dir=tpu_vm, drives_tpu=_yes, environ={}) == []


def test_v4_as_mesh_would_miscount_it_is_refused(tpu_vm):
  """mesh reads "v4-8" as 8 cores; TensorFlow shows a v4-8's 4 devices."""
  message = _error(tpu="local", tpu_topology="v4-8", dev_dir=tpu_vm,
                   drives_tpu=_yes)
  assert "count 8 cores" in message and "shows 4 devices" in message
  assert "'2x2x1'" in message and "--logical_cores_per_chip=1" in message
  message = _error(tpu="local", tpu_topology="2x2x1", tpu_version="v4",
                   dev_dir=tpu_vm, drives_tpu=_yes)
  assert "count 8 cores" in message


def test_no_tpu_asked_or_skipped_checks_nothing(no_tpu):
  for tpu in (None, ""):
    tpu_checks.check(tpu, dev_dir=no_tpu, drives_tpu=_no, environ={})
  tpu_checks.check("local", "v3-32", dev_dir=no_tpu, drives_tpu=_no,
                   environ={tpu_checks.SKIP_ENV: "1"})


def test_gin_topology_is_the_last_binding():
  assert tpu_checks.gin_topology([
      "utils.tpu_mesh_shape.tpu_topology = 'v3-32'",
      "utils.run.train_steps = 3",
      "utils.tpu_mesh_shape.tpu_topology = \"v3-8\""]) == "v3-8"
  assert tpu_checks.gin_topology(["utils.run.train_steps = 3"]) is None


def _one_error_line(proc, program: str) -> str:
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  (line,) = [l for l in proc.stderr.splitlines()
             if l.startswith(program + ": error:")]
  return line


@pytest.mark.slow
def test_the_stock_cli_stops_before_any_graph(tmp_path):
  model_dir = tmp_path / "model"
  argv = [commands.cli_path(), "--module_import=mtf_synthesizer",
          "--tpu=local", "--model_dir=%s" % model_dir,
          "--gin_file=dataset.gin", "--gin_file=models/t5.1.0.base.gin",
          "--gin_file=synthesizer/random.gin",
          "--gin_param=utils.tpu_mesh_shape.tpu_topology = 'v3-8'"]
  env = dict(os.environ, PATH=BARE_PATH)
  proc = subprocess.run(argv, capture_output=True, text=True, env=env,
                        timeout=600, check=False)
  line = _one_error_line(proc, "t5_mesh_transformer")
  assert "cannot drive a TPU" in line and "--system-site-packages" in line
  assert sorted(os.listdir(model_dir)) == []  # no graph, no checkpoint


def _readme_tool_argv():
  """The README's tool command; its program from this environment."""
  argv = list(TPU_JOB.argv)
  program = os.path.join(conftest.REPO, argv[0])
  if not os.path.exists(program):  # the README's .venv-tpu: the TPU VM leg
    program = os.path.join(os.path.dirname(sys.executable),
                           os.path.basename(argv[0]))
  return [program] + argv[1:]


def test_the_readme_tool_command_asks_for_the_vms_own_tpu():
  assert TPU_JOB.values("tpu") == ["local"]
  assert TPU_JOB.argv[0].startswith(".venv-tpu/bin/")


@pytest.mark.slow
def test_the_readme_tool_command_reaches_the_preflight():
  """Exactly as printed, the environment's bin/ not on PATH."""
  env = dict(os.environ, PATH=BARE_PATH)
  proc = subprocess.run(_readme_tool_argv(), cwd=conftest.REPO,
                        capture_output=True, text=True, env=env, timeout=600,
                        check=False)
  line = _one_error_line(proc, "mtf-synthesizer-tpu-job")
  assert "--tpu=local: this TensorFlow" in line
  assert "requirements-tpu-vm.lock" in line


def test_the_job_runs_the_cli_beside_its_interpreter():
  job = cloud_tpu.Job(bucket="gs://b", tpu_topology="v3-8",
                      model_size="small", variant="random")
  (command,) = job.commands("pretrain")
  assert command.program == commands.CLI_NAME  # printed bare
  ran = cloud_tpu.beside_interpreter(command)
  assert ran.program == os.path.join(os.path.dirname(sys.executable),
                                     commands.CLI_NAME)
  assert os.access(ran.program, os.X_OK)
  assert ran.argv()[0] == ran.program and "--tpu=local" in ran.argv()
  # An argv list is left as it is.
  assert cloud_tpu.beside_interpreter(["gcloud", "x"]) == ["gcloud", "x"]


def test_the_two_legs_run_every_module_once():
  """`make test` leaves the TPU VM user's modules to the TPU VM leg, which
  runs them; CI runs both legs, the leg's environment built beside."""
  with open(os.path.join(conftest.REPO, "Makefile")) as f:
    makefile = f.read()
  (listed,) = re.findall(r"^TPU_VM_LEG := ((?:.*\\\n)*.*)$", makefile, re.M)
  leg = listed.replace("\\\n", " ").split()
  assert len(leg) == len(set(leg)) > 3
  for module in leg:
    assert os.path.isfile(os.path.join(conftest.REPO, "tests", module))
  assert "$(addprefix --ignore=,$(TPU_VM_LEG))" in makefile
  assert ".ci/tpu_vm_leg.py $(TPU_VM_LEG) $(PYTEST_ARGS)" in makefile
  with open(os.path.join(conftest.REPO, ".ci", "run")) as f:
    ci = f.read()
  assert "\nmake test\n" in ci and "\nmake test-tpu-vm\n" in ci
  assert ci.index("make tpu-vm-env") < ci.index("\nmake test\n")


def test_pip_check_reports_only_what_the_lock_explains():
  """On the TPU VM leg's environment: every requirement `pip check` reports
  is one that requirements-tpu-vm.lock's header names and explains."""
  if os.path.basename(sys.prefix) != ".venv-tpu":
    pytest.skip("the TPU VM's environment only (make test-tpu-vm)")
  proc = subprocess.run([sys.executable, "-m", "pip", "check"],
                        capture_output=True, text=True, check=False)
  reported = [l for l in proc.stdout.splitlines() if l.strip()]
  assert reported, "pip check found nothing: the lock's header is stale"
  with open(os.path.join(conftest.REPO, "requirements-tpu-vm.lock")) as f:
    header = " ".join(l.lstrip("# ").strip() for l in f
                      if l.startswith("#"))
  assert "reports %s requirements" % {
      2: "two", 3: "three", 4: "four", 5: "five"}.get(
          len(reported), str(len(reported))) in header
  def normal(text):
    return text.lower().replace("_", "-")
  for line in reported:
    package, version = line.split()[:2]
    wanted = re.search(r"requires (\S+?),|requirement ([\w.-]+)", line)
    assert wanted, line
    asks_for = wanted.group(1) or wanted.group(2)
    said = re.search(r"%s ([\d.]+) (?:asks )?for %s" % (
        re.escape(normal(package)), re.escape(normal(asks_for))),
                     normal(header))
    assert said and version.startswith(said.group(1)), line
