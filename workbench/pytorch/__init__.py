# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The workbench's measurements of the PyTorch model.

Each module measures one thing; all need torch and transformers only (the
model code is loaded from the checkout by its path, `models`):

  benchmark        speed and memory of every variant against transformers'
                   T5 (tools/benchmark_torch.py): runs the rounds
  models           the benchmark's dims, presets, settings and models
  measure          one timed training step or generate(), memory, the
                   device, a tool's report files
  flops            a training step's FLOPs (the MFU's numerator)
  profiling        torch.profiler's tables of a step and a generate()
  report           the benchmark's report and its markdown
  device_check     the fused path on a device: equal to eager, in fused
                   kernels (tools/check_torch_device.py)
  inductor_census  what inductor generates for a training step
                   (tools/inductor_census.py)
  timed_pairs      two ways of computing one thing, checked equal and
                   timed in turns
  cuda_choices     the fused path's open choices, each pair timed
  route_choices    the attention plan's decisions, each against its other
                   outcome
  choices          every timed choice by name
                   (tools/compare_cuda_choices.py)

The imports run one way, from the entries (benchmark, device_check,
choices, inductor_census) down to models and measure: no module imports
one that imports it.
"""
