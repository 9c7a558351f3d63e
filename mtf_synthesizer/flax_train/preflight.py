# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""What must hold before the trainer compiles anything, said in one line.

`check_hosts` runs before JAX's backend starts: a Cloud TPU slice of
several hosts (`TPU_WORKER_HOSTNAMES`, which the TPU VM sets) needs the
command on every host with `--multi_host` (`jax.distributed.initialize`);
`check_devices` runs after: a TPU asked for and none visible, or a mesh
shape that the devices do not fill.
"""

import os
from typing import Mapping, Optional, Sequence

import jax

from mtf_synthesizer.flax_train import partitioning

PLATFORMS = ("tpu", "gpu", "cpu")


class PreflightError(RuntimeError):
  """A run that cannot start on this machine as configured."""


def slice_hosts(environ: Mapping[str, str] = os.environ) -> int:
  """The hosts of this TPU slice (1 where no TPU VM says otherwise).

  Args:
    environ: the environment.

  Returns:
    The number of hosts TPU_WORKER_HOSTNAMES lists.
  """
  names = [n for n in environ.get("TPU_WORKER_HOSTNAMES", "").split(",")
           if n.strip()]
  return max(len(names), 1)


def check_hosts(multi_host: bool,
                environ: Mapping[str, str] = os.environ) -> None:
  """Refuses a multi-host slice run as one process.

  Args:
    multi_host: --multi_host was given.
    environ: the environment.

  Raises:
    PreflightError: several hosts without --multi_host.
  """
  hosts = slice_hosts(environ)
  if hosts > 1 and not multi_host:
    raise PreflightError(
        "this TPU slice has %d hosts: run the command on every host "
        "(gcloud compute tpus tpu-vm ssh NAME --worker=all --command=...) "
        "with --multi_host, which calls jax.distributed.initialize()" % hosts)


def check_devices(platform: Optional[str], mesh_shape: Sequence[int],
                  batch_size: Optional[int] = None) -> str:
  """Checks the devices JAX sees against what the run asks for.

  Args:
    platform: "tpu", "gpu", "cpu", or None (any).
    mesh_shape: the (data, model) mesh shape.
    batch_size: the global batch, checked against the data axis.

  Returns:
    A one-line description of the devices.

  Raises:
    PreflightError: no device of the platform, or a mesh shape or batch
      that the devices do not divide.
  """
  try:
    devices = jax.devices()
  except RuntimeError as e:
    raise PreflightError("no %s visible: %s" % (
        platform or "device", str(e).splitlines()[0])) from None
  kinds = sorted({d.platform for d in devices})
  if platform and platform not in kinds:
    raise PreflightError(
        "no %s visible: JAX sees %d %s device(s)%s" % (
            platform.upper(), len(devices), "/".join(kinds),
            " (is jax[tpu] installed at the lock's jax version, and is no "
            "other process holding the TPU?)" if platform == "tpu" else ""))
  try:
    shape = partitioning.resolve_mesh_shape(mesh_shape, len(devices))
  except partitioning.MeshShapeError as e:
    raise PreflightError(str(e)) from None
  if batch_size is not None and batch_size % shape[0]:
    raise PreflightError(
        "a batch of %d sequences does not divide over the %d devices of "
        "the mesh's data axis" % (batch_size, shape[0]))
  return "%d %s device(s) on %d host(s), mesh (data %d, model %d)" % (
      len(devices), "/".join(kinds), jax.process_count(), shape[0], shape[1])
