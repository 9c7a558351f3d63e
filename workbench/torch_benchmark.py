# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Speed and memory of the PyTorch Synthesizer against transformers' T5.

Every variant of the attention table (`mtf_synthesizer/attentions.py`:
V, R, Fix, FR, D, FD and the mixtures) as a
`MtfSynthesizerForConditionalGeneration`, and transformers' own
`T5ForConditionalGeneration` (label "T5") as the baseline, at the same dims
and attention implementation, side by side in one process. For each model:

  * training steps/s: forward, backward and AdamW step (fused where the
    device has it), the `labels=` loss, `use_cache=False`, dropout on; bf16
    autocast on CUDA, float32 on CPU;
  * greedy `generate()` new tokens/s with the cache (every row generates
    exactly `new_tokens` tokens);
  * peak memory of a training step: on CUDA `torch.cuda.max_memory_allocated`
    with only that model (its weights, gradients and optimizer state) on the
    device; on CPU torch keeps no allocator statistics, so none is given
    ("n/a"); the state (weights, buffers, optimizer moments) is given on
    every device;
  * saved activations, on every device: the bytes one training forward
    saves for its backward (`saved_activation_bytes`: the tensors autograd
    packs, counted once per storage, the model's own weights left out), the
    memory effect of an attention path without a GPU;
  * operator calls, on every device: the ATen operators one training
    forward and backward dispatch (`training_operator_calls`), and one
    greedy `generate()` per decoding step (`decode_operator_calls`), views
    included: the host's share of the work, what an eager step pays where
    its kernels are too small to hide the dispatch (a GPU's decoding steps;
    its training steps at T5-base dims), the same at every run on a kind
    of device (CUDA's and the CPU's paths differ where their kernels do);
  * optionally (`Settings.profile_dir`) where one training step's and one
    `generate()`'s time goes: `torch.profiler`'s table of operators (and
    CUDA kernels) per model, with the count of what they launched.

The models take turns in rounds (each round: every model's timed training
steps, then its timed `generate()` calls), so a change of the machine's load
falls on all of them; a figure is the median over the rounds' timings, and
ratios are to T5 and to V (the dot product inside the Synthesizer's
attention, T5's math in the export's layout).

The model code is loaded from the checkout by its path, without importing
the `mtf_synthesizer` package (which imports TensorFlow): this module needs
only torch and transformers, and runs on a machine without TensorFlow.
"""

import contextlib
import dataclasses
import datetime
import importlib
import importlib.machinery
import importlib.util
import inspect
import itertools
import os
import platform
import statistics
import sys
import time
from typing import (Any, Callable, ContextManager, Dict, List, Optional,
                    Sequence, Tuple)

import torch
import transformers
from torch.utils import _python_dispatch
from transformers.modeling_outputs import BaseModelOutput

from workbench import checkout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The files read by path (no package import: see the module's docstring).
HF_MODEL_DIR = os.path.join(ROOT, "mtf_synthesizer", "hf_model")
ATTENTIONS_FILE = os.path.join(ROOT, "mtf_synthesizer", "attentions.py")
# Names under which they are registered in sys.modules (private: they never
# shadow the installed package's modules).
_HF_MODEL_MODULE = "_torch_benchmark_hf_model"
_ATTENTIONS_MODULE = "_torch_benchmark_attentions"

T5 = "T5"  # transformers' T5ForConditionalGeneration, the baseline
V = "V"  # the dot-product variant
ATTN_IMPLEMENTATIONS = ("sdpa", "eager")
MIB = 2**20


@dataclasses.dataclass(frozen=True)
class Dims:
  """Model and data sizes, the same for every model.

  Attributes:
    d_model: model width.
    num_heads: attention heads.
    d_kv: width of a head.
    d_ff: feed-forward width (relu, as T5.1.0 and T5-base).
    num_layers: encoder blocks.
    num_decoder_layers: decoder blocks.
    vocab_size: vocabulary rows.
    batch: examples per batch.
    input_length: encoder tokens per example.
    target_length: decoder tokens per example in training.
    new_tokens: tokens `generate()` appends to each example.
  """
  d_model: int
  num_heads: int
  d_kv: int
  d_ff: int
  num_layers: int
  num_decoder_layers: int
  vocab_size: int
  batch: int
  input_length: int
  target_length: int
  new_tokens: int

  @property
  def max_length(self) -> int:
    """N of the synthesizing functions: the longest sequence of a stack."""
    return max(self.input_length, self.target_length, self.new_tokens + 1)

  def describe(self) -> str:
    """One line: the dims as the report prints them."""
    return ("d_model %d, %d heads x %d, d_ff %d (relu), %d+%d blocks, vocab "
            "%d, batch %d x %d inputs -> %d targets, %d new tokens, N = %d" %
            (self.d_model, self.num_heads, self.d_kv, self.d_ff,
             self.num_layers, self.num_decoder_layers, self.vocab_size,
             self.batch, self.input_length, self.target_length,
             self.new_tokens, self.max_length))


# Presets: "cpu" (small dims), "gpu" (T5-base dims, 32 x 512 -> 128),
# "gpu-long" (8 x 2048 inputs, 6+6 blocks), "cpu-memory" (2 x 512 -> 64
# at the cpu preset's widths, for the saved activations) and "cpu-host"
# (T5-base's 12+12 blocks at widths too small to cost anything: the time is
# the host's, as in a GPU's eager decoding steps).
PRESETS = {
    "cpu": Dims(d_model=128, num_heads=4, d_kv=32, d_ff=512, num_layers=2,
                num_decoder_layers=2, vocab_size=512, batch=8,
                input_length=128, target_length=32, new_tokens=32),
    "gpu": Dims(d_model=768, num_heads=12, d_kv=64, d_ff=3072, num_layers=12,
                num_decoder_layers=12, vocab_size=32128, batch=32,
                input_length=512, target_length=128, new_tokens=64),
    "gpu-long": Dims(d_model=768, num_heads=12, d_kv=64, d_ff=3072,
                     num_layers=6, num_decoder_layers=6, vocab_size=32128,
                     batch=8, input_length=2048, target_length=128,
                     new_tokens=64),
    # Saved activations at a length where [batch, heads, t, s] dominates.
    "cpu-memory": Dims(d_model=128, num_heads=4, d_kv=32, d_ff=512,
                       num_layers=2, num_decoder_layers=2, vocab_size=512,
                       batch=2, input_length=512, target_length=64,
                       new_tokens=16),
    "cpu-host": Dims(d_model=64, num_heads=4, d_kv=16, d_ff=128,
                     num_layers=12, num_decoder_layers=12, vocab_size=512,
                     batch=2, input_length=64, target_length=16,
                     new_tokens=32),
}


@dataclasses.dataclass(frozen=True)
class Settings:
  """How the models are measured.

  Attributes:
    attn_implementation: "sdpa" or "eager", for every model.
    steps: timed training steps per model (split over the rounds).
    warmup: untimed training steps per model before the first round.
    rounds: rounds of turns (at most `steps`).
    generate_repeats: timed `generate()` calls per model (split over the
      rounds, the first rounds first); 0 skips generation.
    compile: the training step's model call goes through `torch.compile`
      (default mode) and, with a static cache, `generate()` compiles its
      decoding steps on every device (transformers' own choice on CUDA;
      a CPU too). The warmup pays the compilation.
    learning_rate: AdamW's.
    seed: of the weights (per model) and of the batch (one for all).
    device: "cuda", "cpu", or None: CUDA when present.
    threads: torch's intra-op threads, or None: torch's default.
    dropout_rate: every model's dropout (0: CPU sdpa runs its fused kernel,
      which has no dropout).
    relative_bias: the Synthesizer's stacks have T5's relative position
      bias (transformers' T5 always has it).
    cache_implementation: `generate()`'s cache for every model: None
      (transformers' DynamicCache) or "static" (StaticCache; on CUDA
      `generate()` then compiles its decoding steps, as transformers does;
      elsewhere with `compile`).
    profile_dir: where to write each model's profile (`<label>.profile.txt`,
      `+` written as `_`) of one training step and one `generate()`, taken
      after its first round's timings (untimed), or None.
  """
  attn_implementation: str = "sdpa"
  steps: int = 10
  warmup: int = 2
  rounds: int = 2
  generate_repeats: int = 2
  compile: bool = False
  learning_rate: float = 1e-4
  seed: int = 0
  device: Optional[str] = None
  threads: Optional[int] = None
  dropout_rate: float = 0.1
  relative_bias: bool = True
  cache_implementation: Optional[str] = None
  profile_dir: Optional[str] = None


def _load_by_path(name: str, path: str, package_dir: Optional[str] = None):
  """Imports a file (or a package's __init__) under `name`."""
  if name in sys.modules:
    return sys.modules[name]
  spec = importlib.util.spec_from_file_location(
      name, path, submodule_search_locations=(
          [package_dir] if package_dir else None))
  if spec is None:
    raise ImportError("cannot load %s" % path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module  # dataclasses look their module up here
  try:
    spec.loader.exec_module(module)
  except BaseException:
    del sys.modules[name]
    raise
  return module


def load_model_code(module: str = "modeling"):
  """A module of the checkout's `hf_model`, loaded by path.

  Args:
    module: the file's job: "modeling" (its `MtfSynthesizerConfig` is
      imported in it), "attention", "functions", "training".

  Returns:
    The module `<module>_mtf_synthesizer`.
  """
  if _HF_MODEL_MODULE not in sys.modules:
    # The folder as a package whose __init__ does not run: registering the
    # Auto classes is the installed package's, not this copy's.
    spec = importlib.machinery.ModuleSpec(_HF_MODEL_MODULE, None,
                                          is_package=True)
    spec.submodule_search_locations = [HF_MODEL_DIR]
    sys.modules[_HF_MODEL_MODULE] = importlib.util.module_from_spec(spec)
  return importlib.import_module("%s.%s_mtf_synthesizer" %
                                 (_HF_MODEL_MODULE, module))


def variants() -> List[Tuple[str, Tuple[str, ...]]]:
  """The attention table's variants: [(label, synthesizing functions)].

  Read from `mtf_synthesizer/attentions.py` by its path (it imports only
  the standard library).
  """
  attentions = _load_by_path(_ATTENTIONS_MODULE, ATTENTIONS_FILE)
  return [(a.label, tuple(a.components)) for a in attentions.VARIANTS]


def model_labels() -> List[str]:
  """Every model this benchmark can build: T5, then the variants."""
  return [T5] + [label for label, _ in variants()]


def resolve_device(device: Optional[str] = None) -> torch.device:
  """The device to measure on: `device`, or CUDA when present, else CPU."""
  if device:
    return torch.device(device)
  return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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


def build_model(label: str, dims: Dims, attn_implementation: str,
                seed: int = 0, dropout_rate: float = 0.1,
                relative_bias: bool = True) -> torch.nn.Module:
  """One model of the benchmark, on the CPU, in training mode.

  Args:
    label: "T5" or a variant's label ("V", "R", "D+V", ...).
    dims: the sizes.
    attn_implementation: "sdpa" or "eager".
    seed: of the initializer.
    dropout_rate: the dropout.
    relative_bias: a Synthesizer's relative bias (T5 always has one).

  Returns:
    `T5ForConditionalGeneration` or `MtfSynthesizerForConditionalGeneration`
    with the same dims (tied embedding and output layer as T5-base, relu
    feed-forward, relative bias shared per stack unless left out).
  """
  # pylint: disable=protected-access
  torch.manual_seed(seed)
  common = dict(vocab_size=dims.vocab_size, d_model=dims.d_model,
                d_kv=dims.d_kv, d_ff=dims.d_ff, num_layers=dims.num_layers,
                num_decoder_layers=dims.num_decoder_layers,
                num_heads=dims.num_heads, feed_forward_proj="relu",
                dropout_rate=dropout_rate, tie_word_embeddings=True,
                pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
  if label == T5:
    config = transformers.T5Config(**common)
    model = transformers.T5ForConditionalGeneration._from_config(
        config, attn_implementation=attn_implementation)
  else:
    components = dict(variants()).get(label)
    if components is None:
      raise ValueError("unknown model %r (known: %s)" %
                       (label, ", ".join(model_labels())))
    modeling = load_model_code()
    config_class = modeling.MtfSynthesizerConfig
    # N's field: `synthesizer_max_length` (a config's `max_length` is
    # generate()'s), `max_length` in the first releases of the config.
    n_field = ("synthesizer_max_length" if "synthesizer_max_length" in
               inspect.signature(config_class.__init__).parameters
               else "max_length")
    common[n_field] = dims.max_length
    if not relative_bias:
      common["relative_attention_type"] = None
    config = config_class(encoder_synthesizers=components,
                          decoder_synthesizers=components, **common)
    model = modeling.MtfSynthesizerForConditionalGeneration._from_config(
        config, attn_implementation=attn_implementation)
  return model.train()


def _optimizer(model: torch.nn.Module,
               learning_rate: float) -> torch.optim.Optimizer:
  """AdamW, fused where the device supports it, else foreach."""
  params = [p for p in model.parameters() if p.requires_grad]
  try:
    return torch.optim.AdamW(params, lr=learning_rate, fused=True)
  except (RuntimeError, ValueError):
    return torch.optim.AdamW(params, lr=learning_rate, foreach=True)


def _move(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
          device: torch.device) -> None:
  """Moves a model and its optimizer state (in place)."""
  model.to(device)
  for state in optimizer.state.values():
    for key, value in state.items():
      if torch.is_tensor(value):
        state[key] = value.to(device)


def _state_bytes(model: torch.nn.Module,
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
    with _autocast(device):
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
    with _autocast(device):
      loss = model(**batch, use_cache=False).loss
    loss.backward()
  model.zero_grad(set_to_none=True)
  return count.calls


def _sync(device: torch.device) -> None:
  if device.type == "cuda":
    torch.cuda.synchronize(device)


def _autocast(device: torch.device):
  if device.type == "cuda":
    return torch.autocast("cuda", dtype=torch.bfloat16)
  return contextlib.nullcontext()


@dataclasses.dataclass
class _Entry:
  """One model under measurement."""
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
  decode_ops_per_step: Optional[float] = None
  losses: List[float] = dataclasses.field(default_factory=list)
  error: Optional[str] = None


def _train_step(entry: _Entry, batch: Dict[str, torch.Tensor],
                device: torch.device) -> float:
  """One training step; returns its seconds."""
  _sync(device)
  start = time.perf_counter()
  with _autocast(device):
    loss = entry.forward(**batch, use_cache=False).loss
  loss.backward()
  entry.optimizer.step()
  entry.optimizer.zero_grad(set_to_none=True)
  _sync(device)
  seconds = time.perf_counter() - start
  entry.losses.append(float(loss.detach()))
  return seconds


def _generation_config(dims: Dims, cache_implementation: Optional[str],
                       compiled: bool) -> transformers.GenerationConfig:
  """Greedy decoding of exactly `dims.new_tokens` tokens.

  Args:
    dims: the sizes.
    cache_implementation: None (DynamicCache) or "static".
    compiled: with a static cache, the decoding steps are compiled on every
      device (transformers compiles them on CUDA by itself; its
      `CompileConfig` reaches a CPU through `_compile_all_devices`).

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
      compile_config=compile_config)


def _generate(model: torch.nn.Module, inputs: Dict[str, torch.Tensor],
              dims: Dims, device: torch.device,
              cache_implementation: Optional[str] = None,
              count: Optional[OperatorCount] = None,
              compiled: bool = False) -> Tuple[float, int]:
  """One greedy `generate()`; returns (seconds, new tokens).

  `count`, if given, counts the operators of `generate()` itself (the
  encoder's left out). `compiled`: see `_generation_config`.
  """
  model.eval()
  config = _generation_config(dims, cache_implementation, compiled)
  _sync(device)
  start = time.perf_counter()
  with _autocast(device), torch.no_grad():
    # The encoder runs here (timed), not inside generate(): the same work,
    # and independent of the keywords generate() passes an encoder.
    encoded = model.get_encoder()(**inputs)
    encoded = BaseModelOutput(last_hidden_state=encoded[0])
    with count or contextlib.nullcontext():
      out = model.generate(attention_mask=inputs["attention_mask"],
                           encoder_outputs=encoded,
                           generation_config=config)
  _sync(device)
  seconds = time.perf_counter() - start
  model.train()
  # The output starts with the decoder's start token.
  return seconds, out.shape[0] * (out.shape[1] - 1)


def decode_operator_calls(model: torch.nn.Module,
                          inputs: Dict[str, torch.Tensor], dims: Dims,
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
  _, tokens = _generate(model, inputs, dims, device, None, count)
  return count.calls / (tokens / dims.batch)


def _split(total: int, parts: int) -> List[int]:
  """`total` as `parts` near-equal counts (the first ones larger)."""
  return [total // parts + (i < total % parts) for i in range(parts)]


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
  return a / b if a and b else None


# Graphs torch.compile may make of one model in a run with `compile`: its
# training forward, its decoding step (static cache), and their
# recompilations.
COMPILED_GRAPHS_PER_MODEL = 8


def _graph_room(settings: Settings, models: int) -> ContextManager[Any]:
  """Room in dynamo's cache for every model's graphs, when compiling.

  The models share their classes' code, and dynamo keeps at most
  `recompile_limit` (8) graphs per code object, a limit meant for one
  model's recompilations: past it, the later models would run eagerly.

  Args:
    settings: `compile` says whether anything is compiled.
    models: how many models the run measures.

  Returns:
    A context manager.
  """
  if not settings.compile:
    return contextlib.nullcontext()
  dynamo_config = torch._dynamo.config  # pylint: disable=protected-access
  return dynamo_config.patch(recompile_limit=max(
      dynamo_config.recompile_limit, COMPILED_GRAPHS_PER_MODEL * models))


def run(dims: Dims, settings: Settings,
        models: Optional[Sequence[str]] = None,
        command: Optional[str] = None,
        log: Any = None,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None
        ) -> Dict[str, Any]:
  """Measures the models side by side; returns the report.

  A model that fails (out of memory, say) is reported with its error and
  what it measured before; the others go on.

  Args:
    dims: the sizes, the same for every model.
    settings: what to measure and how.
    models: labels ("T5", "V", "R", "D+V", ...; default every model). T5
      and V are always measured (the ratios' references).
    command: the command line, recorded in the report.
    log: a file for progress lines (e.g. sys.stderr), or None.
    progress: called with the report so far after each round (so that a
      run stopped later keeps what it measured).

  Returns:
    A JSON-serializable dict: "device", "torch", "transformers", "date",
    "commit" (of the checkout), "dims", "settings", "command", and
    "results", one dict per model in order: label, components, params,
    step_s, train_steps_per_s, generate_tokens_per_s, peak_bytes (None on
    CPU), saved_bytes, state_bytes, train_ops, decode_ops_per_step, loss
    (first and last), error (None, or why the model stopped), and the
    ratios *_vs_t5 and *_vs_v.
  """
  if settings.attn_implementation not in ATTN_IMPLEMENTATIONS:
    raise ValueError("attn_implementation must be one of %s, got %r" % (
        ATTN_IMPLEMENTATIONS, settings.attn_implementation))
  if settings.steps < 1 or settings.rounds < 1:
    raise ValueError("steps and rounds must be at least 1")
  known = model_labels()
  wanted = list(known) if not models else list(models)
  unknown = [m for m in wanted if m not in known]
  if unknown:
    raise ValueError("unknown models %s (known: %s)" % (
        unknown, ", ".join(known)))
  labels = [m for m in known if m in set(wanted) | {T5, V}]
  components = dict(variants())
  device = resolve_device(settings.device)
  if settings.threads:
    torch.set_num_threads(settings.threads)
  # On CUDA only the model being measured is on the device: its peak is its
  # own, and models that do not fit side by side still run.
  offload = device.type == "cuda"
  rounds = min(settings.rounds, settings.steps)

  def say(message):
    if log is not None:
      print(message, file=log, flush=True)

  generator = torch.Generator().manual_seed(settings.seed)
  ids = lambda length: torch.randint(  # pylint: disable=g-long-lambda
      2, dims.vocab_size, (dims.batch, length), generator=generator)
  batch = {"input_ids": ids(dims.input_length),
           "attention_mask": torch.ones(dims.batch, dims.input_length,
                                        dtype=torch.long),
           "labels": ids(dims.target_length)}
  batch = {k: v.to(device) for k, v in batch.items()}
  inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}

  with _graph_room(settings, len(labels)):
    entries = []
    for label in labels:
      say("building %s" % label)
      model = build_model(label, dims, settings.attn_implementation,
                          settings.seed, settings.dropout_rate,
                          settings.relative_bias)
      if not offload:
        model.to(device)
      optimizer = _optimizer(model, settings.learning_rate)
      forward = torch.compile(model) if settings.compile else model
      entries.append(_Entry(label, components.get(label, ()), model,
                            optimizer, forward))

    step_counts = _split(settings.steps, rounds)
    generate_counts = _split(settings.generate_repeats, rounds)
    for r in range(rounds):
      for entry in entries:
        if entry.error is None:
          try:
            _measure_round(entry, r, settings, step_counts[r],
                           generate_counts[r], batch, inputs, dims, device,
                           offload)
          except (RuntimeError, torch.OutOfMemoryError) as e:
            entry.error = "round %d: %s" % (r + 1, str(e).splitlines()[0][:300])
            entry.optimizer.zero_grad(set_to_none=True)
            if offload:
              _move(entry.model, entry.optimizer, torch.device("cpu"))
              torch.cuda.empty_cache()
        say("round %d/%d %-5s %s" % (
            r + 1, rounds, entry.label,
            "failed: %s" % entry.error if entry.error else
            "step %.4f s (median so far)" % statistics.median(entry.step_s)))
      if progress is not None:
        progress(_report(entries, dims, settings, rounds, device, command))
    return _report(entries, dims, settings, rounds, device, command)


def _measure_round(entry: _Entry, r: int, settings: Settings, steps: int,
                   generate_calls: int, batch: Dict[str, torch.Tensor],
                   inputs: Dict[str, torch.Tensor], dims: Dims,
                   device: torch.device, offload: bool) -> None:
  """One model's turn in round r: its steps and generate() calls."""
  if offload:
    _sync(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    _move(entry.model, entry.optimizer, device)
  if r == 0:
    entry.saved_bytes = saved_activation_bytes(entry.model, batch, device)
    entry.train_ops = training_operator_calls(entry.model, batch, device)
  # Untimed: the warmup before the first round; after a move, one step.
  warm = settings.warmup if r == 0 else int(offload)
  for _ in range(warm):
    _train_step(entry, batch, device)
  for _ in range(steps):
    entry.step_s.append(_train_step(entry, batch, device))
  if offload:
    _sync(device)
    peak = torch.cuda.max_memory_allocated(device) - base
    entry.peak_bytes = max(entry.peak_bytes or 0, peak)
  if settings.generate_repeats and r == 0:
    _generate(entry.model, inputs, dims, device,
              settings.cache_implementation,
              compiled=settings.compile)  # warmup (and compilation)
    entry.decode_ops_per_step = decode_operator_calls(entry.model, inputs,
                                                       dims, device)
  for _ in range(generate_calls):
    seconds, tokens = _generate(entry.model, inputs, dims, device,
                                settings.cache_implementation,
                                compiled=settings.compile)
    entry.generate_s.append(seconds)
    entry.generated = tokens
  if settings.profile_dir and r == 0:
    write_profile(entry, batch, inputs, dims, device, settings)
  if offload:
    _move(entry.model, entry.optimizer, torch.device("cpu"))
    torch.cuda.empty_cache()


# Rows of each profile's table.
PROFILE_ROWS = 30


def _profiled(device: torch.device, work: Callable[[], Any]) -> str:
  """`work()` under torch.profiler; its table and what it launched."""
  activities = [torch.profiler.ProfilerActivity.CPU]
  if device.type == "cuda":
    activities.append(torch.profiler.ProfilerActivity.CUDA)
  with torch.profiler.profile(activities=activities) as profiler:
    work()
    _sync(device)
  events = profiler.key_averages()
  operators = sum(e.count for e in events if e.key.startswith("aten::"))
  line = "%d aten operator calls" % operators
  sort = "self_cpu_time_total"
  if device.type == "cuda":
    kernels = sum(e.count for e in profiler.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA)
    line += ", %d CUDA kernels and copies" % kernels
    sort = "self_device_time_total"
  return line + "\n" + events.table(sort_by=sort, row_limit=PROFILE_ROWS)


def profile_path(profile_dir: str, label: str) -> str:
  """The file of a model's profile ("D+V" -> D_V.profile.txt)."""
  return os.path.join(profile_dir, label.replace("+", "_") + ".profile.txt")


def write_profile(entry: _Entry, batch: Dict[str, torch.Tensor],
                  inputs: Dict[str, torch.Tensor], dims: Dims,
                  device: torch.device, settings: Settings) -> str:
  """Profiles one training step and one `generate()` of a model.

  Args:
    entry: the model, on `device`, warmed up.
    batch: the training batch.
    inputs: generate()'s inputs.
    dims: the sizes.
    device: where it runs.
    settings: `profile_dir` and the cache.

  Returns:
    The path of the file written.
  """
  sections = ["%s (%s) on %s; %s" % (
      entry.label, "+".join(entry.components) or "transformers' T5",
      device_name(device), dims.describe())]
  sections.append("## One training step\n" + _profiled(
      device, lambda: _train_step(entry, batch, device)))
  if settings.generate_repeats:
    sections.append("## One generate() (%d new tokens, %s cache)\n" % (
        dims.new_tokens, settings.cache_implementation or "dynamic") +
                    _profiled(device, lambda: _generate(
                        entry.model, inputs, dims, device,
                        settings.cache_implementation,
                        compiled=settings.compile)))
  os.makedirs(settings.profile_dir, exist_ok=True)
  path = profile_path(settings.profile_dir, entry.label)
  with open(path, "w") as f:
    f.write("\n\n".join(sections) + "\n")
  return path


def _report(entries: List[_Entry], dims: Dims, settings: Settings,
            rounds: int, device: torch.device,
            command: Optional[str]) -> Dict[str, Any]:
  """The report of what the entries measured so far (see `run`)."""
  results = []
  for entry in entries:
    step = statistics.median(entry.step_s) if entry.step_s else None
    tokens_per_s = (entry.generated / statistics.median(entry.generate_s)
                    if entry.generate_s else None)
    results.append({
        "label": entry.label,
        "model": ("transformers T5ForConditionalGeneration"
                  if entry.label == T5 else
                  "MtfSynthesizerForConditionalGeneration"),
        "components": list(entry.components),
        "params": sum(p.numel() for p in entry.model.parameters()),
        "step_s": step,
        "step_s_all": entry.step_s,
        "train_steps_per_s": 1.0 / step if step else None,
        "generate_s_all": entry.generate_s,
        "generate_tokens_per_s": tokens_per_s,
        "peak_bytes": entry.peak_bytes,
        "saved_bytes": entry.saved_bytes,
        "train_ops": entry.train_ops,
        "decode_ops_per_step": entry.decode_ops_per_step,
        "state_bytes": _state_bytes(entry.model, entry.optimizer),
        "loss_first": entry.losses[0] if entry.losses else None,
        "loss_last": entry.losses[-1] if entry.losses else None,
        "error": entry.error,
    })
  by_label = {r["label"]: r for r in results}
  for result in results:
    for key in ("train_steps_per_s", "generate_tokens_per_s", "peak_bytes",
                "saved_bytes", "train_ops", "decode_ops_per_step"):
      for ref in (T5, V):
        result["%s_vs_%s" % (key, ref.lower())] = _ratio(
            result[key], by_label[ref][key])
  return {
      "device": device_name(device),
      "device_type": device.type,
      "torch": torch.__version__,
      "transformers": transformers.__version__,
      "python": platform.python_version(),
      "date": datetime.date.today().isoformat(),
      "commit": checkout.commit(),
      "dims": dataclasses.asdict(dims),
      "dims_text": dims.describe(),
      "settings": dataclasses.asdict(settings),
      "rounds": rounds,
      "command": command,
      "results": results,
  }


def _number(value: Optional[float], digits: int = 2) -> str:
  return "n/a" if value is None else "%.*f" % (digits, value)


def _times(value: Optional[float]) -> str:
  return "n/a" if value is None else "%.2fx" % value


def markdown(report: Dict[str, Any]) -> str:
  """The report as markdown: a header of facts, then one table row a model.

  Args:
    report: what `run` returns.

  Returns:
    The text, ending in a newline.
  """
  settings = report["settings"]
  lines = [
      "- device: %s" % report["device"],
      "- torch %s, transformers %s, Python %s; %s; checkout %s" % (
          report["torch"], report["transformers"], report["python"],
          report["date"], report["commit"]),
      "- dims: %s" % report["dims_text"],
      "- attention implementation: %s; %s; training steps: %d timed per "
      "model after %d warmup, in %d rounds; generate(): %d timed calls per "
      "model%s%s%s" % (
          settings["attn_implementation"],
          "bf16 autocast" if report["device_type"] == "cuda" else "float32",
          settings["steps"], settings["warmup"], report["rounds"],
          settings["generate_repeats"],
          ("; torch.compile (training step%s)" % (
              "; generate()'s decoding steps"
              if settings.get("cache_implementation") == "static" else ""))
          if settings["compile"] else "",
          "; generate() with a %s cache" % settings["cache_implementation"]
          if settings.get("cache_implementation") else "",
          "; dropout %g%s" % (
              settings.get("dropout_rate", 0.1),
              "" if settings.get("relative_bias", True) else
              "; the Synthesizer without relative bias")),
      "- saved activations: bytes one training forward saves for backward "
      "(unique storages, weights excluded)",
      "- operators: ATen operators one training forward and backward "
      "dispatch (views included; the optimizer left out), and per "
      "decoding step of one greedy generate() (DynamicCache, not compiled)",
  ]
  if report.get("command"):
    lines.append("- command: `%s`" % report["command"])
  if report["device_type"] != "cuda":
    lines.append("- peak memory: n/a on CPU (torch keeps no CPU allocator "
                 "statistics); state = weights, buffers and AdamW moments")
  lines += [
      "",
      "| model | functions | params (M) | train steps/s | vs T5 | vs V | "
      "generate tokens/s | vs T5 | vs V | peak MiB | vs T5 | saved MiB | "
      "vs V | state MiB | train ops | vs V | decode ops/step | vs V |",
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ]
  for r in report["results"]:
    peak = r["peak_bytes"]
    saved = r.get("saved_bytes")
    lines.append("| %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s "
                 "| %s | %s | %.1f | %s | %s | %s | %s |" % (
                     r["label"], "+".join(r["components"]) or "(T5)",
                     r["params"] / 1e6, _number(r["train_steps_per_s"]),
                     _times(r["train_steps_per_s_vs_t5"]),
                     _times(r["train_steps_per_s_vs_v"]),
                     _number(r["generate_tokens_per_s"], 0),
                     _times(r["generate_tokens_per_s_vs_t5"]),
                     _times(r["generate_tokens_per_s_vs_v"]),
                     "n/a" if peak is None else "%.0f" % (peak / MIB),
                     _times(r["peak_bytes_vs_t5"]),
                     "n/a" if saved is None else "%.1f" % (saved / MIB),
                     _times(r.get("saved_bytes_vs_v")),
                     r["state_bytes"] / MIB,
                     _number(r.get("train_ops"), 0),
                     _times(r.get("train_ops_vs_v")),
                     _number(r.get("decode_ops_per_step"), 1),
                     _times(r.get("decode_ops_per_step_vs_v"))))
  failed = [r for r in report["results"] if r.get("error")]
  if failed:
    lines.append("")
    lines += ["- %s failed in %s" % (r["label"], r["error"]) for r in failed]
  return "\n".join(lines) + "\n"
