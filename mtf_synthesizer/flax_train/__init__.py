# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Trains the Flax Synthesizer as T5X trains (`mtf-synthesizer-jax-train`).

  schedules.py     mesh's learning-rate schedules (gin: learning_rate_schedules.*)
  optimizer.py     mesh's Adafactor (T5's defaults) on optax, factored in
                   mesh's variable shapes
  partitioning.py  the (data, model) device mesh and the logical axis rules
  trainer.py       the train state and the jit-compiled train and eval steps
  checkpoints.py   orbax checkpoints of the train state in the model directory
  data.py          seqio's tasks (t5_tasks') as numpy batches
  evaluation.py    the tasks' own metrics by decoding (seqio's Evaluator)
  progress.py      the progress line and TensorBoard's metrics
  summaries.py     scalar event files (TensorFlow's writer)
  preflight.py     the one-line checks before anything compiles
  train.py         the loop, `train()`, configured by gin
"""
