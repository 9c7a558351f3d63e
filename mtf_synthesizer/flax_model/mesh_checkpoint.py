# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A mesh model directory's checkpoint as the Flax model's parameters.

The checkpoint is read without TensorFlow (`checkpoints.tf_format`: a local
directory, or a `gs://` path through fsspec where gcsfs is installed), its
variables are named as the Flax tree names them (`checkpoints.flax_names`,
with `init_from_t5`'s rule), and the parameters the checkpoint lacks (a
released T5 family into a Synthesizer variant: the Synthesizer's own) are
drawn by the model's initializers:

  model = flax_model.make_model()
  loaded = mesh_checkpoint.load(model, "gs://bucket/model_dir")
  logits = model.apply({"params": loaded.params}, inputs, targets,
                       enable_dropout=False)

A checkpoint of another variant, width or layout than the model is refused
with one error naming every variable that does not fit (`MappingError`);
a checkpoint whose bytes differ from what TensorFlow wrote is refused by
the reader (`tf_format.CheckpointError`).
"""

import dataclasses
from typing import Any, Dict, List, Tuple

import flax.linen as nn
from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np

from mtf_synthesizer.checkpoints import flax_names
from mtf_synthesizer.checkpoints import tf_format
from mtf_synthesizer.flax_model import t5


@dataclasses.dataclass
class Loaded:
  """A Flax model's parameters read from a mesh checkpoint.

  Attributes:
    params: the parameter tree (nested dicts of arrays, unboxed), in the
      model's parameter dtype.
    restored: the paths read from the checkpoint ("/"-joined).
    fresh: the paths drawn by the model's initializers (the Synthesizer's
      own parameters, starting from a released T5).
    unused: the checkpoint's weights the model has no place for (T5's
      query and key kernels in a variant without the dot product).
    checkpoint: the checkpoint's prefix.
  """
  params: Any
  restored: List[str]
  fresh: List[str]
  unused: List[str]
  checkpoint: str


def dummy_inputs(model: nn.Module, length: int = 1) -> Tuple[Any, ...]:
  """Token arrays that `model.init` builds every parameter from.

  Args:
    model: an EncoderDecoder or a DecoderOnly.
    length: their length (the parameters do not depend on it).

  Returns:
    The positional arguments of the model's call.
  """
  tokens = jnp.ones((1, length), jnp.int32)
  if isinstance(model, t5.EncoderDecoder):
    return tokens, tokens
  return (tokens,)


def init_params(model: nn.Module, seed: int = 0) -> Any:
  """The model's parameters drawn by its initializers (unboxed).

  Args:
    model: an EncoderDecoder or a DecoderOnly.
    seed: the PRNG seed.

  Returns:
    The parameter tree.
  """
  variables = jax.jit(lambda key: model.init(
      key, *dummy_inputs(model), enable_dropout=False))(
          jax.random.PRNGKey(seed))
  return nn.unbox(variables["params"])


def expected_shapes(model: nn.Module) -> Dict[str, Tuple[int, ...]]:
  """The model's parameters: "/"-joined path -> shape (nothing computed).

  Args:
    model: an EncoderDecoder or a DecoderOnly.

  Returns:
    The shapes.
  """
  shapes = jax.eval_shape(lambda: model.init(
      jax.random.PRNGKey(0), *dummy_inputs(model), enable_dropout=False))
  flat = traverse_util.flatten_dict(nn.unbox(shapes["params"]), sep="/")
  return {path: tuple(leaf.shape) for path, leaf in flat.items()}


def load(model: nn.Module, checkpoint: str, seed: int = 0) -> Loaded:
  """Reads a mesh checkpoint as the model's parameters.

  Args:
    model: an EncoderDecoder or a DecoderOnly, of the checkpoint's sizes
      and variant.
    checkpoint: a model directory (its latest checkpoint) or a checkpoint
      prefix (`.../model.ckpt-N`), local or `gs://`.
    seed: the PRNG seed of the parameters the checkpoint lacks.

  Returns:
    The Loaded parameters.

  Raises:
    tf_format.CheckpointError: no checkpoint there, or its files are
      truncated or corrupted.
    flax_names.MappingError: the checkpoint does not fit the model (another
      variant, width or layout).
  """
  reader = tf_format.load_checkpoint(checkpoint)
  expected = expected_shapes(model)
  mapped = flax_names.flax_params(reader, expected,
                                  num_heads=model.config.num_heads)
  dtype = jnp.dtype(model.config.param_dtype)
  flat = {}
  if mapped.fresh:
    drawn = traverse_util.flatten_dict(init_params(model, seed), sep="/")
    flat.update({path: drawn[path] for path in mapped.fresh})
  for path, value in mapped.restored.items():
    flat[path] = jnp.asarray(np.asarray(value), dtype)
  params = traverse_util.unflatten_dict(flat, sep="/")
  return Loaded(params, sorted(mapped.restored), sorted(mapped.fresh),
                sorted(mapped.unused), reader.prefix)
