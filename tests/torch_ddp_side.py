# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""One process of test_torch_training's DDP check, without TensorFlow.

    RANK=r WORLD_SIZE=w MASTER_ADDR=... MASTER_PORT=... \\
        <conftest.pytorch_python(...)> torch_ddp_side.py CASES.json RESULT.pt

For each composition in CASES.json (lists of synthesizing function names),
trains a tiny encoder-decoder for 3 SGD steps on one global batch of 8:
with WORLD_SIZE 2, rank r takes rows 4r..4r+3 under
`DistributedDataParallel` (gloo); with WORLD_SIZE 1, all 8 rows, no DDP.
Each half has as many label tokens as the other, so the mean over the
batch is the mean of the halves' means, which DDP's gradient averaging
computes. RESULT.pt gets, per composition ("+"-joined), the global batch's
loss at each step (the ranks' mean) and the weights after the last step.
"""

import datetime
import json
import os
import sys

import torch
from torch import distributed
from torch.nn.parallel import DistributedDataParallel

# Run by path without tests/ on sys.path: the shared loader of the model code.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_code  # pylint: disable=g-import-not-at-top,wrong-import-position

BATCH, STEPS = 8, 3


def _batch():
  """Inputs [8, 7] with padding; labels [8, 6], -100 alike in each half."""
  generator = torch.Generator().manual_seed(0)
  input_ids = torch.randint(2, 64, (BATCH, 7), generator=generator)
  labels = torch.randint(2, 64, (BATCH, 6), generator=generator)
  for row in range(BATCH):
    input_ids[row, 7 - row % 3:] = 0
    labels[row, 6 - row % 4:] = -100
  return input_ids, (input_ids != 0).long(), labels


def _train(modeling, names, rank, world):
  torch.manual_seed(0)
  config = modeling.MtfSynthesizerConfig(
      vocab_size=64, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2,
      dropout_rate=0.0, synthesizer_max_length=16, factorized_random_k=4,
      factorized_dense_factors=(4, 4), relative_attention_num_buckets=8,
      relative_attention_max_distance=16, encoder_synthesizers=names,
      decoder_synthesizers=names)
  model = modeling.MtfSynthesizerForConditionalGeneration(config)
  model.train()  # z_loss too; dropout_rate is 0
  trained = DistributedDataParallel(model) if world > 1 else model
  optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
  rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
  input_ids, mask, labels = (x[rows] for x in _batch())
  losses = []
  for _ in range(STEPS):
    loss = trained(input_ids=input_ids, attention_mask=mask,
                   labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    mean = loss.detach().clone()
    if world > 1:
      distributed.all_reduce(mean)
      mean /= world
    losses.append(float(mean))
  return {"losses": losses,
          "weights": {k: v.detach().clone()
                      for k, v in model.state_dict().items()}}


def main():
  cases_path, result_path = sys.argv[1:3]
  torch.set_num_threads(1)
  rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
  if world > 1:
    distributed.init_process_group(
        "gloo", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=120))
  modeling = model_code.load()
  with open(cases_path) as f:
    cases = json.load(f)
  results = {"+".join(names): _train(modeling, tuple(names), rank, world)
             for names in cases}
  if world > 1:
    distributed.destroy_process_group()
  torch.save(results, result_path)


if __name__ == "__main__":
  main()
