# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A synthesizing function defined outside the package: R, tempered per head.

R's table (eq. 4) times a learned temperature per head that starts at 1:
S_h = tau_h R_h. Loaded with `mtf_synthesizer.hf_tools.extensions.
load_extension`; its imports are relative,
so the same file runs beside a saved model's code.
"""

import dataclasses

import torch
from torch import nn

# pylint: disable=relative-beyond-top-level
from .configuration_mtf_synthesizer import register_function
from .functions_mtf_synthesizer import MtfSynthesizerRandom
from .synthesizing_functions_mtf_synthesizer import FUNCTIONS
from .synthesizing_functions_mtf_synthesizer import ONES
from .synthesizing_functions_mtf_synthesizer import Variable

NAME = "tempered_random"
# R's declaration under its own name, with the temperature beside R (as
# the mesh side declares it).
_TEMPERED = FUNCTIONS["random"].renamed(NAME, label="R*tau",
                                        equation="eq. 4, tempered")
DECLARATION = dataclasses.replace(_TEMPERED, variables=_TEMPERED.variables + (
    Variable(NAME + "/temperature", ("heads",), ONES),))
register_function(DECLARATION)


class MtfSynthesizerTemperedRandom(MtfSynthesizerRandom):
  """tau_h R_h: R's table, scaled by a learned temperature per head."""
  name = NAME

  def __init__(self, config):
    super().__init__(config)
    self.temperature = nn.Parameter(torch.empty(config.num_heads))

  def initializers(self, config):
    return dict(super().initializers(config),
                temperature=("constant", 1.0))

  def forward(self, hidden, queries, positions, scale=None):
    tau = self.temperature if scale is None else self.temperature * scale
    return super().forward(hidden, queries, positions, tau)
