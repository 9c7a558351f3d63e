# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Trains a Synthesizer sharded over every process of a node (FSDP2).

    torchrun --nproc_per_node=8 tools/train_fsdp.py \\
        --model_dir=$MODEL_DIR/hf --output_dir=$MODEL_DIR/hf_fsdp

Each of torchrun's processes loads the model of `--model_dir` (an export of
`mtf-synthesizer-export-hf`, or any `save_pretrained` directory of the
PyTorch model with its code), shards it with PyTorch's `fully_shard` (each
process keeps 1/world of every weight, gathered for the module that runs),
and trains it on its share of each global batch: the loss and the update
are those of one process on the whole batch. On GPUs the processes talk
over NCCL, one GPU each (`LOCAL_RANK`); without GPUs over gloo, on CPU.
Rank 0 prints each step's loss (the mean over the global batch) and writes
the trained model, gathered, to `--output_dir`.

The batches are a toy task, a copy of random tokens (`copy_task`): put a
data loader there. The optimizer is AdamW: its element-wise update is the
same on a shard as on the whole weight, where Adafactor's factored moments
and `mesh_optimizer`'s RMS-scaled steps read a whole weight.
"""

import argparse
import datetime
import os
from typing import Optional, Tuple

import torch
from torch import distributed
from torch import nn
from torch.distributed.checkpoint import state_dict as dcp
from torch.distributed import device_mesh as mesh_lib
from torch.distributed import fsdp

# The modules that are FSDP units of their own, innermost first, then the
# model itself (embeddings, final norms, output layer). T5's relative
# position bias table lives in the first block's self-attention but is read
# by its stack before any block runs, so it is a unit apart, gathered for
# that one lookup.
UNITS = ("MtfSynthesizerRelativeBias", "MtfSynthesizerBlock")


def shard(model: nn.Module,
          mesh: Optional[mesh_lib.DeviceMesh] = None) -> nn.Module:
  """Shards a Synthesizer in place with FSDP2: UNITS' modules, then it.

  Args:
    model: any of the PyTorch model's classes, on the mesh's device.
    mesh: the processes to shard over (None: all, on the default device).

  Returns:
    The model (its class now FSDP's subclass of it).
  """
  for unit in UNITS:
    for module in list(model.modules()):
      if type(module).__name__ == unit:
        fsdp.fully_shard(module, mesh=mesh)
  fsdp.fully_shard(model, mesh=mesh)
  return model


def copy_task(step: int, global_batch: int, length: int, vocab_size: int,
              rank: int, world: int) -> torch.Tensor:
  """This rank's rows of step `step`'s global batch of token ids.

  Args:
    step: the step (it seeds the batch, the same in every process).
    global_batch: rows of the whole batch; a multiple of `world`.
    length: tokens per row.
    vocab_size: ids are drawn from [2, vocab_size) (0 pads, 1 ends).
    rank: this process.
    world: the processes.

  Returns:
    [global_batch / world, length] ids, rows rank·b .. rank·b + b - 1.
  """
  generator = torch.Generator().manual_seed(step)
  ids = torch.randint(2, vocab_size, (global_batch, length),
                      generator=generator)
  rows = global_batch // world
  return ids[rank * rows:(rank + 1) * rows]


def _setup() -> Tuple[int, int, torch.device]:
  """Joins torchrun's process group: (rank, world size, this device)."""
  rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
  if torch.cuda.is_available():
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    backend = "nccl"
  else:
    device, backend = torch.device("cpu"), "gloo"
  distributed.init_process_group(backend, timeout=datetime.timedelta(
      minutes=10))
  return rank, world, device


def _load(model_dir: str) -> nn.Module:
  """The model of a directory: its seq2seq or causal LM class."""
  import transformers  # pylint: disable=g-import-not-at-top
  config = transformers.AutoConfig.from_pretrained(model_dir,
                                                   trust_remote_code=True)
  auto = (transformers.AutoModelForSeq2SeqLM if config.is_encoder_decoder
          else transformers.AutoModelForCausalLM)
  return auto.from_pretrained(model_dir, trust_remote_code=True,
                              dtype=torch.float32)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True,
                      help="the model to train (config.json, weights, code)")
  parser.add_argument("--output_dir",
                      help="where rank 0 writes the trained model")
  parser.add_argument("--steps", type=int, default=100)
  parser.add_argument("--global_batch", type=int, default=64,
                      help="rows per step over all processes")
  parser.add_argument("--length", type=int, default=16,
                      help="tokens per row, at most synthesizer_max_length")
  parser.add_argument("--learning_rate", type=float, default=1e-3)
  args = parser.parse_args(argv)

  rank, world, device = _setup()
  if args.global_batch % world:
    parser.error("--global_batch=%d is not a multiple of the %d processes"
                 % (args.global_batch, world))
  torch.manual_seed(0)
  model = _load(args.model_dir).to(device)
  model.train()
  shard(model, mesh_lib.init_device_mesh(device.type, (world,)))
  optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate,
                                weight_decay=0.0)
  for step in range(args.steps):
    ids = copy_task(step, args.global_batch, args.length,
                    model.config.vocab_size, rank, world).to(device)
    # A seq2seq model learns to copy its input; a causal LM, its next token.
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    # Every row has as many label tokens: the batch's mean is the ranks'.
    mean = loss.detach().clone()
    distributed.all_reduce(mean)
    if rank == 0:
      print("step %d loss %.9g" % (step + 1, float(mean) / world), flush=True)

  if args.output_dir:
    weights = dcp.get_model_state_dict(model, options=dcp.StateDictOptions(
        full_state_dict=True, cpu_offload=True))
    if rank == 0:
      # Saved from an unsharded model: transformers would write FSDP's
      # subclass of the model as the class to load.
      trained = _load(args.model_dir)
      trained.load_state_dict(weights)
      trained.save_pretrained(args.output_dir)
  distributed.destroy_process_group()


if __name__ == "__main__":
  main()
