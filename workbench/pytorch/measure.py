# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch benchmark's measurements of one model.

The device (`resolve_device`, `device_name`), one timed training step
(`train_step`: forward, backward and AdamW step, bf16 autocast on CUDA) and
one timed greedy `generate()` (`generate`), the state a model and its
optimizer hold (`state_bytes`), the bytes a training forward saves for its
backward (`saved_activation_bytes`), the ATen operators a training step and
a decoding step dispatch (`OperatorCount`, `training_operator_calls`,
`decode_operator_calls`) and the device's matmul peak (`matmul_peak`,
the denominator of the model-FLOPs utilization).
"""

import contextlib
import dataclasses
import itertools
import json
import os
import platform
import time
from typing import Any, ContextManager, Dict, List, Optional, Tuple

import torch
import transformers
from torch.utils import _python_dispatch
from transformers.modeling_outputs import BaseModelOutput

from workbench.pytorch import models as bench_models

def resolve_device(device: Optional[str] = None) -> torch.device:
  """The device to measure on: `device`, or CUDA when present, else CPU."""
  if device:
    return torch.device(device)
  return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def write_report(output_dir: str, name: str, text: str, data: Any) -> None:
  """Writes a tool's report as NAME.md (text) and NAME.json (data).

  Args:
    output_dir: the folder (made if missing).
    name: the files' stem.
    text: the markdown the tool printed.
    data: what json.dump writes.
  """
  os.makedirs(output_dir, exist_ok=True)
  path = os.path.join(output_dir, name)
  with open(path + ".md", "w") as f:
    f.write(text)
  with open(path + ".json", "w") as f:
    json.dump(data, f, indent=1)


def device_name(device: torch.device) -> str:
  """The device in words: the GPU's name, or the CPU model and its cores."""
  if device.type == "cuda":
    return torch.cuda.get_device_name(device)
  model = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          model = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  return "CPU: %s, %d cores visible, torch threads %d" % (
      model, len(os.sched_getaffinity(0)) if hasattr(
          os, "sched_getaffinity") else os.cpu_count(),
      torch.get_num_threads())


def make_optimizer(model: torch.nn.Module,
                   learning_rate: float) -> torch.optim.Optimizer:
  """AdamW, fused where the device supports it, else foreach."""
  params = [p for p in model.parameters() if p.requires_grad]
  try:
    return torch.optim.AdamW(params, lr=learning_rate, fused=True)
  except (RuntimeError, ValueError):
    return torch.optim.AdamW(params, lr=learning_rate, foreach=True)


def move(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
         device: torch.device) -> None:
  """Moves a model and its optimizer state (in place)."""
  model.to(device)
  for state in optimizer.state.values():
    for key, value in state.items():
      if torch.is_tensor(value):
        state[key] = value.to(device)


def state_bytes(model: torch.nn.Module,
                optimizer: torch.optim.Optimizer) -> int:
  """Weights, buffers and optimizer state, in bytes."""
  tensors = list(model.parameters()) + list(model.buffers())
  for state in optimizer.state.values():
    tensors += [v for v in state.values() if torch.is_tensor(v)]
  seen, total = set(), 0
  for t in tensors:
    if id(t) not in seen:
      seen.add(id(t))
      total += t.numel() * t.element_size()
  return total


def saved_activation_bytes(model: torch.nn.Module,
                           batch: Dict[str, torch.Tensor],
                           device: torch.device) -> int:
  """Bytes one training forward saves for its backward.

  Every tensor autograd saves passes `torch.autograd.graph.saved_tensors_hooks`'
  pack hook; each storage counts once (views and tensors saved twice share
  one), the model's parameters and buffers not at all. Runs anywhere.

  Args:
    model: in training mode.
    batch: the training batch (with labels).
    device: where it runs (bf16 autocast on CUDA, as the timed steps).

  Returns:
    The bytes.
  """
  weights = {t.untyped_storage().data_ptr()
             for t in itertools.chain(model.parameters(), model.buffers())}
  storages = {}

  def pack(tensor):
    storage = tensor.untyped_storage()
    if storage.data_ptr() not in weights:
      storages[storage.data_ptr()] = storage.nbytes()
    # Kept alive until the graph goes (no address is reused); detached: a
    # node's own output packed as itself would hold the graph in a cycle
    # that outlives the call (every model's activations, on the device).
    return tensor.detach()

  with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    with autocast(device):
      loss = model(**batch, use_cache=False).loss
  del loss
  return sum(storages.values())


class OperatorCount(_python_dispatch.TorchDispatchMode):
  """Counts the ATen operators dispatched while it is active.

  Below autograd: a backward's operators count too, and so do views; an
  operator that decomposes counts as its parts.

  Attributes:
    calls: the operators counted so far.
  """

  def __init__(self):
    super().__init__()
    self.calls = 0

  def __torch_dispatch__(self, func, types, args=(), kwargs=None):
    self.calls += 1
    return func(*args, **(kwargs or {}))


def training_operator_calls(model: torch.nn.Module,
                            batch: Dict[str, torch.Tensor],
                            device: torch.device) -> int:
  """ATen operators one training forward and backward dispatch.

  The optimizer's step (one fused or foreach call per device) is left out;
  the gradients are dropped after.

  Args:
    model: in training mode, its gradients None.
    batch: the training batch (with labels).
    device: where it runs (bf16 autocast on CUDA, as the timed steps).

  Returns:
    The count.
  """
  with OperatorCount() as count:
    with autocast(device):
      loss = model(**batch, use_cache=False).loss
    loss.backward()
  model.zero_grad(set_to_none=True)
  return count.calls


def sync(device: torch.device) -> None:
  """Waits for the device's queued work (CUDA); nothing elsewhere."""
  if device.type == "cuda":
    torch.cuda.synchronize(device)


def autocast(device: torch.device) -> ContextManager[Any]:
  """bf16 autocast on CUDA, as the timed steps run; nothing elsewhere."""
  if device.type == "cuda":
    return torch.autocast("cuda", dtype=torch.bfloat16)
  return contextlib.nullcontext()


@dataclasses.dataclass
class Entry:
  """One model under measurement, and what was measured of it so far.

  Attributes:
    label: "T5" or a variant's label.
    components: the variant's synthesizing functions (T5: none).
    model: the model, in training mode.
    optimizer: its AdamW.
    forward: what a training step calls: the model, or its compiled call.
    step_s: the timed training steps' seconds.
    generate_s: the timed `generate()` calls' seconds.
    generated: new tokens of one `generate()`.
    peak_bytes: peak memory of its turns on CUDA (None elsewhere).
    saved_bytes: `saved_activation_bytes`.
    train_ops: `training_operator_calls`.
    train_flops: a training step's FLOPs by term
      (`torch_benchmark_flops.training_flops`).
    decode_ops_per_step: `decode_operator_calls`.
    losses: every training step's loss.
    first_step_s: the first training step's seconds (with `compile`, the
      compilation's too).
    first_generate_s: the first `generate()`'s seconds (likewise).
    error: None, or why the model stopped.
  """
  label: str
  components: Tuple[str, ...]
  model: torch.nn.Module
  optimizer: torch.optim.Optimizer
  forward: Any
  step_s: List[float] = dataclasses.field(default_factory=list)
  generate_s: List[float] = dataclasses.field(default_factory=list)
  generated: int = 0
  peak_bytes: Optional[int] = None
  saved_bytes: Optional[int] = None
  train_ops: Optional[int] = None
  train_flops: Dict[str, int] = dataclasses.field(default_factory=dict)
  decode_ops_per_step: Optional[float] = None
  losses: List[float] = dataclasses.field(default_factory=list)
  first_step_s: Optional[float] = None
  first_generate_s: Optional[float] = None
  error: Optional[str] = None


def train_step(entry: Entry, batch: Dict[str, torch.Tensor],
               device: torch.device) -> float:
  """One training step; returns its seconds."""
  sync(device)
  start = time.perf_counter()
  with autocast(device):
    loss = entry.forward(**batch, use_cache=False).loss
  loss.backward()
  entry.optimizer.step()
  entry.optimizer.zero_grad(set_to_none=True)
  sync(device)
  seconds = time.perf_counter() - start
  entry.losses.append(float(loss.detach()))
  if entry.first_step_s is None:
    entry.first_step_s = seconds
  return seconds


def compile_blocks(model: torch.nn.Module, **compile_kwargs: Any) -> int:
  """Compiles each repeated block of the model in place (regional).

  The blocks are the modules whose class the model names in
  `_no_split_modules` (transformers' name for its repeated layer): the
  stacks' identical blocks share one compiled graph, so compiling costs
  about one block's graph per stack and call shape instead of the whole
  unrolled model. The Synthesizer's attention reads and writes the cache
  by its layer's index in the methods it names in
  `LAYER_INDEXED_METHODS`; they run uncompiled (`torch.compiler.disable`),
  since dynamo would specialize each block's graph on the index: decoding
  then compiles each block's graphs once per kind of step (prompt, next
  token) at any depth. A
  training step without a cache (`use_cache=False`, as `train_step`'s)
  never calls them: each stack's blocks make one whole graph.

  Args:
    model: a transformers model.
    **compile_kwargs: for `torch.compile` (backend, fullgraph, ...).

  Returns:
    How many modules were compiled.
  """
  classes = set(getattr(model, "_no_split_modules", None) or ())
  blocks = [m for m in model.modules() if type(m).__name__ in classes]
  if not blocks:
    raise ValueError("%s names no repeated block in _no_split_modules" %
                     type(model).__name__)
  for block in blocks:
    for module in block.modules():
      for name in getattr(module, "LAYER_INDEXED_METHODS", ()):
        setattr(module, name, torch.compiler.disable(getattr(module, name)))
    block.compile(**compile_kwargs)
  return len(blocks)


def blocks_compiled(model: torch.nn.Module) -> bool:
  """Whether a module of the model was compiled in place (`compile_blocks`).
  """
  # nn.Module.compile() keeps the compiled call here.
  return any(getattr(m, "_compiled_call_impl", None) is not None
             for m in model.modules())


def _generation_config(dims: bench_models.Dims,
                       cache_implementation: Optional[str],
                       compiled: bool,
                       blocks_compiled: bool = False
                      ) -> transformers.GenerationConfig:
  """Greedy decoding of exactly `dims.new_tokens` tokens.

  Args:
    dims: the sizes.
    cache_implementation: None (DynamicCache) or "static".
    compiled: with a static cache, the decoding steps are compiled on every
      device (transformers compiles them on CUDA by itself; its
      `CompileConfig` reaches a CPU through `_compile_all_devices`).
    blocks_compiled: the model's blocks are compiled (`compile_blocks`):
      transformers' own compilation of the whole step is turned off, so
      that the blocks' graphs serve the decoding steps too.

  Returns:
    The GenerationConfig.
  """
  compile_config = None
  if compiled and cache_implementation == "static":
    compile_config = transformers.CompileConfig()
    # pylint: disable-next=protected-access
    compile_config._compile_all_devices = True
  return transformers.GenerationConfig(
      max_new_tokens=dims.new_tokens, min_new_tokens=dims.new_tokens,
      do_sample=False, num_beams=1, use_cache=True, pad_token_id=0,
      eos_token_id=1, decoder_start_token_id=0,
      cache_implementation=cache_implementation,
      compile_config=compile_config,
      disable_compile=True if blocks_compiled else None)


def generate(model: torch.nn.Module, inputs: Dict[str, torch.Tensor],
             dims: bench_models.Dims, device: torch.device,
             cache_implementation: Optional[str] = None,
             count: Optional[OperatorCount] = None,
             compiled: bool = False) -> Tuple[float, int]:
  """One greedy `generate()`; returns (seconds, new tokens).

  `count`, if given, counts the operators of `generate()` itself (the
  encoder's left out). `compiled`: see `_generation_config`.
  """
  model.eval()
  config = _generation_config(dims, cache_implementation, compiled,
                              blocks_compiled(model))
  sync(device)
  start = time.perf_counter()
  with autocast(device), torch.no_grad():
    # The encoder runs here (timed), not inside generate(): the same work,
    # and independent of the keywords generate() passes an encoder.
    encoded = model.get_encoder()(**inputs)
    encoded = BaseModelOutput(last_hidden_state=encoded[0])
    with count or contextlib.nullcontext():
      out = model.generate(attention_mask=inputs["attention_mask"],
                           encoder_outputs=encoded,
                           generation_config=config)
  sync(device)
  seconds = time.perf_counter() - start
  model.train()
  # The output starts with the decoder's start token.
  return seconds, out.shape[0] * (out.shape[1] - 1)


def decode_operator_calls(model: torch.nn.Module,
                          inputs: Dict[str, torch.Tensor],
                          dims: bench_models.Dims,
                          device: torch.device) -> float:
  """ATen operators per decoding step of one greedy `generate()`.

  With transformers' DynamicCache and nothing compiled, whatever cache the
  timed calls use; the encoder is left out. A step is one new token of
  every row.

  Args:
    model: the model (left in training mode, as `generate()` calls here
      leave it).
    inputs: generate()'s inputs.
    dims: the sizes (`new_tokens`: the steps).
    device: where it runs.

  Returns:
    The operators of the call divided by its decoding steps.
  """
  count = OperatorCount()
  _, tokens = generate(model, inputs, dims, device, None, count)
  return count.calls / (tokens / dims.batch)


def matmul_peak(device: torch.device, size: Optional[int] = None,
                repeats: int = 5) -> Dict[str, Any]:
  """The device's matmul peak, timed in this process: MFU's denominator.

  A square matmul [size, size] x [size, size] in the dtype the training
  steps compute in (bf16 on CUDA, float32 elsewhere), with torch's threads
  as set; the fastest of `repeats` timings (after two untimed calls), as
  the peak is what the device reaches at its best.

  Args:
    device: where.
    size: the matrices' side; default 8192 on CUDA, 1024 elsewhere.
    repeats: timings.

  Returns:
    {"flops_per_s": 2 size^3 / the fastest time, "size", "dtype",
    "seconds" (the fastest matmul), "repeats"}.
  """
  cuda = device.type == "cuda"
  size = size or (8192 if cuda else 1024)
  dtype = torch.bfloat16 if cuda else torch.float32
  a, b = (torch.randn(size, size, device=device, dtype=dtype)
          for _ in range(2))
  # Several matmuls per timing on CUDA: one is shorter than its launch.
  calls = 10 if cuda else 1
  best = float("inf")
  for i in range(2 + repeats):
    sync(device)
    start = time.perf_counter()
    for _ in range(calls):
      out = a @ b
    sync(device)
    if i >= 2:
      best = min(best, (time.perf_counter() - start) / calls)
  del a, b, out
  if cuda:
    torch.cuda.empty_cache()
  return {"flops_per_s": 2 * size**3 / best, "size": size,
          "dtype": str(dtype).replace("torch.", ""), "seconds": best,
          "repeats": repeats}
