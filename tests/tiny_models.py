# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Tiny PyTorch Synthesizers for the tests, and what they compare.

The models are built from the model's code as an export carries it
(`model_code.load()`, no TensorFlow, mesh or this package), or from the
modeling module given. Standard library and torch only (and transformers,
which the model's code imports): the TF-free side scripts import it too
(they put tests/ first on `sys.path`).
"""

import inspect
import types
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch

import model_code

VOCAB, N = 64, 16  # vocabulary; the tables' positions (synthesizer_max_length)
TOLERANCE = 1e-5
# random_model's vocabulary (a beam search over every token stays fast).
RANDOM_MODEL_VOCAB = 48


def config(components: Sequence[str], causal_lm: bool = False,
           modeling: Optional[types.ModuleType] = None, **fields):
  """A tiny config: every stack's self-attention composes `components`.

  Args:
    components: the synthesizing functions.
    causal_lm: one causal stack, else an encoder-decoder.
    modeling: the modeling module (default: the export's copy).
    **fields: fields that differ from the tiny ones.

  Returns:
    The MtfSynthesizerConfig.
  """
  modeling = modeling or model_code.load()
  settings = dict(
      vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=1,
      num_heads=2, dropout_rate=0.0, synthesizer_max_length=N,
      factorized_random_k=4, factorized_dense_factors=(4, 4),
      relative_attention_num_buckets=8, relative_attention_max_distance=16,
      encoder_synthesizers=components, decoder_synthesizers=components,
      is_encoder_decoder=not causal_lm)
  settings.update(fields)
  return modeling.MtfSynthesizerConfig(**settings)


def seq2seq(components: Sequence[str], seed: int = 0, **fields):
  """A tiny encoder-decoder drawn by `_from_config` from the seed."""
  torch.manual_seed(seed)
  model_class = model_code.load().MtfSynthesizerForConditionalGeneration
  return model_class._from_config(  # pylint: disable=protected-access
      config(components, **fields))


def causal_lm(components: Sequence[str], seed: int = 0, **fields):
  """A tiny causal LM drawn by `_from_config` from the seed."""
  torch.manual_seed(seed)
  model_class = model_code.load().MtfSynthesizerForCausalLM
  return model_class._from_config(  # pylint: disable=protected-access
      config(components, causal_lm=True, **fields))


def weights(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
  """Every weight by name: the parameters and the persistent floating
  buffers (Fix's table), as `state_dict` names them (a tied weight under
  each of its names)."""
  return {name: tensor
          for name, tensor in model.state_dict(keep_vars=True).items()
          if tensor.is_floating_point()}


def perturb(model: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
  """Gives every weight new random values at its own scale (so each counts).

  A weight that varies is drawn again from the normal of its mean and
  standard deviation; a constant one c (mesh's zeros, the norms' ones)
  becomes c + max(|c|, 1) N(0, 1). A tied weight is drawn once.

  Args:
    model: the model (changed in place).
    seed: draws the values.

  Returns:
    The model.
  """
  generator = torch.Generator().manual_seed(seed)
  done = set()
  with torch.no_grad():
    for tensor in weights(model).values():
      if id(tensor) in done:
        continue
      done.add(id(tensor))
      values = tensor.detach().double()
      mean = float(values.mean())
      spread = float(values.std()) if values.numel() > 1 else 0.0
      if spread == 0.0:
        spread = max(abs(mean), 1.0)
      noise = torch.randn(tensor.shape, generator=generator,
                          dtype=torch.float64)
      tensor.copy_(mean + spread * noise)
  return model


# An initializer as `declared_initializers` names it: ("normal", (mean,
# std)), ("trunc_normal", (mean, std, a, b)), ("uniform", (a, b)) or
# ("constant", (value,)).
Initializer = Tuple[str, Tuple[float, ...]]
# transformers' initialization functions a model's `_init_weights` may
# call, and the parameters that say what each draws.
_DRAWS = {"normal_": ("mean", "std"),
          "trunc_normal_": ("mean", "std", "a", "b"),
          "uniform_": ("a", "b"), "constant_": ("val",)}
_CONSTANTS = {"zeros_": 0.0, "ones_": 1.0}


def declared_initializers(
    build: Callable[[], torch.nn.Module]
) -> Tuple[torch.nn.Module, Dict[str, Tuple[Initializer, ...]]]:
  """A model built by `build()`, and the initializers it declared.

  While it is built, the calls of transformers' `initialization` functions
  (those `_init_weights` calls) are recorded, weight by weight.

  Args:
    build: makes the model (from a config: `post_init` initializes it).

  Returns:
    (the model, weight name -> the distinct `Initializer`s called on it;
    `weights` names them, a tied weight under each name). A weight no
    initializer was called on is absent.
  """
  from transformers import initialization  # pylint: disable=g-import-not-at-top
  calls = {}
  originals = {name: getattr(initialization, name)
               for name in list(_DRAWS) + list(_CONSTANTS)}

  def recording(name, original):
    signature = inspect.signature(original)

    def wrapper(tensor, *args, **kwargs):
      if name in _CONSTANTS:
        spec = ("constant", (_CONSTANTS[name],))
      else:
        bound = signature.bind(tensor, *args, **kwargs)
        bound.apply_defaults()
        spec = (name.rstrip("_") if name != "constant_" else "constant",
                tuple(float(bound.arguments[p]) for p in _DRAWS[name]))
      # The tensor is kept: no other takes its id.
      specs = calls.setdefault(id(tensor), (tensor, []))[1]
      if spec not in specs:
        specs.append(spec)
      return original(tensor, *args, **kwargs)

    return wrapper

  for name, original in originals.items():
    setattr(initialization, name, recording(name, original))
  try:
    model = build()
  finally:
    for name, original in originals.items():
      setattr(initialization, name, original)
  return model, {name: tuple(calls[id(tensor)][1])
                 for name, tensor in weights(model).items()
                 if id(tensor) in calls}


def ids(shape, seed: int, low: int = 2, vocab: int = VOCAB) -> torch.Tensor:
  """Token ids in [low, vocab) drawn from the seed."""
  generator = torch.Generator().manual_seed(seed)
  return torch.randint(low, vocab, shape, generator=generator)


def padded_inputs(seed: int = 0):
  """Encoder inputs [3, 7] (row 1 padded), their mask, labels [3, 6]."""
  input_ids = ids((3, 7), seed)
  input_ids[1, -3:] = 0
  labels = ids((3, 6), seed + 1)
  labels[2, -2:] = -100
  return input_ids, (input_ids != 0).long(), labels


def gradients(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
  """Each parameter's gradient, copied, by name."""
  return {name: p.grad.detach().clone() for name, p in model.named_parameters()
          if p.grad is not None}


def loss_and_gradients(model: torch.nn.Module, **inputs):
  """(the loss of one forward, its gradients by name)."""
  model.zero_grad()
  loss = model(**inputs).loss
  loss.backward()
  return float(loss.detach()), gradients(model)


def assert_close_gradients(actual: Dict[str, torch.Tensor],
                           expected: Dict[str, torch.Tensor],
                           tolerance: float = TOLERANCE) -> None:
  """The same parameters, each within tolerance of the largest (or 1)."""
  assert sorted(actual) == sorted(expected)
  for name in expected:
    scale = max(float(expected[name].abs().max()), 1.0)
    difference = float((actual[name] - expected[name]).abs().max())
    assert difference <= tolerance * scale, (name, difference)


def random_model(modeling: types.ModuleType, components: Sequence[str],
                 causal_lm: bool = False, seed: int = 0, **fields):
  """A tiny model in eval mode, two blocks deep, every weight random.

  Args:
    modeling: the modeling module whose classes build it (the package's).
    components: the synthesizing functions of every self-attention.
    causal_lm: one causal stack, else an encoder-decoder.
    seed: draws the weights (every one at random: `perturb`).
    **fields: fields that differ from the tiny ones.

  Returns:
    The model.
  """
  torch.manual_seed(seed)
  settings = dict(vocab_size=RANDOM_MODEL_VOCAB, d_kv=8, d_ff=48,
                  num_layers=2)
  settings.update(fields)
  model_class = (modeling.MtfSynthesizerForCausalLM if causal_lm
                 else modeling.MtfSynthesizerForConditionalGeneration)
  model = model_class(config(components, causal_lm, modeling, **settings))
  return perturb(model, seed + 1).eval()
