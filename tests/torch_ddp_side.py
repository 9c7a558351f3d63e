# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""One process of test_torch_training's data-parallel checks, without TF.

    RANK=r WORLD_SIZE=w MASTER_ADDR=... MASTER_PORT=... \\
        <conftest.pytorch_python(...)> torch_ddp_side.py WRAPS CASES.json \\
        RESULT.pt

For each way of wrapping the model in WRAPS (comma-separated: `ddp`,
`DistributedDataParallel`; `fsdp`, FSDP2's `fully_shard` as
tools/train_fsdp.py shards it) and each composition in CASES.json (lists of
synthesizing function names), trains a tiny encoder-decoder for 3 SGD steps
on one global batch of 8: with WORLD_SIZE 2, rank r takes rows 4r..4r+3,
the model wrapped (gloo); with WORLD_SIZE 1, all 8 rows, not wrapped (the
same run for every wrap). Each half has as many label tokens as the other,
so the mean over the batch is the mean of the halves' means, which both
wraps' gradient averaging computes. RESULT.pt gets, per wrap and
composition ("+"-joined), the global batch's loss at each step (the ranks'
mean) and the full weights after the last step.
"""

import datetime
import importlib.util
import json
import os
import sys

import torch
from torch import distributed
from torch.distributed import tensor
from torch.nn.parallel import DistributedDataParallel

# Run by path without tests/ on sys.path: the shared loader of the model code.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_code  # pylint: disable=g-import-not-at-top,wrong-import-position

BATCH, STEPS = 8, 3
TRAIN_FSDP = os.path.join(model_code.REPO, "tools", "train_fsdp.py")


def _train_fsdp():
  """tools/train_fsdp.py, loaded by its path."""
  spec = importlib.util.spec_from_file_location("train_fsdp", TRAIN_FSDP)
  tool = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(tool)
  return tool


# Each wrap, called on the model: DDP wraps it, fully_shard shards it in place.
WRAPS = {"ddp": DistributedDataParallel, "fsdp": _train_fsdp().shard}


def _batch():
  """Inputs [8, 7] with padding; labels [8, 6], -100 alike in each half."""
  generator = torch.Generator().manual_seed(0)
  input_ids = torch.randint(2, 64, (BATCH, 7), generator=generator)
  labels = torch.randint(2, 64, (BATCH, 6), generator=generator)
  for row in range(BATCH):
    input_ids[row, 7 - row % 3:] = 0
    labels[row, 6 - row % 4:] = -100
  return input_ids, (input_ids != 0).long(), labels


def _train(modeling, names, rank, world, wrap):
  torch.manual_seed(0)
  config = modeling.MtfSynthesizerConfig(
      vocab_size=64, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2,
      dropout_rate=0.0, synthesizer_max_length=16, factorized_random_k=4,
      factorized_dense_factors=(4, 4), relative_attention_num_buckets=8,
      relative_attention_max_distance=16, encoder_synthesizers=names,
      decoder_synthesizers=names)
  model = modeling.MtfSynthesizerForConditionalGeneration(config)
  model.train()  # z_loss too; dropout_rate is 0
  trained = WRAPS[wrap](model) if world > 1 else model
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
          "weights": {k: _full(v) for k, v in model.state_dict().items()}}


def _full(weight):
  """A weight, gathered where FSDP shards it (a DTensor)."""
  if isinstance(weight, tensor.DTensor):
    weight = weight.full_tensor()
  return weight.detach().clone()


def main():
  wraps, cases_path, result_path = sys.argv[1:4]
  torch.set_num_threads(1)
  rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
  if world > 1:
    distributed.init_process_group(
        "gloo", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=120))
  modeling = model_code.load()
  with open(cases_path) as f:
    cases = json.load(f)
  results = {}
  for wrap in wraps.split(","):
    if world == 1 and results:  # not wrapped: the first wrap's run
      results[wrap] = next(iter(results.values()))
      continue
    results[wrap] = {"+".join(names): _train(modeling, tuple(names), rank,
                                             world, wrap)
                     for names in cases}
  if world > 1:
    distributed.destroy_process_group()
  torch.save(results, result_path)


if __name__ == "__main__":
  main()
