# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Where a model's training step and `generate()` spend their time.

`torch.profiler`'s table of operators (and CUDA kernels) of one training
step and one `generate()` of a model, with the count of what they
launched, written as `<label>.profile.txt` in `Settings.profile_dir`.
"""

import os
from typing import Any, Callable, Dict

import torch

from workbench.pytorch import measure
from workbench.pytorch import models as bench_models

# Rows of each profile's table.
PROFILE_ROWS = 30


def _profiled(device: torch.device, work: Callable[[], Any]) -> str:
  """`work()` under torch.profiler; its table and what it launched."""
  activities = [torch.profiler.ProfilerActivity.CPU]
  if device.type == "cuda":
    activities.append(torch.profiler.ProfilerActivity.CUDA)
  with torch.profiler.profile(activities=activities) as profiler:
    work()
    measure.sync(device)
  events = profiler.key_averages()
  operators = sum(e.count for e in events if e.key.startswith("aten::"))
  line = "%d aten operator calls" % operators
  sort = "self_cpu_time_total"
  if device.type == "cuda":
    kernels = sum(e.count for e in profiler.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA)
    line += ", %d CUDA kernels and copies" % kernels
    sort = "self_device_time_total"
  return line + "\n" + events.table(sort_by=sort, row_limit=PROFILE_ROWS)


def profile_path(profile_dir: str, label: str) -> str:
  """The file of a model's profile ("D+V" -> D_V.profile.txt)."""
  return os.path.join(profile_dir, label.replace("+", "_") + ".profile.txt")


def write_profile(entry: measure.Entry, batch: Dict[str, torch.Tensor],
                  inputs: Dict[str, torch.Tensor], dims: bench_models.Dims,
                  device: torch.device,
                  settings: bench_models.Settings) -> str:
  """Profiles one training step and one `generate()` of a model.

  Args:
    entry: the model, on `device`, warmed up.
    batch: the training batch.
    inputs: generate()'s inputs.
    dims: the sizes.
    device: where it runs.
    settings: `profile_dir` and the cache.

  Returns:
    The path of the file written.
  """
  sections = ["%s (%s) on %s; %s" % (
      entry.label, "+".join(entry.components) or "transformers' T5",
      measure.device_name(device), dims.describe())]
  sections.append("## One training step\n" + _profiled(
      device, lambda: measure.train_step(entry, batch, device)))
  if settings.generate_repeats:
    sections.append("## One generate() (%d new tokens, %s cache)\n" % (
        dims.new_tokens, settings.cache_implementation or "dynamic") +
                    _profiled(device, lambda: measure.generate(
                        entry.model, inputs, dims, device,
                        settings.cache_implementation,
                        compiled=settings.compiles_generate)))
  os.makedirs(settings.profile_dir, exist_ok=True)
  path = profile_path(settings.profile_dir, entry.label)
  with open(path, "w") as f:
    f.write("\n\n".join(sections) + "\n")
  return path
