# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The checkout the workbench runs from: its root and its commit.

The scripts in `tools/` find the checkout one way, `import _checkout`
(`tools/_checkout.py` puts its root first on `sys.path`), so they import
this working tree's `mtf_synthesizer`, `t5_tasks` and `workbench` (an edit
is live at once). `use_for_subprocesses` does the same for the stock-CLI
processes a tool starts.
"""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def commit() -> str:
  """The checkout's git commit, with "+dirty" when tracked files are edited.

  Returns:
    The commit, or "unknown" outside a git checkout (an exported tree).
  """
  if not os.path.exists(os.path.join(ROOT, ".git")):
    return "unknown"
  try:
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True
                          ).stdout.strip()
    edited = subprocess.run(
        ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
  return head + ("+dirty" if edited else "")


def use_for_subprocesses() -> None:
  """Puts the checkout first on `PYTHONPATH` for the processes started next.

  The stock CLI then imports this working tree's packages, as the tool
  itself does; the installed copy only contributes its start-up hook.
  """
  paths = [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(
      os.pathsep) if p and os.path.realpath(p) != os.path.realpath(ROOT)]
  os.environ["PYTHONPATH"] = os.pathsep.join(paths)
