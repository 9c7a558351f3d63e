# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""`mtf-synthesizer-tpu-job` as a TPU VM runs it: it holds no TPU.

A TPU build of TensorFlow takes the TPU (`/tmp/libtpu_lockfile`) when it is
imported and keeps it until its process exits. The tool runs here under a
stand-in for that build (`cli_site/tpu_build.py`: importing TensorFlow
takes a lock file exclusively, or exits with TensorFlow's "already in use"
message) on a faked TPU VM (a device folder with `accel*`), with the stock
CLI replaced by a command that imports TensorFlow and says whether it got
the TPU. Each command the tool starts must get it; the tool must not have
imported TensorFlow, nor hold the lock, before and while a command runs.
The preflight's pod and data checks are exercised through the same runs.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import conftest  # pylint: disable=unused-import  (cli_site on PYTHONPATH)

pytestmark = pytest.mark.slow

_DRIVER = textwrap.dedent("""
    import fcntl
    import sys
    from mtf_synthesizer.commands import tpu_job
    from mtf_synthesizer.jobs import commands
    from mtf_synthesizer.jobs import runner

    lock_path, fake_cli = sys.argv[1:3]
    commands.cli_path = lambda: fake_cli
    original_run = runner.run

    def run(command, **kwargs):
      state = ["TensorFlow" if "tensorflow" in sys.modules
               else "no TensorFlow"]
      with open(lock_path, "a") as lock:
        try:  # fails while any open file of any process holds it
          fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
          fcntl.flock(lock, fcntl.LOCK_UN)
          state.append("no lock")
        except OSError:
          state.append("the lock")
      print("tool: " + ", ".join(state), flush=True)
      return original_run(command, **kwargs)

    runner.run = run
    status = tpu_job.main(sys.argv[3:])
    print("tool at exit: " + ("TensorFlow" if "tensorflow" in sys.modules
                              else "no TensorFlow"), flush=True)
    sys.exit(status)
""")

_FAKE_CLI = textwrap.dedent("""\
    #!{python}
    import sys
    import tensorflow  # the stand-in TPU build takes the TPU here
    print("command got the TPU:", " ".join(a for a in sys.argv[1:]
                                            if a.startswith("--tpu=")))
""")


@pytest.fixture(name="vm")
def _vm(tmp_path):
  """A faked TPU VM: devices, the lock file's place, a stand-in CLI."""
  dev = tmp_path / "dev"
  dev.mkdir()
  for i in range(4):
    (dev / ("accel%d" % i)).write_text("")
  cli = tmp_path / "t5_mesh_transformer"
  cli.write_text(_FAKE_CLI.format(python=sys.executable))
  cli.chmod(0o755)
  data = tmp_path / "tfds"
  prepared = data / "wmt14_translate" / "de-en" / "1.0.0"
  prepared.mkdir(parents=True)
  (prepared / "dataset_info.json").write_text("{}")
  return tmp_path


def _run_tool(vm, *args, env=None):
  lock = str(vm / "libtpu_lockfile")
  argv = [sys.executable, "-c", _DRIVER, lock,
          str(vm / "t5_mesh_transformer"), "--bucket=gs://my-bucket",
          "--experiment=wmt_ende", "--model_size=small",
          "--data_dir=%s" % (vm / "tfds")] + list(args)
  environ = {k: v for k, v in os.environ.items()
             if k not in ("MTF_SYNTH_MULTI_HOST",
                          "MTF_SYNTH_SKIP_TPU_PREFLIGHT")}
  environ.update(MTF_SYNTH_TEST_TPU_BUILD=lock,
                 MTF_SYNTH_TEST_DEV_DIR=str(vm / "dev"), **(env or {}))
  return subprocess.run(argv, cwd=str(vm), capture_output=True, text=True,
                        env=environ, timeout=600, check=False)


def test_every_command_the_tool_starts_gets_the_tpu(vm):
  proc = _run_tool(vm, "--tpu_topology=v3-8", "--stage=all")
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert proc.stdout.count("tool: no TensorFlow, no lock") == 2
  assert proc.stdout.count("command got the TPU: --tpu=local") == 2
  assert "already in use" not in proc.stderr
  assert "tool at exit: no TensorFlow" in proc.stdout


def test_a_named_pod_with_the_switch_passes_and_is_warned(vm):
  proc = _run_tool(vm, "--tpu_topology=v3-32", "--tpu=synth-pod",
                   "--stage=pretrain", env={"MTF_SYNTH_MULTI_HOST": "1"})
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  (warning,) = [l for l in proc.stderr.splitlines()
                if l.startswith("mtf-synthesizer-tpu-job: warning:")]
  assert "4 hosts" in warning and "SentencepieceOp" in warning
  assert "command got the TPU: --tpu=synth-pod" in proc.stdout


def test_a_pod_without_the_switch_is_one_line_and_no_command(vm):
  proc = _run_tool(vm, "--tpu_topology=v3-32", "--tpu=synth-pod",
                   "--stage=pretrain")
  assert proc.returncode == 2
  assert "Traceback" not in proc.stderr
  (line,) = [l for l in proc.stderr.splitlines()
             if l.startswith("mtf-synthesizer-tpu-job: error:")]
  assert "spans 4 hosts" in line and "MTF_SYNTH_MULTI_HOST=1" in line
  assert "command got the TPU" not in proc.stdout


def test_v4_8_gets_a_mesh_of_its_four_devices(vm):
  proc = _run_tool(vm, "--tpu_topology=v4-8", "--model_size=base",
                   "--stage=pretrain")
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert "--logical_cores_per_chip=1" in proc.stdout
  assert "utils.tpu_mesh_shape.tpu_topology = '2x2x1'" in proc.stdout


def test_a_missing_dataset_stops_before_any_command(vm):
  (vm / "tfds" / "wmt14_translate" / "de-en" / "1.0.0" /
   "dataset_info.json").unlink()
  proc = _run_tool(vm, "--tpu_topology=v3-8", "--stage=pretrain")
  assert proc.returncode == 2
  assert "Traceback" not in proc.stderr
  (line,) = [l for l in proc.stderr.splitlines()
             if l.startswith("mtf-synthesizer-tpu-job: error:")]
  assert "lacks wmt14_translate/de-en:1.0.0" in line
  assert ("mtf-synthesizer-data --prepare --data_dir=%s "
          "--mixture=synth_wmt14_ende" % (vm / "tfds")) in line
  assert "tool: no TensorFlow" not in proc.stdout
