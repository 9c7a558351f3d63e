# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch configuration of a mesh model, read back from its layers.

`flat_config` turns the specs of the Unitransformers mesh built
(`stack_spec`: each layer's kind, each synthesizing function's settings)
into `MtfSynthesizerConfig`'s fields, through the configuration's table of
functions (`FUNCTION_SETTINGS`: the field each of mesh's settings fills);
what the PyTorch model cannot describe raises `ExportError`, named.
`hf_export.describe` builds the model from the run's operative config and
calls these; nothing here reads a checkpoint.
"""

import json
import types
from typing import Any, Dict, List

from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import transformer_layers

from mtf_synthesizer import layer as layer_lib
from mtf_synthesizer import synthesizers
from mtf_synthesizer.core import interface
from mtf_synthesizer.core import mixture

# mesh's layer stack as T5 builds it: pre-norm residual layers.
_DEFAULT_SUBLAYERS = {
    "_sublayers_initial": ["sublayer_dropout"],
    "_sublayers_per_layer": ["sublayer_rms_norm", "sublayer_call_layer",
                             "sublayer_dropout", "sublayer_residual"],
    "_sublayers_final": ["sublayer_rms_norm", "sublayer_dropout"],
}

class ExportError(ValueError):
  """The model has a part the PyTorch model does not implement, or its
  checkpoint cannot be read."""


def _function_spec(function: interface.SynthesizingFunction,
                   max_length: int) -> Dict[str, Any]:
  """A synthesizing function's name and the settings its weights need."""
  return dict(function.export_settings(max_length), name=function.name)


def _attention_spec(layer: transformer_layers.SelfAttention,
                    kind: str) -> Dict[str, Any]:
  """The settings of an attention layer (mesh's or SynthesizerAttention)."""
  problems = []
  if getattr(layer, "attention_func", None) is not None:
    problems.append("attention_func=%r" % layer.attention_func)
  if not layer.combine_dims or layer.keep_query_heads_dims:
    problems.append("combine_dims=False or keep_query_heads_dims=True")
  if layer.shared_kv and kind != "SynthesizerAttention":
    problems.append("shared_kv=True")
  if (layer.attention_kwargs or {}).get("extra_logit") is not None:
    problems.append("extra_logit")
  if layer.relative_attention_type not in (None, "bias", "bias_shared"):
    problems.append("relative_attention_type=%r" %
                    layer.relative_attention_type)
  if kind == "EncDecAttention" and layer.relative_attention_type:
    problems.append("a relative position bias in EncDecAttention")
  if problems:
    raise ExportError("%s with %s is not supported by the export" %
                      (kind, ", ".join(problems)))
  spec = {
      "type": kind,
      "num_heads": layer.num_heads,
      "d_kv": layer.kv_dim.size,
      "num_memory_heads": layer.num_memory_heads,
      "relative_attention": layer.relative_attention_type,
      "relative_attention_num_buckets": layer.relative_attention_num_buckets,
      "scale_queries": not layer.fold_scaling_into_initializer,
  }
  if isinstance(layer, layer_lib.SynthesizerAttention):
    synth = layer.synthesizer
    functions = (synth.components if isinstance(synth, mixture.Mixture)
                 else [synth])
    spec.update(
        functions=[_function_spec(f, layer.max_length) for f in functions],
        learned_weights=bool(getattr(synth, "learned_weights", False)),
        max_length=layer.max_length)
  return spec


def _layer_spec(layer) -> Dict[str, Any]:
  """The dict of one layer of a block (see the configuration's docstring)."""
  kind = type(layer).__name__
  if kind in ("SynthesizerAttention", "SelfAttention", "EncDecAttention"):
    return _attention_spec(layer, kind)
  if kind == "DenseReluDense":
    activation = layer.activation
    activations = ([activation] if isinstance(activation, str)
                   else list(activation))
    if not all(isinstance(a, str) for a in activations):
      raise ExportError("DenseReluDense.activation must be names, got %r" %
                        (activation,))
    if layer.use_bias:
      raise ExportError("DenseReluDense with use_bias is not supported")
    return {"type": kind, "d_ff": layer.hidden_size,
            "activations": activations}
  raise ExportError("layer %s is not supported by the export (supported: "
                    "SynthesizerAttention, SelfAttention, EncDecAttention, "
                    "DenseReluDense)" % kind)


def stack_spec(unitransformer: transformer.Unitransformer,
                layer_names: List[str]) -> Dict[str, Any]:
  """A Unitransformer's stack: blocks of the same layers, and its ends."""
  stack = unitransformer.layer_stack
  for attribute, expected in _DEFAULT_SUBLAYERS.items():
    names = [getattr(f, "__name__", repr(f))
             for f in getattr(stack, attribute)]
    if names != expected:
      raise ExportError("%s of %s is %s; the export supports mesh's default "
                        "%s" % (attribute, unitransformer.name, names,
                                expected))
  if (unitransformer.sinusoid_positional_embedding or
      unitransformer.ensemble_dims):
    raise ExportError("sinusoid positional embeddings and ensembles are not "
                      "supported by the export")
  if unitransformer.autoregressive and unitransformer.input_full_attention:
    raise ExportError("input_full_attention is not supported by the export")
  layers = stack.layers
  all_specs = [_layer_spec(layer) for layer in layers]  # refuses unknowns
  per_block = len(layer_names)
  if per_block == 0 or len(layers) % per_block:
    raise ExportError("%s: %d layers do not make blocks of %d" % (
        unitransformer.name, len(layers), per_block))
  specs = all_specs[:per_block]
  for spec, name in zip(specs, layer_names):
    if spec["type"] != name:
      raise ExportError("%s: the checkpoint has %s where the model has %s" % (
          unitransformer.name, name, spec["type"]))
  if unitransformer.output_vocab_dim is None:
    logits = None
  elif unitransformer.shared_embedding_and_softmax_weights:
    logits = "embedding"
  else:
    logits = "kernel"
  return {
      "num_blocks": len(layers) // per_block,
      "layers": specs,
      "autoregressive": bool(unitransformer.autoregressive),
      "positional_embedding": (unitransformer.max_length_dim.size
                               if unitransformer.positional_embedding
                               else None),
      "logits": logits,
  }


def _one(values: Dict[str, Any], what: str) -> Any:
  """The one value a setting has across the model's layers."""
  distinct = {json.dumps(v, sort_keys=True) for v in values.values()}
  if len(distinct) > 1:
    raise ExportError("the PyTorch model needs one %s for all layers; this "
                      "model has %s" % (what, values))
  return next(iter(values.values())) if values else None


_FEED_FORWARD = {("relu",): "relu", ("gelu", "linear"): "gated-gelu",
                 ("silu", "linear"): "gated-silu", ("swish", "linear"):
                 "gated-swish", ("gelu",): "gelu"}


def configuration() -> types.ModuleType:
  """The PyTorch model's configuration module.

  Imported when a model is described, not with this module: the
  configuration imports transformers (and transformers torch, where it is
  installed), which the tokenizer's writing imports anyway. The export
  reads its table of synthesizing functions (`FUNCTION_SETTINGS`).

  Returns:
    `mtf_synthesizer.hf_model.configuration_mtf_synthesizer`.
  """
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.hf_model import configuration_mtf_synthesizer
  return configuration_mtf_synthesizer


def flat_config(stacks: Dict[str, Dict[str, Any]], d_model: int,
                vocab_size: int, shared_embedding: bool,
                layer_norm_epsilon: float) -> Dict[str, Any]:
  """MtfSynthesizerConfig's fields of the stacks mesh built.

  Args:
    stacks: "encoder"/"decoder" (or "transformer", a language model) ->
      the `stack_spec` of its Unitransformer.
    d_model: the model width.
    vocab_size: rows of the embedding.
    shared_embedding: one embedding for both stacks.
    layer_norm_epsilon: the norms' epsilon.

  Returns:
    Keyword arguments of MtfSynthesizerConfig.

  Raises:
    ExportError: a model the PyTorch configuration cannot describe (layers
      that differ in a setting the configuration holds once, an unknown
      feed-forward activation, a block of other layers than T5's).
  """
  attention, feed_forward, functions = {}, {}, {}
  for name, stack in stacks.items():
    kinds = [layer["type"] for layer in stack["layers"]]
    expected = (["SelfAttention", "EncDecAttention", "DenseReluDense"]
                if name == "decoder" else ["SelfAttention", "DenseReluDense"])
    if [k.replace("Synthesizer", "Self") for k in kinds] != expected:
      raise ExportError("%s blocks of %s are not supported by the export "
                        "(T5's blocks: %s)" % (name, kinds, expected))
    for layer in stack["layers"]:
      key = "%s/%s" % (name, layer["type"])
      if layer["type"] == "DenseReluDense":
        feed_forward[key] = (layer["d_ff"], layer["activations"])
        continue
      attention[key] = {k: layer[k] for k in (
          "num_heads", "d_kv", "num_memory_heads", "scale_queries")}
      if layer["type"] != "EncDecAttention":
        attention[key].update(
            relative=(layer["relative_attention"],
                      layer["relative_attention_num_buckets"]))
      if layer["type"] == "SynthesizerAttention":
        functions[name] = layer
  settings = _one({k: {n: v for n, v in a.items() if n != "relative"}
                   for k, a in attention.items()}, "attention setting")
  relative = _one({k: a["relative"] for k, a in attention.items()
                   if "relative" in a}, "relative position bias")
  d_ff, activations = _one(feed_forward, "feed-forward layer")
  proj = _FEED_FORWARD.get(tuple(activations))
  if proj is None:
    raise ExportError("DenseReluDense activations %s are not supported by "
                      "the export (supported: %s)" % (
                          activations, sorted(_FEED_FORWARD)))
  positional = _one({n: s["positional_embedding"] for n, s in stacks.items()},
                    "positional embedding")
  causal_lm = "transformer" in stacks
  main = stacks["transformer" if causal_lm else "decoder"]
  config = {
      "d_model": d_model, "vocab_size": vocab_size,
      "d_kv": settings["d_kv"], "num_heads": settings["num_heads"],
      "num_memory_heads": settings["num_memory_heads"],
      "scale_queries": settings["scale_queries"],
      "d_ff": d_ff, "feed_forward_proj": proj,
      "relative_attention_type": relative[0],
      "relative_attention_num_buckets": relative[1],
      "layer_norm_epsilon": layer_norm_epsilon,
      "shared_embedding": shared_embedding,
      "tie_word_embeddings": main["logits"] == "embedding",
      "max_position_embeddings": positional,
      "is_encoder_decoder": not causal_lm,
      "dropout_rate": 0.0,
  }
  if causal_lm:
    config["num_layers"] = main["num_blocks"]
  else:
    config["num_layers"] = stacks["encoder"]["num_blocks"]
    config["num_decoder_layers"] = stacks["decoder"]["num_blocks"]
    if config["tie_word_embeddings"] and not shared_embedding:
      raise ExportError("a softmax tied to the decoder's own embedding is not "
                        "supported by the export")
  dot_product = [synthesizers.DotProduct.name]
  names = {}
  for name in stacks:
    layer = functions.get(name)
    names[name] = ([f["name"] for f in layer["functions"]] if layer
                   else dot_product)
  config["encoder_synthesizers"] = names.get("encoder", dot_product)
  config["decoder_synthesizers"] = names.get("transformer",
                                             names.get("decoder"))
  if functions:
    config["synthesizer_max_length"] = _one(
        {n: l["max_length"] for n, l in functions.items()},
        "synthesizer_max_length")
    config["learned_mixture_weights"] = _one(
        {n: l["learned_weights"] for n, l in functions.items()
         if len(l["functions"]) > 1} or {"": True}, "mixture setting")
    declared = configuration().FUNCTION_SETTINGS
    per_setting = {}
    for stack, layer in functions.items():
      for function in layer["functions"]:
        name = function["name"]
        if name not in declared:
          raise ExportError("the synthesizing function %r has no PyTorch "
                            "implementation (PyTorch's: %s)" % (
                                name, ", ".join(declared)))
        for key, value in function.items():
          if key == "name":
            continue
          target = declared[name].mesh_settings.get(key)
          if target is None:
            raise ExportError("the setting %r of %s has no PyTorch "
                              "configuration field" % (key, name))
          per_setting.setdefault(target, {})[
              "%s/%s/%s" % (stack, name, key)] = value
    items = {}
    for target, values in per_setting.items():
      if target.item is None:
        config[target.field] = _one(values, target.field)
      else:
        items.setdefault(target.field, {})[target.item] = _one(
            values, "%s item %d" % (target.field, target.item))
    for field, values in items.items():
      config[field] = [values[i] for i in sorted(values)]
  return config
