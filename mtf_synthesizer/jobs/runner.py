# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Runs commands as subprocesses: output streamed, timeouts, stops.

`run` is the one runner: it streams the subprocess's output (stdout and
stderr merged) line by line to a log file and a callback, enforces a timeout
and returns a `Result` with the return code, the output's tail and the model
directory's scalars (`events.read_scalars`). `sigterm_raises_stopped` and
`kill_running` make sure that no command outlives a stopped caller.
"""

import collections
import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Union

from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import events

@dataclasses.dataclass
class Result:
  """What a run left.

  Attributes:
    argv: the command run.
    returncode: its exit status.
    output: the tail of its output (stdout and stderr merged; the CLI logs
      to stderr).
    model_dir: the command's model directory (None for a plain argv).
    log_path: the full log, if one was written.
  """
  argv: List[str]
  returncode: int
  output: str
  model_dir: Optional[str] = None
  log_path: Optional[str] = None
  _scalars: Optional[events.Scalars] = dataclasses.field(default=None,
                                                      repr=False)

  @property
  def stderr(self) -> str:
    """The output, by the name `subprocess.CompletedProcess` gives it."""
    return self.output

  @property
  def scalars(self) -> events.Scalars:
    """The model directory's scalars (read once; {} if not a local dir)."""
    if self._scalars is None:
      local = self.model_dir and "://" not in self.model_dir
      self._scalars = (events.read_scalars(self.model_dir)
                       if local and os.path.isdir(self.model_dir) else {})
    return self._scalars


def _kill(proc: subprocess.Popen, group: bool) -> None:
  """Kills a process (and its process group, if it leads one)."""
  try:
    if group:
      os.killpg(proc.pid, signal.SIGKILL)
    else:
      proc.kill()
  except ProcessLookupError:
    pass


class Stopped(Exception):
  """SIGTERM (a batch system's stop, a pre-emption) reached the process."""


def _raise_stopped(signum, frame):
  del signum, frame
  raise Stopped()


@contextlib.contextmanager
def sigterm_raises_stopped() -> Iterator[None]:
  """Within it, SIGTERM raises `Stopped` in the main thread.

  A `run` in the main thread then kills its command before the exception
  leaves it, so the command does not outlive a stopped tool (by default a
  SIGTERM ends the tool and leaves its command running, writing on into
  the model directory). The previous handler is restored on exit. Call it
  from the main thread.

  Yields:
    Nothing.
  """
  previous = signal.signal(signal.SIGTERM, _raise_stopped)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


# The processes `run` is running, in any thread: {process: leads a group}.
_running: Dict[subprocess.Popen, bool] = {}
_running_lock = threading.Lock()


def kill_running() -> int:
  """Kills every command that `run` is running, in any thread.

  A tool that runs commands from worker threads calls it when it is
  stopped (Ctrl-C, SIGTERM), so that no command outlives it and writes on
  into a model directory that a resumed tool starts over. Each `run` then
  returns the killed command's Result (a negative return code).

  Returns:
    How many commands were running.
  """
  with _running_lock:
    running = list(_running.items())
  for proc, group in running:
    if proc.poll() is None:
      _kill(proc, group)
  return len(running)


def run(command: Union[commands.Command, Sequence[str]],
        log_path: Optional[str] = None,
        on_line: Optional[Callable[[str], None]] = None,
        timeout: Optional[float] = None,
        keep_chars: int = 1 << 20) -> Result:
  """Runs a command, streaming its output line by line.

  Args:
    command: a `commands.Command` (its environment additions apply) or an
      argv.
    log_path: if given, the command (shell text) and the whole output are
      written there.
    on_line: called with each line of output, as it comes.
    timeout: seconds; the process (and what it started) is killed when they
      have passed.
    keep_chars: how much of the output's end `Result.output` keeps.

  Returns:
    The Result.

  Raises:
    subprocess.TimeoutExpired: after the timeout (the process is killed).
  """
  if isinstance(command, commands.Command):
    argv, model_dir = command.argv(), command.model_dir
    env = dict(os.environ, **command.env)
  else:
    argv, model_dir, env = list(command), None, None
  kept, size = collections.deque(), 0
  timed_out = threading.Event()
  log = open(log_path, "w") if log_path else None
  try:
    if log:
      log.write(commands.format_command(argv) + "\n\n")
    # With a timeout, the command gets its own process group, so that what it
    # started dies with it (and the pipe closes).
    group = bool(timeout)
    with subprocess.Popen(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          errors="replace", bufsize=1, env=env,
                          start_new_session=group) as proc:
      with _running_lock:
        _running[proc] = group
      try:
        def on_timeout():
          timed_out.set()
          _kill(proc, group=True)
        timer = threading.Timer(timeout, on_timeout) if timeout else None
        if timer:
          timer.start()
        try:
          for line in proc.stdout:
            if log:
              log.write(line)
            if on_line:
              on_line(line)
            kept.append(line)
            size += len(line)
            while size > keep_chars and len(kept) > 1:
              size -= len(kept.popleft())
        except BaseException:  # Ctrl-C or a failing callback: stop the run.
          _kill(proc, group)
          raise
        finally:
          if timer:
            timer.cancel()
        returncode = proc.wait()
      finally:
        with _running_lock:
          _running.pop(proc, None)
  finally:
    if log:
      log.close()
  output = "".join(kept)[-keep_chars:]
  if timed_out.is_set():
    raise subprocess.TimeoutExpired(argv, timeout, output=output)
  return Result(argv, returncode, output, model_dir, log_path)
