# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Exports a trained mesh model to a Hugging Face `transformers` directory.

`export(model_dir, out_dir)` writes what
`AutoModelForSeq2SeqLM.from_pretrained(out_dir, trust_remote_code=True)`
(or `AutoModelForCausalLM` for a decoder-only language model) loads:

  * config.json: the model as mesh built it from the run's
    operative_config.gin (`describe`), with `auto_map` naming the classes;
  * model.safetensors: every variable of the checkpoint, float32, under the
    PyTorch name of `parameter_name` (optimizer slots left out);
  * the PyTorch model's code, every module of `mtf_synthesizer/hf_model/`
    (`MODEL_CODE_FILES`: the configuration, the functions' declarations
    (`mtf_synthesizer/synthesizing_functions.py`, which the folder links
    to), the functions, the attention, the model, its loss, the checks of
    its arguments and the list of functions from outside the package), and
    the module of each such function the model uses
    (`hf_tools/extensions.py`);
  * a model card (README.md; `hf_tools/model_card.py`);
  * the tokenizer: `ByT5Tokenizer` for the byte vocabulary, `T5Tokenizer`
    for a SentencePiece model, with the run's extra ids;
  * generation_config.json: decoding starts at id 0 and ends at EOS (1).

The export reads the checkpoint with TensorFlow and writes with
`safetensors.numpy`; only the tokenizer is written by `transformers` (which
imports torch when it is installed). Of the model's code it reads the
configuration's table of synthesizing functions (`FUNCTION_SETTINGS`: the
field each of mesh's settings fills), which needs no torch; torch is not
needed to export.
"""

import json
import os
import re
import shutil
from typing import Any, Dict, List, Optional, Tuple

from absl import logging
import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import utils as mtf_utils
import numpy as np
import tensorflow.compat.v1 as tf

import mtf_synthesizer  # pylint: disable=unused-import  (gin configurables)
from mtf_synthesizer import synthesizers
from mtf_synthesizer.export import mesh_layers
from mtf_synthesizer.export import torch_names
from mtf_synthesizer.hf_tools import extensions
from mtf_synthesizer.hf_tools import model_card

MODEL_CODE_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hf_model")
# The model's code, written beside its weights: every module of hf_model/
# but the package's __init__.py.
MODEL_CODE_FILES = tuple(sorted(
    name for name in os.listdir(MODEL_CODE_DIR)
    if name.endswith(".py") and name != "__init__.py"))
SEQ2SEQ_CLASS = "MtfSynthesizerForConditionalGeneration"
CAUSAL_LM_CLASS = "MtfSynthesizerForCausalLM"
# What TensorFlow's checkpoint reader raises for files it cannot read (a
# data file cut short gives IndexError "Read less bytes than requested").
_READ_ERRORS = (tf.errors.OpError, IndexError, RuntimeError)
# Modules the operative config names, imported before parsing it.
_CONFIG_MODULES = ("t5.models.mesh_transformer", "t5_tasks")
# The configuration read back from mesh's layers (mesh_layers.py).
ExportError = mesh_layers.ExportError
flat_config = mesh_layers.flat_config


def _checkpoint_layers(shapes: Dict[str, List[int]],
                       stack: str) -> List[str]:
  """The layer classes of a stack's first block, from the variable names."""
  found = {}
  pattern = re.compile(r"^%s/block_000/layer_(\d+)/(\w+)/" % re.escape(stack))
  for name in shapes:
    m = pattern.match(name)
    if m and m.group(2) not in ("rms_norm", "layer_norm"):
      found[int(m.group(1))] = m.group(2)
  return [found[i] for i in sorted(found)]


def checkpoint_steps(model_dir: str) -> Dict[int, str]:
  """The checkpoints of a model directory, by step.

  Args:
    model_dir: the run's model directory.

  Returns:
    step -> checkpoint prefix, for every `<prefix>-<step>.index` in it.
  """
  steps = {}
  for index in tf.io.gfile.glob(os.path.join(model_dir, "*.index")):
    prefix = index[:-len(".index")]
    step = prefix.rsplit("-", 1)[-1]
    if step.isdigit():
      steps[int(step)] = prefix
  return steps


def find_checkpoint(model_dir: str, checkpoint: Optional[str] = None) -> str:
  """The checkpoint to export: a prefix, a step of model_dir, or the latest.

  Args:
    model_dir: the run's model directory.
    checkpoint: a checkpoint prefix (as given, or relative to model_dir),
      the step of one of model_dir's checkpoints ("1000"), or None for the
      latest.

  Returns:
    The checkpoint prefix.

  Raises:
    FileNotFoundError: no such checkpoint; the message names the steps of
      the checkpoints model_dir has.
  """
  def steps_note():
    steps = sorted(checkpoint_steps(model_dir))
    return ("%s has checkpoints of steps %s" % (
        model_dir, ", ".join(str(s) for s in steps)) if steps
            else "%s has no checkpoint" % model_dir)

  if checkpoint is None:
    found = tf.train.latest_checkpoint(model_dir)
    if not found:
      raise FileNotFoundError("no checkpoint in %s" % model_dir)
    return found
  if checkpoint.isdigit():
    prefix = checkpoint_steps(model_dir).get(int(checkpoint))
    if prefix is None:
      raise FileNotFoundError("no checkpoint of step %s: %s" % (
          checkpoint, steps_note()))
    return prefix
  for prefix in (checkpoint, os.path.join(model_dir, checkpoint)):
    if tf.io.gfile.exists(prefix + ".index"):
      return prefix
  raise FileNotFoundError("no checkpoint %s (no %s.index): %s" % (
      checkpoint, checkpoint, steps_note()))


def _reader(checkpoint: str):
  """A checkpoint's reader; a file that cannot be read raises ExportError."""
  try:
    return tf.train.load_checkpoint(checkpoint)
  except _READ_ERRORS as e:
    raise ExportError("cannot read the checkpoint %s: %s" % (
        checkpoint, e)) from None


def _run_vocabulary() -> Tuple[Optional[str], int]:
  """The vocabulary of the parsed run, as t5 chooses it for MIXTURE_NAME.

  Returns:
    ("byte" or a SentencePiece model path, extra ids), or (None, 100) when
    the run's task is not registered here or its vocabulary is of another
    kind.
  """
  import seqio  # pylint: disable=g-import-not-at-top
  from t5.models import mesh_transformer  # pylint: disable=g-import-not-at-top
  try:
    vocabulary = mesh_transformer.get_vocabulary()
  except (ValueError, KeyError, TypeError) as e:
    logging.warning("the run's vocabulary is unknown here (%s)", e)
    return None, 100
  if isinstance(vocabulary, tuple):
    vocabulary = vocabulary[1]  # the targets'
  vocabulary = getattr(vocabulary, "delegate", vocabulary)  # t5_tasks' lazy
  if isinstance(vocabulary, seqio.ByteVocabulary):
    return "byte", vocabulary.extra_ids
  if isinstance(vocabulary, seqio.SentencePieceVocabulary):
    return vocabulary.sentencepiece_model_file, vocabulary.extra_ids
  return None, 100


def describe(model_dir: str,
             checkpoint: Optional[str] = None) -> Tuple[Dict[str, Any], str]:
  """The configuration of a trained model, from its operative config.

  Gin is cleared, the run's operative_config.gin parsed, and the model built
  as the stock CLI builds it (`utils.build_model`); its layers are read back.
  Gin is cleared again afterwards.

  Args:
    model_dir: the run's model directory (operative_config.gin, checkpoints).
    checkpoint: a checkpoint prefix or step (`find_checkpoint`); default
      the latest in model_dir.

  Returns:
    (MtfSynthesizerConfig keyword arguments, the checkpoint prefix).

  Raises:
    ExportError: the model has a part the export does not support, or its
      checkpoint cannot be read (named).
    FileNotFoundError: no operative config, or no such checkpoint (the
      steps model_dir has named).
  """
  import importlib  # pylint: disable=g-import-not-at-top
  for module in _CONFIG_MODULES:
    importlib.import_module(module)
  config_path = os.path.join(model_dir, "operative_config.gin")
  if not tf.io.gfile.exists(config_path):
    raise FileNotFoundError("%s not found: export needs a model directory "
                            "the stock CLI trained" % config_path)
  checkpoint = find_checkpoint(model_dir, checkpoint)
  shapes = _reader(checkpoint).get_variable_to_shape_map()
  with tf.io.gfile.GFile(config_path) as f:
    operative = f.read()
  gin.clear_config()
  try:
    gin.parse_config(operative, skip_unknown=True)
    model_type = gin.query_parameter("run.model_type")
    if model_type not in ("bitransformer", "lm"):
      raise ExportError("model_type %r is not supported by the export "
                        "(bitransformer, lm)" % model_type)
    # shared/embedding, or each stack's <stack>/embedding: [vocab, d_model].
    vocab_size, d_model = next(
        shape for name, shape in sorted(shapes.items())
        if name.split("/")[-1] == "embedding")
    model = mtf_utils.build_model(
        model_type=model_type, input_vocab_size=vocab_size,
        output_vocab_size=vocab_size,
        layout_rules=mtf.convert_to_layout_rules(""),
        mesh_shape=mtf.convert_to_shape(""))
    if model_type == "bitransformer":
      unis = [model.encoder, model.decoder]
      names = ["encoder", "decoder"]
    else:
      unis, names = [model], ["transformer"]
    stacks = {}
    for name, uni in zip(names, unis):
      stacks[name] = mesh_layers.stack_spec(
          uni, _checkpoint_layers(shapes, uni.name))
      stacks[name]["mesh_name"] = uni.name
    epsilon = gin.query_parameter("sublayer_rms_norm.epsilon") if (
        "sublayer_rms_norm.epsilon" in operative) else 1e-6
    config = mesh_layers.flat_config(
        stacks, d_model=d_model, vocab_size=vocab_size,
        shared_embedding="shared/embedding" in shapes,
        layer_norm_epsilon=epsilon)
    config["mesh_stacks"] = {spec["mesh_name"]: name
                             for name, spec in stacks.items()}
    config["vocabulary"], config["extra_ids"] = _run_vocabulary()
  finally:
    gin.clear_config()
  return config, checkpoint


def _weights(checkpoint: str, stack_prefixes: Dict[str, str],
             num_heads: int) -> Dict[str, np.ndarray]:
  """Every exported variable of the checkpoint, float32, by PyTorch name."""
  reader = _reader(checkpoint)
  out = {}
  for mesh_name in sorted(reader.get_variable_to_shape_map()):
    try:
      value = reader.get_tensor(mesh_name)
    except _READ_ERRORS as e:
      raise ExportError("cannot read %s from the checkpoint %s: %s" % (
          mesh_name, checkpoint, e)) from None
    try:
      found = torch_names.torch_weight(mesh_name, value, num_heads,
                                       stack_prefixes)
    except torch_names.UnknownVariable as e:
      raise ExportError("the checkpoint variable %s has no PyTorch weight" %
                        e) from None
    if found is None:
      continue
    name, value = found
    if not np.issubdtype(np.asarray(value).dtype, np.floating) and (
        value.dtype.name != "bfloat16"):
      raise ExportError("%s has dtype %s" % (mesh_name, value.dtype))
    out[name] = np.ascontiguousarray(np.asarray(value, np.float32))
  return out


def _write_tokenizer(vocabulary: str, extra_ids: int, out_dir: str) -> str:
  """Writes the tokenizer files; returns the tokenizer class name."""
  # pylint: disable=g-import-not-at-top
  if vocabulary == "byte":
    from transformers import ByT5Tokenizer
    tokenizer = ByT5Tokenizer(extra_ids=extra_ids)
  else:
    from transformers import T5Tokenizer
    # T5Tokenizer reads the model as spiece.model of a directory.
    tf.io.gfile.copy(vocabulary, os.path.join(out_dir, "spiece.model"),
                     overwrite=True)
    tokenizer = T5Tokenizer.from_pretrained(out_dir, extra_ids=extra_ids)
  tokenizer.save_pretrained(out_dir)
  return type(tokenizer).__name__


# What a model needs to be transformers' own T5 (T5ForConditionalGeneration),
# as configuration fields and the values that make it so.
_PLAIN_T5 = {"is_encoder_decoder": True, "encoder_synthesizers":
             [synthesizers.DotProduct.name], "decoder_synthesizers":
             [synthesizers.DotProduct.name],
             "relative_attention_type": "bias_shared", "scale_queries": False,
             "shared_embedding": True, "max_position_embeddings": None}


def t5_config(fields: Dict[str, Any]) -> Dict[str, Any]:
  """transformers' T5Config of a model that is plain T5.

  Args:
    fields: MtfSynthesizerConfig's fields (`flat_config`).

  Returns:
    The T5Config fields.

  Raises:
    ExportError: the model is not plain T5 (a synthesizing function, a
      layout transformers' T5 lacks).
  """
  differing = sorted(k for k, v in _PLAIN_T5.items() if fields.get(k) != v)
  if fields["num_memory_heads"] not in (0, fields["num_heads"]):
    differing.append("num_memory_heads")
  if fields["feed_forward_proj"] not in ("relu", "gated-gelu"):
    differing.append("feed_forward_proj")
  if differing:
    raise ExportError(
        "the model is not plain T5, so transformers' T5 cannot load it (%s); "
        "export it without --t5" % ", ".join(
            "%s=%r" % (k, fields.get(k)) for k in differing))
  keys = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers",
          "num_decoder_layers", "num_heads", "relative_attention_num_buckets",
          "layer_norm_epsilon", "feed_forward_proj", "tie_word_embeddings")
  return dict({k: fields[k] for k in keys}, model_type="t5",
              architectures=["T5ForConditionalGeneration"],
              relative_attention_max_distance=128, dropout_rate=0.0,
              is_encoder_decoder=True, pad_token_id=0, eos_token_id=1,
              decoder_start_token_id=0, use_cache=True)


def auto_map(is_encoder_decoder: bool) -> Dict[str, str]:
  """config.json's `auto_map`: the classes of the code beside the weights.

  Args:
    is_encoder_decoder: an encoder-decoder, else a causal LM.

  Returns:
    {Auto class: "module.Class"} for the configuration and the model.
  """
  if is_encoder_decoder:
    auto_model, architecture = "AutoModelForSeq2SeqLM", SEQ2SEQ_CLASS
  else:
    auto_model, architecture = "AutoModelForCausalLM", CAUSAL_LM_CLASS
  return {"AutoConfig": "configuration_mtf_synthesizer.MtfSynthesizerConfig",
          auto_model: "modeling_mtf_synthesizer." + architecture}


def write_model_code(out_dir: str, functions: List[str]) -> List[str]:
  """Writes the model's code beside its weights: what loading it needs.

  Args:
    out_dir: the model's folder.
    functions: the synthesizing functions the model uses (those from
      outside the package bring their modules).

  Returns:
    The files written, by name.
  """
  for name in MODEL_CODE_FILES:
    shutil.copyfile(os.path.join(MODEL_CODE_DIR, name),
                    os.path.join(out_dir, name))
  modules = extensions.write_extensions(out_dir, functions)
  return list(MODEL_CODE_FILES) + [m + ".py" for m in modules]


def _write_model_card(out_dir: str, config: Dict[str, Any],
                      checkpoint: str) -> None:
  """The exported directory's README.md (a user's own card is kept)."""
  fields = {k: v for k, v in config.items()
            if k not in ("model_type", "architectures", "auto_map")}
  model_card.write_model_card(
      out_dir, mesh_layers.configuration().MtfSynthesizerConfig(**fields),
      "exported from the mesh checkpoint %s (step %s) by "
      "mtf-synthesizer-export-hf" % (
          os.path.basename(checkpoint), checkpoint.rsplit("-", 1)[-1]))


def export(model_dir: str, out_dir: str, vocabulary: Optional[str] = None,
           checkpoint: Optional[str] = None,
           plain_t5: bool = False) -> Dict[str, Any]:
  """Writes the transformers directory of a trained mesh model.

  Args:
    model_dir: the stock CLI's model directory.
    out_dir: the directory to write (created; files in it are replaced).
    vocabulary: "byte" or a SentencePiece model path; default the one the
      run used (its gin binding, else MTF_SYNTH_VOCAB).
    checkpoint: a checkpoint prefix; default the latest.
    plain_t5: write transformers' own T5ForConditionalGeneration (no
      remote code), for a model that is plain T5 (mesh's SelfAttention in
      T5's layout).

  Returns:
    A summary: {"checkpoint", "architecture", "parameters", "tokenizer"}.

  Raises:
    ExportError: a part of the model the PyTorch model does not implement,
      or no vocabulary.
  """
  # pylint: disable=g-import-not-at-top
  from safetensors import numpy as safetensors_numpy
  fields, checkpoint = describe(model_dir, checkpoint)
  vocabulary = vocabulary or fields.pop("vocabulary")
  fields.pop("vocabulary", None)
  extra_ids = fields.pop("extra_ids")
  if not vocabulary:
    raise ExportError(
        "say which vocabulary the model was trained with: --vocabulary=byte "
        "or the path of its SentencePiece model (T5's default is "
        "gs://t5-data/vocabs/cc_all.32000/sentencepiece.model)")
  mesh_stacks = fields.pop("mesh_stacks")
  prefixes = {mesh: "model" if name == "transformer" else "model." + name
              for mesh, name in mesh_stacks.items()}
  architecture = (SEQ2SEQ_CLASS if fields["is_encoder_decoder"]
                  else CAUSAL_LM_CLASS)
  if plain_t5:
    config = t5_config(fields)
    architecture = "T5ForConditionalGeneration"
  tf.io.gfile.makedirs(out_dir)
  config = config if plain_t5 else dict(
      fields,
      model_type="mtf_synthesizer",
      architectures=[architecture],
      auto_map=auto_map(fields["is_encoder_decoder"]),
      pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
      use_cache=True)
  with open(os.path.join(out_dir, "config.json"), "w") as f:
    json.dump(config, f, indent=2, sort_keys=True)
  weights = _weights(checkpoint, prefixes, fields["num_heads"])
  if not fields["is_encoder_decoder"] and "model.shared.weight" in weights:
    weights["model.embed_tokens.weight"] = weights.pop("model.shared.weight")
  if plain_t5:  # transformers' T5 has no base model attribute
    weights = {k[len("model."):] if k.startswith("model.") else k: v
               for k, v in weights.items()}
  safetensors_numpy.save_file(weights,
                              os.path.join(out_dir, "model.safetensors"),
                              metadata={"format": "pt"})
  if not plain_t5:
    write_model_code(out_dir, list(fields.get("encoder_synthesizers") or ())
                     + list(fields.get("decoder_synthesizers") or ()))
    _write_model_card(out_dir, config, checkpoint)
  tokenizer = _write_tokenizer(vocabulary, extra_ids, out_dir)
  with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
    json.dump({"decoder_start_token_id": 0, "eos_token_id": 1,
               "pad_token_id": 0, "bos_token_id": 0}, f, indent=2)
  return {"checkpoint": checkpoint, "architecture": architecture,
          "parameters": int(sum(w.size for w in weights.values())),
          "tokenizer": tokenizer}
