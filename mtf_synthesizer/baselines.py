# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The baselines: one table for the gin checks, the tools and the docs.

A baseline is one gin file under `gin/baselines/` that puts another
attention replacement, one the paper compares the Synthesizers with, in the
layer stacks where it is valid (docs/baselines.md). Each row names the file,
the paper's label for it, where the paper reports it, and whether it can
serve a causal stack (a decoder, a decoder-only language model).

Adding a baseline: its layer, its gin file, its test, and one row here.
"""

import dataclasses
from typing import Tuple


@dataclasses.dataclass(frozen=True)
class Baseline:
  """One baseline attention replacement.

  Attributes:
    name: the gin file's stem (`baselines/<name>.gin`).
    label: the paper's name for it (Tables 4-7), or a short name where the
      paper has none.
    reference: the paper that defines it.
    paper_tables: the Synthesizer paper's tables that report it.
    causal: it can replace the self-attention of a causal stack (a decoder,
      a language model). False: encoders and encoder-only models only; in
      an encoder-decoder the decoder keeps its self-attention.
  """
  name: str
  label: str
  reference: str
  paper_tables: Tuple[str, ...] = ()
  causal: bool = True

  @property
  def gin_file(self) -> str:
    """The `--gin_file` argument."""
    return "baselines/%s.gin" % self.name


BASELINES = (
    Baseline("lightweight_conv", "LightConv",
             "Wu et al. 2019, Pay Less Attention with Lightweight and "
             "Dynamic Convolutions", ("Table 4",)),
    Baseline("dynamic_conv", "DyConv",
             "Wu et al. 2019, Pay Less Attention with Lightweight and "
             "Dynamic Convolutions", ("Table 4", "Tables 5-6")),
    Baseline("local_attention", "Local",
             "mesh's LocalSelfAttention window (not in the paper)"),
    Baseline("linformer", "Linformer",
             "Wang et al. 2020, Linformer: Self-Attention with Linear "
             "Complexity", ("Table 7",), causal=False),
)

BY_NAME = {b.name: b for b in BASELINES}
BY_LABEL = {b.label: b for b in BASELINES}
NAMES = tuple(b.name for b in BASELINES)


def get(name: str) -> Baseline:
  """Returns the baseline called `name` (a gin stem or the paper's label).

  Args:
    name: a baseline name or label.

  Returns:
    A Baseline.

  Raises:
    ValueError: for an unknown name, listing the known ones.
  """
  baseline = BY_NAME.get(name) or BY_LABEL.get(name)
  if baseline is None:
    raise ValueError("Unknown baseline %r; known: %s." %
                     (name, ", ".join(NAMES)))
  return baseline
