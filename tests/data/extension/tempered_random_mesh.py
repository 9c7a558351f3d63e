# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The mesh side of the extension: R's table, tempered per head.

S_h = tau_h R_h, tau a learned temperature per head that starts at 1.
Importing it declares the function (`synthesizing_functions.register`) and
defines the class (registered in mesh's BY_NAME and with gin as
`extension.TemperedRandom`), as the stock CLI's and
`mtf-synthesizer-export-hf`'s `--module_import` do.
"""

import dataclasses

import gin
import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf

from mtf_synthesizer import synthesizers
from mtf_synthesizer import synthesizing_functions as declarations
from mtf_synthesizer.core import interface

NAME = "tempered_random"
# R's declaration under its own name, with the temperature beside R.
_TEMPERED = declarations.FUNCTIONS["random"].renamed(
    NAME, label="R*tau", equation="eq. 4, tempered")
DECLARATION = declarations.register(dataclasses.replace(
    _TEMPERED, variables=_TEMPERED.variables + (declarations.Variable(
        NAME + "/temperature", ("heads",), declarations.ONES),)))


@gin.configurable(module="extension")
class TemperedRandom(synthesizers.Random):
  """tau_h R_h: R's table times a learned temperature per head."""
  name = NAME
  export_ranks = {"R": 3, "temperature": 1}

  def logits(self, inputs, scale=None):
    tau = mtf.get_variable(
        inputs.mesh, "temperature", mtf.Shape(inputs.heads_dims),
        initializer=tf.ones_initializer(), dtype=inputs.variable_dtype)
    return super().logits(inputs, interface.float32(tau, scale))
