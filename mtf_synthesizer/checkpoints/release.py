# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The original release's `synthesize_mode` strings and checkpoints.

The release (mesh_tensorflow 0.1.21, `transformer_layers.Synthesizer` and
`attention.synthetic_attention`) selects its variant with a mode string. Here
each mode is mapped once to a composition of synthesizing functions, and a
release checkpoint's variables are mapped to this package's names.

Where the release is right (random, dense_minus, random_plus*, dense_plus*)
the same weights give the same outputs. Where it is wrong, the paper wins:
  * `factorized` computes one attention row for all queries (R1 and R2 lack
    the length dimension); here it is FR with R1 R2^T of rank 16 (the
    release's factorized_dim). Its checkpoints cannot be converted.
  * its plus modes and `factorized` hard-code 512 positions; here all use
    max_length.
  * `dense_*` share one [d_kv, N] kernel across heads; here W2 is per head
    (a release kernel is copied to every head).
"""

import re
from typing import Dict, List, Tuple

import numpy as np

from mtf_synthesizer.checkpoints import names
from mtf_synthesizer.core import interface
from mtf_synthesizer.core import synthesizers as synth_lib

RELEASE_SCOPE = "Synthesizer"
SCOPE = "SynthesizerAttention"


def _random_plus(learned):
  return [synth_lib.DotProduct(), synth_lib.Random()], learned


def _dense_plus(learned):
  dense = synth_lib.Dense(use_bias=False, share_query_projection=True)
  return [synth_lib.DotProduct(), dense], learned


MODES = {
    "random": lambda: ([synth_lib.Random()], True),
    "factorized": lambda: ([synth_lib.FactorizedRandom(k=16)], True),
    "dense_minus": lambda: ([synth_lib.Dense(
        use_bias=False, share_query_projection=True)], True),
    "random_plus": lambda: _random_plus(False),
    "random_plus_alpha": lambda: _random_plus(True),
    "dense_plus": lambda: _dense_plus(False),
    "dense_plus_alpha": lambda: _dense_plus(True),
}


def composition(
    mode: str) -> Tuple[List[interface.SynthesizingFunction], bool]:
  """Maps a release mode string to synthesizing functions.

  Args:
    mode: one of MODES.

  Returns:
    (synthesizers, learned_mixture_weights) for SynthesizerAttention.
  """
  if mode not in MODES:
    raise ValueError("Unknown synthesize_mode %r; valid modes: %s." %
                     (mode, ", ".join(sorted(MODES))))
  return MODES[mode]()


def convert_variables(values: Dict[str, np.ndarray],
                      num_heads: int) -> Dict[str, np.ndarray]:
  """Maps a release checkpoint's variables to SynthesizerAttention's.

  Variables outside the release layer's scope are kept as they are.
  Optimizer slots of the release layer are dropped (they are shaped for the
  release's layout); the optimizer starts them afresh.

  Args:
    values: variable name -> value, as read from the checkpoint.
    num_heads: the layers' number of heads.

  Returns:
    variable name -> value, for a model built with SynthesizerAttention.

  Raises:
    ValueError: for a `factorized` (R1/R2) release layer, which is broken.
  """
  converted = {}
  pattern = re.compile(r"^(.*/)%s/(.+)$" % RELEASE_SCOPE)
  for name, value in values.items():
    match = pattern.match(name)
    if not match:
      converted[name] = value
      continue
    prefix, local = match.group(1) + SCOPE + "/", match.group(2)
    if names.is_slot(local):
      continue
    if local in ("R1", "R2"):
      raise ValueError(
          "%s comes from the release's broken 'factorized' mode (one "
          "attention row for every query); it has no faithful equivalent. "
          "Train FactorizedRandom afresh." % name)
    if local == "R":  # [length, heads, memory_length] -> [heads, N, N]
      converted[prefix + "random/R"] = np.transpose(value, (1, 0, 2))
    elif local == "pi/kernel":  # [d_kv, N], shared -> per head
      converted[prefix + "dense/w2"] = np.tile(value[None],
                                               (num_heads, 1, 1))
    elif local == "alpha":  # sigmoid(a) on the synthetic branch
      # softmax([0, a]) == [1 - sigmoid(a), sigmoid(a)], with the dot
      # product first, as in the release.
      a = float(np.reshape(value, []))
      converted[prefix + "mixture/alpha_logits"] = np.array(
          [[0.0] * num_heads, [a] * num_heads], dtype=value.dtype)
    else:
      converted[prefix + local] = value
  return converted
