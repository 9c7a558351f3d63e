# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Command lines for tiny models through the stock t5_mesh_transformer."""

import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

CLI = os.path.join(os.path.dirname(sys.executable), "t5_mesh_transformer")


def train_command(model_dir: str, gin_files: Sequence[str], steps: int,
                  mixture: str = "pydocs_span_corruption", length: int = 64,
                  params: Sequence[str] = ()) -> List[str]:
  """A stock-CLI training command for t5.1.1.tiny on one CPU device."""
  command = [CLI, "--module_import=mtf_synthesizer",
             "--module_import=t5_tasks", "--model_dir=" + model_dir,
             "--gin_file=dataset.gin", "--gin_file=models/t5.1.1.tiny.gin"]
  command += ["--gin_file=" + f for f in gin_files]
  command += ["--gin_param=" + p for p in [
      "MIXTURE_NAME = '%s'" % mixture,
      "utils.run.mesh_shape = ''",
      "utils.run.mesh_devices = ['']",
      "utils.run.train_steps = %d" % steps,
      "utils.run.save_checkpoints_steps = %d" % steps,
      "utils.run.sequence_length = {'inputs': %d, 'targets': %d}" % (
          length, length),
      "utils.run.batch_size = ('tokens_per_batch', %d)" % (4 * length),
      "SynthesizerAttention.max_length = %d" % length,
  ] + list(params)]
  return command


def run(command: List[str],
        env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
  """Runs a command, returning its output; environment additions in env."""
  full_env = dict(os.environ)
  full_env.update(env or {})
  return subprocess.run(command, capture_output=True, text=True,
                        timeout=900, env=full_env)
