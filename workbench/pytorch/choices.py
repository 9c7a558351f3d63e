# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every timed choice of the PyTorch model, by name.

The fused path's open choices (`cuda_choices.CHOICES`: b2, rms_norm,
fd_flex), run by default, and the attention plan's decisions
(`route_choices.CHOICES`: routes, b2_rule, shared_softmax, values_apart),
each against its other outcome for every variant and situation, run when
named. tools/compare_cuda_choices.py runs them; each pair is checked and
timed by `timed_pairs`.
"""

from typing import Callable, List, Tuple

import torch

from workbench.pytorch import cuda_choices
from workbench.pytorch import route_choices
from workbench.pytorch import timed_pairs

DEFAULT = cuda_choices.CHOICES
KNOWN = cuda_choices.CHOICES + route_choices.CHOICES


def compare(dims: timed_pairs.Dims, device: torch.device,
            choices: Tuple[str, ...] = DEFAULT, rounds: int = 10,
            repeats: int = 5, say: Callable[[str], None] = lambda _: None
           ) -> List[timed_pairs.Comparison]:
  """Every requested choice's comparison, in the order given.

  Args:
    dims: the sizes.
    device: where.
    choices: among KNOWN.
    rounds: rounds of turns of each pair.
    repeats: calls of each in a turn.
    say: progress.

  Returns:
    The Comparisons: b2's for D and D+V, a route choice's for each variant
    and situation where it is open.

  Raises:
    ValueError: a choice not among KNOWN.
  """
  out = []
  for choice in choices:
    if choice in route_choices.CHOICES:
      say("comparing %s" % choice)
      out.extend(route_choices.compare(choice, dims, device, rounds,
                                       repeats))
    elif choice in cuda_choices.CHOICES:
      out.extend(cuda_choices.compare(dims, device, (choice,), rounds,
                                      repeats, say))
    else:
      raise ValueError("unknown choice %r (known: %s)" %
                       (choice, ", ".join(KNOWN)))
  return out
