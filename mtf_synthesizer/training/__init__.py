# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Training aids: what the stock CLI's training loop gains from the package.

  * `optimize`: `LeanAdafactorOptimizer`, mesh's Adafactor update with
    fewer passes over large variables (`synthesizer/lean_adafactor.gin`);
  * `determinism`: a training loop whose step increment is ordered after
    the step's updates, so that same-seed runs agree;
  * `summaries`: scalar summaries on TPU, CPU and GPU, inside mesh's loops.
"""
