# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Cloud TPU preflight: what would stop TPUEstimator, said before it.

A run that asks for a TPU (`--tpu=...`) reaches the TPU only after gin is
parsed, the graph built and TPUEstimator started; what is wrong with the
machine then surfaces as a long traceback (a missing kernel, a gRPC
timeout, a crash in the TPU runtime). `check()` tells it first, in one
line, in this order:

  1. This TensorFlow cannot drive a TPU: PyPI's `tensorflow` is a CPU/GPU
     build that registers no kernel for the TPU system ops
     (`ConfigureDistributedTPU`); a TPU VM's own TensorFlow does. (A TPU
     Node, driven by name from another machine, runs those kernels on its
     own host; TPU Nodes are not supported here, and the skip below is the
     way to try one.)
  2. The TPU runtime is PJRT, with which `TPUEstimator` is reported to crash
     (tensorflow/tensorflow#90807): TensorFlow loads the PJRT TPU runtime as
     a pluggable device named by `TF_PLUGGABLE_DEVICE_LIBRARY_PATH`
     (`tensorflow/__init__.py`), or `NEXT_PLUGGABLE_DEVICE_USE_C_API=true`
     selects it.
  3. The slice spans several hosts (`mesh_defaults.num_hosts`), where the
     graph runs in a TPU worker process that lacks TensorFlow Text's ops
     (google-research/text-to-text-transfer-transformer#965), and a TPU
     name from a TPU VM was seen to query gRPC port 8470 (t5#830, a
     v3-128): a user who means it sets `MTF_SYNTH_MULTI_HOST=1`, names the
     slice (`--tpu=<name>`; `local` is one host's TPU), and gets a warning
     with what is known not to work there.
  4. On one host, the TPU's name does not fit where the program runs: on a
     TPU VM (`/dev/accel*`) its own TPU is `local`, and a name routes
     through gRPC port 8470, which a TPU VM does not serve (t5#830); off a
     TPU VM, `local` names no TPU.
  5. A megacore TPU (v4) given to mesh as an accelerator type: mesh counts
     "v4-8" as 8 cores where TensorFlow shows 4 devices; the chip grid with
     `--logical_cores_per_chip=1` is what mesh can lay out
     (`mesh_defaults.mesh_topology`).

None of this has been tried on a real TPU (docs/tpu.md): the checks follow
the sources named above. `MTF_SYNTH_SKIP_TPU_PREFLIGHT=1` skips them all,
should one be wrong on a machine it was not written for. The stock CLI runs
`check()` when it imports the package (`stock_cli/entry.py`), and
`mtf-synthesizer-tpu-job` runs it before its first command in a short-lived
process of its own (`jobs/preflight.py`), so that the tool itself never
imports TensorFlow, whose TPU build takes the TPU (`/tmp/libtpu_lockfile`)
for as long as the importing process lives; both exit with status 2 and
the message, without a traceback.
"""

import glob
import os
from typing import Callable, List, Mapping, Optional, Sequence

from mtf_synthesizer.jobs import mesh_defaults
from mtf_synthesizer.stock_cli import checks

SKIP_ENV = "MTF_SYNTH_SKIP_TPU_PREFLIGHT"
MULTI_HOST_ENV = "MTF_SYNTH_MULTI_HOST"
# The name `TPUClusterResolver` takes for the TPU attached to this VM.
LOCAL = "local"
# Ops whose kernels only a TPU build of TensorFlow registers. With PyPI's
# build, TPUEstimator's first session fails at the first of them: "No
# OpKernel was registered to support Op 'ConfigureDistributedTPU'".
TPU_SYSTEM_OPS = ("ConfigureDistributedTPU", "_ConfigureDistributedTPU",
                  "TPUCompile", "TPUExecute")
# The variables with which TensorFlow 2.15 loads the PJRT TPU runtime.
PJRT_ENV = ("TF_PLUGGABLE_DEVICE_LIBRARY_PATH",
            "NEXT_PLUGGABLE_DEVICE_USE_C_API")
IMAGE = "tpu-vm-tf-2.15.1-se"
_DOC = "docs/tpu.md"


class TpuPreflightError(checks.CliError):
  """The run asks for a TPU that this machine or TensorFlow cannot drive."""


def tensorflow_drives_tpu() -> bool:
  """Whether the imported TensorFlow registers kernels for TPU system ops.

  Returns:
    True for a TPU build of TensorFlow (a TPU VM's own), False for PyPI's.
  """
  from tensorflow.python.framework import kernels  # pylint: disable=g-import-not-at-top
  return any(kernels.get_registered_kernels_for_op(op).kernel
             for op in TPU_SYSTEM_OPS)


def pjrt_runtime(environ: Mapping[str, str]) -> Optional[str]:
  """The variable that selects the PJRT TPU runtime, if one does.

  Args:
    environ: the environment.

  Returns:
    "NAME=value" of the first variable of PJRT_ENV that is set (the second
    only when true), or None for the stream-executor runtime.
  """
  path, c_api = PJRT_ENV
  if environ.get(path):
    return "%s=%s" % (path, environ[path])
  if environ.get(c_api, "").lower() in ("1", "true"):
    return "%s=%s" % (c_api, environ[c_api])
  return None


def on_tpu_vm(dev_dir: str = "/dev") -> bool:
  """Whether this machine has TPU chips attached (a TPU VM).

  Args:
    dev_dir: where the device files are.

  Returns:
    True when `accel*` devices exist (v2, v3 and v4 TPU VMs).
  """
  return bool(glob.glob(os.path.join(dev_dir, "accel*")))


def _tensorflow_error() -> str:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return (
      "this TensorFlow (%s, %s) cannot drive a TPU: it registers no kernel "
      "for the TPU system ops (%s), as PyPI's tensorflow never does. Use the "
      "TPU VM image's own TensorFlow (%s): make the environment with "
      "`python3 -m venv --system-site-packages` over the image's Python and "
      "install requirements-tpu-vm.lock with --no-deps (README, recipe 2; "
      "%s)." % (tf.__version__, os.path.dirname(tf.__file__),
                TPU_SYSTEM_OPS[0], IMAGE, _DOC))


def check(tpu: Optional[str], tpu_topology: Optional[str] = None, *,
          tpu_version: Optional[str] = None,
          logical_cores_per_chip: Optional[int] = None,
          environ: Optional[Mapping[str, str]] = None,
          dev_dir: str = "/dev",
          drives_tpu: Callable[[], bool] = tensorflow_drives_tpu
          ) -> List[str]:
  """Checks that a run asking for `tpu` can reach it (see the module doc).

  Args:
    tpu: the TPU asked for (`--tpu`); no check without one.
    tpu_topology: the slice's topology ("v3-8", "2x2"), if known.
    tpu_version: the generation of a chip-grid topology, if known (the
      stock CLI does not know it).
    logical_cores_per_chip: mesh's `--logical_cores_per_chip`, if set.
    environ: the environment (default: os.environ).
    dev_dir: where the device files are.
    drives_tpu: whether this TensorFlow can drive a TPU.

  Returns:
    Warnings to print: what is known not to work on a multi-host slice
    that `MTF_SYNTH_MULTI_HOST=1` lets through; else none.

  Raises:
    TpuPreflightError: the first problem, with what to do about it.
  """
  environ = os.environ if environ is None else environ
  if not tpu or environ.get(SKIP_ENV) == "1":
    return []
  skip = " (%s=1 skips these checks.)" % SKIP_ENV
  tpu_vm = on_tpu_vm(dev_dir)
  if not drives_tpu():
    node = ""
    if not tpu_vm and tpu != LOCAL:
      node = (" A TPU name off a TPU VM means a TPU Node (v2 and v3 only, no "
              "longer developed), which this package does not support.")
    raise TpuPreflightError("--tpu=%s: %s%s%s" % (
        tpu, _tensorflow_error(), node, skip))
  pjrt = pjrt_runtime(environ)
  if pjrt:
    raise TpuPreflightError(
        "--tpu=%s: the TPU runtime is PJRT (%s), with which TPUEstimator, "
        "which mesh-tensorflow uses, is reported to crash "
        "(tensorflow/tensorflow#90807). Create the TPU VM with a "
        "stream-executor image (--version=%s; v2, v3 or v4 TPUs; %s).%s"
        % (tpu, pjrt, IMAGE, _DOC, skip))
  hosts = 1
  if tpu_topology:
    try:
      hosts = mesh_defaults.num_hosts(tpu_topology, tpu_version or "v3")
    except ValueError as e:
      raise TpuPreflightError("--tpu=%s: %s%s" % (tpu, e, skip)) from None
  if hosts > 1:
    return _check_multi_host(tpu, tpu_topology, hosts, environ)
  if tpu_vm and tpu != LOCAL:
    raise TpuPreflightError(
        "--tpu=%s on a TPU VM: this VM's own TPU is --tpu=%s. A TPU name "
        "routes through grpc://...:8470, which only a TPU Node serves "
        "(google-research/text-to-text-transfer-transformer#830); give a "
        "name only for a multi-host slice (%s=1) or from a machine that "
        "drives a TPU Node.%s" % (tpu, LOCAL, MULTI_HOST_ENV, skip))
  if not tpu_vm and tpu == LOCAL:
    raise TpuPreflightError(
        "--tpu=%s names the TPU attached to this machine, and this machine "
        "has none (no %s/accel* devices): run on the TPU VM (README, recipe "
        "2), or name a TPU Node.%s" % (tpu, dev_dir, skip))
  if tpu_topology and (tpu_version or tpu_topology.startswith("v")):
    _check_megacore(tpu, tpu_topology, tpu_version or "v3",
                    logical_cores_per_chip, skip)
  return []


def _check_multi_host(tpu: str, tpu_topology: str, hosts: int,
                      environ: Mapping[str, str]) -> List[str]:
  """Check 3: a slice of several hosts (see the module doc)."""
  known = (
      "on a multi-host slice the graph runs in a TPU worker process that "
      "lacks TensorFlow Text's ops (\"Op type not registered "
      "'SentencepieceOp'\", "
      "google-research/text-to-text-transfer-transformer#965), a TPU name "
      "from a TPU VM was seen to query grpc://...:8470 and fail (t5#830, a "
      "v3-128), and no run of this package on one has been made")
  if environ.get(MULTI_HOST_ENV) != "1":
    raise TpuPreflightError(
        "--tpu=%s with topology %s: the slice spans %d hosts, and %s; a "
        "single host (v2-8, v3-8, v4-8) is the supported path (%s). Set "
        "%s=1 to go on." % (tpu, tpu_topology, hosts, known, _DOC,
                            MULTI_HOST_ENV))
  if tpu == LOCAL:
    raise TpuPreflightError(
        "--tpu=%s with topology %s (%d hosts): `local` is the TPU of one "
        "host; a multi-host slice is addressed by its name (--tpu=<the "
        "TPU VM's name>, as Google's own test runs do on pods; %s)."
        % (tpu, tpu_topology, hosts, _DOC))
  return ["--tpu=%s with topology %s (%d hosts, %s=1): %s (%s)." %
          (tpu, tpu_topology, hosts, MULTI_HOST_ENV, known, _DOC)]


def _check_megacore(tpu: str, tpu_topology: str, tpu_version: str,
                    logical_cores_per_chip: Optional[int], skip: str) -> None:
  """Check 5: the devices mesh counts are those TensorFlow shows."""
  devices = mesh_defaults.num_devices(tpu_topology, tpu_version)
  if tpu_topology.startswith("v"):
    counted = mesh_defaults.num_cores(tpu_topology)
  else:
    counted = mesh_defaults.num_chips(tpu_topology, tpu_version) * (
        logical_cores_per_chip or mesh_defaults.CORES_PER_CHIP)
  if counted == devices:
    return
  topology, cores_per_chip = mesh_defaults.mesh_topology(tpu_topology,
                                                         tpu_version)
  raise TpuPreflightError(
      "--tpu=%s with topology %s: mesh would count %d cores where "
      "TensorFlow shows %d devices (a %s chip's two cores are one device, "
      "megacore); bind utils.tpu_mesh_shape.tpu_topology = '%s' and pass "
      "--logical_cores_per_chip=%d (mtf-synthesizer-tpu-job does; %s).%s"
      % (tpu, tpu_topology, counted, devices,
         mesh_defaults.tpu_generation(tpu_topology, tpu_version).name,
         topology, cores_per_chip, _DOC, skip))


def gin_topology(gin_params: Sequence[str]) -> Optional[str]:
  """The topology the last `--gin_param` binding of `tpu_topology` gives.

  Args:
    gin_params: the `--gin_param` values, in order.

  Returns:
    e.g. "v3-8"; None when no binding names one.
  """
  topology = None
  for param in gin_params:
    name, _, value = param.partition("=")
    if name.strip().endswith("tpu_topology") and value.strip():
      topology = value.strip().strip("'\"")
  return topology
