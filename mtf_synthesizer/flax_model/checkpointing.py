# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Flax model's parameters in an orbax checkpoint, and back.

A converted model directory (`mtf-synthesizer-flax-from-mesh`) holds:

  params/        the parameters, an orbax `StandardCheckpointer` checkpoint
                 (tensorstore's OCDBT format, as T5X and MaxText write)
  config.gin     the gin bindings of the model (its T5Config and make_model)
  source.json    where the parameters came from: the mesh checkpoint, which
                 paths were restored, which started fresh, which of its
                 weights were unused

`restore(directory)` gives the model (built from config.gin) and its
parameters, checked against the model's shapes.
"""

import json
import os
from typing import Any, Dict, Optional, Sequence, Tuple

from etils import epath
import flax.linen as nn
from flax import traverse_util
import gin
import jax
import orbax.checkpoint as ocp

from mtf_synthesizer.flax_model import mesh_checkpoint
from mtf_synthesizer.flax_model import t5

PARAMS = "params"
CONFIG = "config.gin"
SOURCE = "source.json"


def save(directory: str, params: Any, config_text: str,
         source: Optional[Dict[str, Any]] = None) -> None:
  """Writes the parameters, the model's gin bindings and their source.

  Args:
    directory: a new or empty directory (local, or a URL orbax writes).
    params: the parameter tree (unboxed).
    config_text: the gin bindings that build the model (`config_gin`).
    source: what `source.json` holds; None: no file.
  """
  checkpointer = ocp.StandardCheckpointer()
  checkpointer.save(os.path.join(os.path.abspath(directory), PARAMS), params)
  checkpointer.wait_until_finished()
  with open(os.path.join(directory, CONFIG), "w") as f:
    f.write(config_text)
  if source is not None:
    with open(os.path.join(directory, SOURCE), "w") as f:
      json.dump(source, f, indent=1, sort_keys=True)
      f.write("\n")


def config_gin(config: t5.T5Config, decoder_only: bool) -> str:
  """gin bindings that rebuild exactly this model with `make_model()`.

  Args:
    config: the model's configuration.
    decoder_only: a DecoderOnly, else an EncoderDecoder.

  Returns:
    The bindings' text (every field of the configuration).
  """
  lines = ["import mtf_synthesizer.flax_model", ""]
  for field, value in sorted(vars(config).items()):
    if isinstance(value, tuple):
      value = tuple(value)
    elif isinstance(value, dict) or hasattr(value, "items"):
      value = {k: dict(v) for k, v in value.items()}
    lines.append("T5Config.%s = %r" % (field, value))
  lines.append("make_model.decoder_only = %r" % decoder_only)
  return "\n".join(lines) + "\n"


def restore(directory: str) -> Tuple[nn.Module, Any]:
  """The model a converted directory holds, and its parameters.

  Args:
    directory: a directory `save` wrote.

  Returns:
    (the model, built from its config.gin; the parameter tree).

  Raises:
    FileNotFoundError: no config.gin or no parameters there.
    ValueError: parameters whose tree or shapes are not the model's.
  """
  config_path = epath.Path(directory) / CONFIG
  if not config_path.exists():
    raise FileNotFoundError("%s holds no %s: not a directory that "
                            "mtf-synthesizer-flax-from-mesh wrote" %
                            (directory, CONFIG))
  with gin.unlock_config():
    gin.clear_config()
    gin.parse_config(config_path.read_text())
    model = t5.make_model()
    gin.clear_config()
  target = jax.eval_shape(lambda: mesh_checkpoint.init_params(model))
  params = ocp.StandardCheckpointer().restore(
      os.path.join(_absolute(directory), PARAMS), target)
  _check_shapes(params, {
      path: leaf.shape for path, leaf in
      traverse_util.flatten_dict(target, sep="/").items()})
  return model, params


def _absolute(path: str) -> str:
  """A local path made absolute (orbax's need); a URL (gs://) as it is."""
  return path if "://" in path else os.path.abspath(path)


def _check_shapes(params: Any, shapes: Dict[str, Sequence[int]]) -> None:
  """Raises a ValueError naming every parameter the model does not hold."""
  flat = traverse_util.flatten_dict(params, sep="/")
  wrong = sorted(p for p in set(flat) | set(shapes)
                 if p not in flat or p not in shapes or
                 tuple(flat[p].shape) != tuple(shapes[p]))
  if wrong:
    raise ValueError("the parameters do not fit the model of config.gin: "
                     "%s" % ", ".join(wrong))
