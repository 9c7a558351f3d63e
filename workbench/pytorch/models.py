# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch benchmark's models and presets.

The dims (`Dims`, `PRESETS`), how a run measures (`Settings`), the attention
table's variants (`variants`, read from `mtf_synthesizer/attentions.py` by
its path) and one model of the benchmark built at the dims (`build_model`):
transformers' `T5ForConditionalGeneration` (label "T5") or the checkout's
`MtfSynthesizerForConditionalGeneration` (`load_model_code`). The model code
is loaded by its path, without importing the `mtf_synthesizer` package
(which imports TensorFlow).
"""

import dataclasses
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from typing import List, Optional, Tuple

import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# The files read by path (no package import: see the module's docstring).
HF_MODEL_DIR = os.path.join(ROOT, "mtf_synthesizer", "hf_model")
ATTENTIONS_FILE = os.path.join(ROOT, "mtf_synthesizer", "attentions.py")
# Names under which they are registered in sys.modules (private: they never
# shadow the installed package's modules).
_HF_MODEL_MODULE = "_workbench_pytorch_hf_model"
_ATTENTIONS_MODULE = "_workbench_pytorch_attentions"

T5 = "T5"  # transformers' T5ForConditionalGeneration, the baseline
V = "V"  # the dot-product variant
ATTN_IMPLEMENTATIONS = ("sdpa", "eager")


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
    compile: compile with `torch.compile` (default mode), as
      `compile_scope` says. The warmup pays the compilation; the report
      gives each model's first training step and first `generate()`.
    compile_scope: with `compile`, "model" (the default) or "blocks"
      (regional compilation, docs/pytorch_benchmark.md says what it does
      so far): each repeated block (the classes in the model's
      `_no_split_modules`, `MtfSynthesizerBlock`, T5's `T5Block`) is
      compiled with `nn.Module.compile`, so that a stack's identical blocks share one
      compiled graph, and every call runs them compiled, the training step
      and `generate()` alike; or "model": the training step's model call
      goes through `torch.compile(model)` and, with a static cache,
      `generate()` compiles its whole decoding step (transformers'
      `CompileConfig`, on every device).
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
  compile_scope: str = "model"
  learning_rate: float = 1e-4
  seed: int = 0
  device: Optional[str] = None
  threads: Optional[int] = None
  dropout_rate: float = 0.1
  relative_bias: bool = True
  cache_implementation: Optional[str] = None
  profile_dir: Optional[str] = None

  @property
  def compiles_generate(self) -> bool:
    """generate() compiles its whole decoding step (compile_scope "model").
    """
    return self.compile and self.compile_scope == "model"


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
      imported in it), "attention", "functions", "loss", "checks".

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
