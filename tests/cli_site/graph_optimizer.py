# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Whether the tests' stock-CLI sessions on CPU run TF's graph optimizer.

TF's graph optimizer (Grappler) rewrites a graph when a session first runs
it. On TPU mesh turns it off (`utils.get_estimator`: it slows start-up down
and gains little there); on CPU the estimator's default session config keeps
it, and for a short run, the demo, a test, decoding a few inputs, the
rewriting costs more than it saves: on the tests' tiny model, 2.1 of the
18.1 CPU-seconds of a two-step training run (four runs each way, side by
side, 2026-11-25).
With the environment variable `MTF_SYNTH_GRAPH_OPTIMIZER=0`, the test
suite's stock-CLI runs (through `sitecustomize.py` here) turn it off in the
estimator's default session config (the package's
`stock_cli.settings.set_session_edit`, which `MTF_SYNTH_CPU_DEVICES` edits
too), as mesh does on TPU. The model computes the same functions; TF then
fuses fewer ops, so floats may differ in their last bits. Unset or 1: TF's
default. The suite's runs set it to 0; a user's runs keep TF's default.
"""

from mtf_synthesizer.stock_cli import settings as cli_settings
import switches

ENV_VAR = "MTF_SYNTH_GRAPH_OPTIMIZER"


def _without_graph_optimizer(config):
  config.graph_options.rewrite_options.disable_meta_optimizer = True


def install_from_env() -> bool:
  """Applies `MTF_SYNTH_GRAPH_OPTIMIZER`; returns whether it optimizes.

  Returns:
    False when the variable is 0, else True.

  Raises:
    ValueError: when the variable is set to anything but 0 or 1.
  """
  optimizes = switches.switch_from_env(ENV_VAR)
  cli_settings.set_session_edit(
      ENV_VAR, None if optimizes else _without_graph_optimizer)
  return optimizes
