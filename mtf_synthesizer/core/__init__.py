# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The paper's core: the synthesizing functions and the layer around them.

  * `interface`: what a function is, `SynthesizingFunction` (its properties:
    needs_queries, needs_keys, indexes_positions, input_independent,
    trainable, marker(), export_settings()) and `SynthesisInputs` (what a
    function may condition on); `BY_NAME`, filled as functions are defined;
  * `synthesizers`: Equations 1-7 and Table 1: DotProduct, Random,
    FixedRandom, FactorizedRandom, Dense, FactorizedDense;
  * `mixture`: their Mixture (eq. 8), and `compose`, the layer's one
    function of those a gin file lists;
  * `layer`: `SynthesizerAttention`, mesh's attention layer around the
    functions: masks, packing, decoding, dropout, values;
  * `reference`: the equations again in NumPy (float64), independent of
    the rest: the tests' and the pictures' ground truth, and Table 1.

The mtf operations they compose are `mtf_synthesizer.ops`; the table of
attentions that names them is `mtf_synthesizer.attentions`.
"""
