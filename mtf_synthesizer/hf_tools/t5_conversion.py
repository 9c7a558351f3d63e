# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A Synthesizer around the weights of a transformers T5 checkpoint.

`from_t5` builds the Synthesizer of the chosen synthesizing functions at
the T5's sizes and copies every T5 weight to the module of the same name:
the model's names inside a stack are T5's, under `model.` (`lm_head` stays
`lm_head`). The embeddings, norms, feed-forward kernels (`wi` for relu,
`wi_0`/`wi_1` for gated activations), the relative position bias (T5
keeps one per stack, in block 0: `relative_attention_type="bias_shared"`),
the cross-attention and the self-attention projections the target layer
has are copied; T5 does not scale its queries at run time, nor does this
model by default, so V computes T5's logits. The synthesizing functions'
own weights (R, FR's R1/R2, D's and FD's layers, a mixture's logits) keep
mesh's initializers.

A T5 weight with no module of its name raises `T5ConversionError` naming
it, except the self-attention query and key kernels of a layer whose
functions have none (R, FR and D have no keys; R and FR no queries): those
are left out by the variant's design and reported (`ConversionInfo`).

A T5 directory is checked before it is loaded: one that does not exist
raises FileNotFoundError naming it (not transformers' "Repo id must be in
the form ..."), a truncated or corrupted safetensors file `WeightsFileError`
(`mtf_synthesizer/hf_tools/weight_files.py`) naming the file.
"""

import copy
import dataclasses
import importlib
import itertools
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

import torch
from transformers import PreTrainedModel
from transformers.utils import logging

from mtf_synthesizer.hf_model import configuration_mtf_synthesizer
from mtf_synthesizer.hf_model import modeling_mtf_synthesizer as modeling
from mtf_synthesizer.hf_tools import misspellings
from mtf_synthesizer.hf_tools.weight_files import check_weights

logger = logging.get_logger(__name__)

T5_MODEL_TYPES = configuration_mtf_synthesizer.T5_MODEL_TYPES

# Config fields copied from T5's config (same names, same meaning).
T5_FIELDS = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers",
             "num_decoder_layers", "num_heads",
             "relative_attention_num_buckets",
             "relative_attention_max_distance", "dropout_rate",
             "layer_norm_epsilon", "initializer_factor",
             "pad_token_id", "eos_token_id")
# Fields that the T5 weights fix (sizes and math): an override may not
# change them. The others (dropout_rate, ids) may be overridden.
FIXED = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers",
         "num_decoder_layers", "num_heads", "relative_attention_num_buckets",
         "relative_attention_max_distance", "layer_norm_epsilon",
         "feed_forward_proj", "tie_word_embeddings")
# The T5 layout, which the copied weights need (fixed too).
LAYOUT = dict(relative_attention_type="bias_shared", num_memory_heads=0,
              scale_queries=False, shared_embedding=True,
              max_position_embeddings=None, is_encoder_decoder=True)
# A self-attention projection that a variant may have no place for.
_PROJECTION = re.compile(
    r"^(encoder|decoder)\.block\.\d+\.layer\.0\.SelfAttention\.(q|k)\.weight$")


# T5's activations (its config's dense_act_fn, transformers' ACT2FN names)
# that this model computes alike, by this model's name. T5's "gelu" is the
# exact (erf) gelu, which mesh's models do not use.
ACTIVATIONS = {"relu": "relu", "gelu_new": "gelu_new", "silu": "silu",
               "swish": "swish", "linear": "linear"}


class T5ConversionError(ValueError):
  """A T5 weight or setting has no place in the Synthesizer."""


@dataclasses.dataclass
class ConversionInfo:
  """What `from_t5` did not copy one to one.

  Attributes:
    unused_t5_weights: T5 weights the chosen variant has no place for by
      design (the self-attention query or key kernel of a layer whose
      functions do not use it), by T5 name.
    initialized_weights: the Synthesizer's weights that T5 has no
      counterpart for (the synthesizing functions' own), drawn with mesh's
      initializers, by name.
  """
  unused_t5_weights: List[str]
  initialized_weights: List[str]


def _target_name(t5_name: str) -> str:
  """The Synthesizer's name of a T5 weight."""
  return t5_name if t5_name.startswith("lm_head.") else "model." + t5_name


def _is_a_path(name: str) -> bool:
  """Whether a --t5 argument can only be a path (not a Hub name)."""
  return (os.path.isabs(name) or name.startswith((".", "~")) or
          name.count("/") > 1 or os.path.exists(name))


def _load_t5(t5_model_or_path: Union[PreTrainedModel, str]):
  """The T5 model, loaded when given a path or Hub name (T5 or MT5 class)."""
  if isinstance(t5_model_or_path, PreTrainedModel):
    t5 = t5_model_or_path
  else:
    # pylint: disable-next=g-import-not-at-top
    from transformers import AutoModelForSeq2SeqLM
    path = str(t5_model_or_path)
    if not os.path.isdir(path) and _is_a_path(path):
      raise FileNotFoundError("no T5 checkpoint directory at %s" % path)
    check_weights(path)  # a directory's files, naming a broken one
    try:
      t5 = AutoModelForSeq2SeqLM.from_pretrained(path)
    except OSError as error:
      if os.path.isdir(path):
        raise
      # Neither reading worked: say both, not only the Hub's.
      raise FileNotFoundError(
          "%s is neither a T5 checkpoint directory (there is no directory "
          "%s) nor a Hub model that loads (%s)" % (
              path, os.path.abspath(path),
              str(error).strip().split("\n")[0])) from error
  if t5.config.model_type not in T5_MODEL_TYPES:
    raise T5ConversionError(
        "from_t5 reads a T5ForConditionalGeneration (model_type %s), not "
        "a %s (model_type %r)" % (" or ".join(T5_MODEL_TYPES),
                                  type(t5).__name__, t5.config.model_type))
  return t5


def _scales_output(t5) -> bool:
  """Whether T5 scales the decoder output by d_model**-0.5 (T5.1.0)."""
  config = t5.config
  if hasattr(config, "scale_decoder_outputs"):  # transformers 5's T5
    return bool(config.scale_decoder_outputs)
  if config.model_type == "mt5":  # transformers 5's MT5 never scales
    return False
  return bool(config.tie_word_embeddings)  # transformers 4's rule


def _is_tied(t5) -> bool:
  """Whether T5's output layer is its embedding."""
  head = t5.get_output_embeddings()
  return head is None or (head.weight is t5.get_input_embeddings().weight)


def config_fields(t5_config, encoder_synthesizers: Optional[Sequence[str]],
                  decoder_synthesizers: Optional[Sequence[str]],
                  synthesizer_max_length: int, tie_word_embeddings: bool,
                  overrides: Dict[str, Any]) -> Dict[str, Any]:
  """MtfSynthesizerConfig's fields for a T5 config.

  Args:
    t5_config: transformers' T5Config (or MT5Config).
    encoder_synthesizers: the encoder self-attention's functions (None:
      the configuration's default).
    decoder_synthesizers: the decoder self-attention's functions (None:
      the configuration's default).
    synthesizer_max_length: N, the positions of R, FR, D and FD.
    tie_word_embeddings: the output layer is the scaled embedding.
    overrides: other MtfSynthesizerConfig fields (dropout_rate, z_loss,
      dense_hidden_size, ...).

  Returns:
    The keyword arguments of MtfSynthesizerConfig.

  Raises:
    T5ConversionError: an override changes a size or layout the T5 weights
      fix, or the T5 is not an encoder-decoder.
  """
  if not getattr(t5_config, "is_encoder_decoder", False):
    raise T5ConversionError("from_t5 needs an encoder-decoder T5 "
                            "(T5ForConditionalGeneration)")
  fields = {name: getattr(t5_config, name) for name in T5_FIELDS}
  fields["feed_forward_proj"] = _feed_forward_proj(t5_config)
  start = getattr(t5_config, "decoder_start_token_id", None)
  fields["decoder_start_token_id"] = (start if start is not None
                                      else t5_config.pad_token_id)
  fields.update(LAYOUT)
  fields["tie_word_embeddings"] = tie_word_embeddings
  fixed = [name for name in sorted(overrides)
           if (name in FIXED or name in LAYOUT)
           and overrides[name] != fields[name]]
  if fixed:
    raise T5ConversionError(
        "the T5 checkpoint fixes %s; an override may not change them" %
        ", ".join("%s (%r)" % (name, fields[name]) for name in fixed))
  fields.update(overrides)
  fields["synthesizer_max_length"] = synthesizer_max_length
  for name, functions in (("encoder_synthesizers", encoder_synthesizers),
                          ("decoder_synthesizers", decoder_synthesizers)):
    if functions is not None:  # else the configuration's default
      fields[name] = functions
  return fields


def _feed_forward_proj(t5_config) -> str:
  """This model's feed_forward_proj for T5's activation (the same math)."""
  if t5_config.feed_forward_proj == "gated-gelu":  # gelu_new in both
    return "gated-gelu"
  activation = ACTIVATIONS.get(t5_config.dense_act_fn)
  if activation is None:
    raise T5ConversionError(
        "the T5's feed-forward activation %r (feed_forward_proj %r) is not "
        "one the Synthesizer computes (%s)" % (
            t5_config.dense_act_fn, t5_config.feed_forward_proj,
            ", ".join(sorted(ACTIVATIONS))))
  return ("gated-" if t5_config.is_gated_act else "") + activation


def _has_no_place_by_design(model: torch.nn.Module, t5_name: str) -> bool:
  """A self-attention q or k kernel that the target layer does not have."""
  match = _PROJECTION.match(t5_name)
  if not match:
    return False
  attention = model.get_submodule(
      _target_name(t5_name).rsplit(".", 2)[0])
  return not hasattr(attention, match.group(2))


def _synthesizer_own(model: torch.nn.Module) -> Set[str]:
  """The names of the weights T5 has no counterpart for.

  Those of each synthesizing function's module (`MtfSynthesizerFunction`,
  whichever functions the model code registers) and a mixture's logits.
  """
  # The function class of the model code the model was built from (this
  # package's, or a copy's).
  package = type(model).__module__.rpartition(".")[0]
  function_class = importlib.import_module(
      package + ".functions_mtf_synthesizer").MtfSynthesizerFunction
  own = set()
  for prefix, module in model.named_modules():
    if isinstance(module, function_class):
      own.update(prefix + "." + name for name, _ in itertools.chain(
          module.named_parameters(), module.named_buffers()))
  own.update(name for name, _ in model.named_parameters()
             if name.endswith(".alpha_logits"))
  return own


def copy_t5_weights(model: torch.nn.Module,
                    t5_state: Dict[str, torch.Tensor]) -> ConversionInfo:
  """Copies each T5 weight into the module of its name.

  Args:
    model: a MtfSynthesizerForConditionalGeneration at the T5's sizes.
    t5_state: the T5 model's state dict (tied weights under each name).

  Returns:
    What was not copied one to one.

  Raises:
    T5ConversionError: a T5 weight with no place (naming it), one of
      another shape, two T5 weights of different values for one tied
      weight, or a Synthesizer weight that T5 should have given but did
      not.
  """
  targets = dict(model.state_dict(keep_vars=True))
  sources: Dict[int, List[Tuple[str, torch.Tensor]]] = {}
  unused = []
  for t5_name, value in t5_state.items():
    name = _target_name(t5_name)
    if name not in targets:
      if _has_no_place_by_design(model, t5_name):
        unused.append(t5_name)
        continue
      raise T5ConversionError(
          "the T5 weight %r has no place in the Synthesizer (no %r)" %
          (t5_name, name))
    target = targets[name]
    if tuple(target.shape) != tuple(value.shape):
      raise T5ConversionError(
          "the T5 weight %r has shape %s, the Synthesizer's %r %s" %
          (t5_name, tuple(value.shape), name, tuple(target.shape)))
    sources.setdefault(id(target), []).append((t5_name, value))
  copied = set()
  with torch.no_grad():
    for name, target in targets.items():
      if id(target) in copied or id(target) not in sources:
        continue
      given = sources[id(target)]
      for other_name, other in given[1:]:
        if not torch.equal(other, given[0][1]):
          raise T5ConversionError(
              "the T5 weights %r and %r differ, but the Synthesizer ties "
              "them (%r)" % (given[0][0], other_name, name))
      target.copy_(given[0][1])
      copied.add(id(target))
  own = _synthesizer_own(model)
  initialized = []
  for name, target in targets.items():
    if id(target) in copied:
      continue
    if name not in own:
      raise T5ConversionError(
          "the Synthesizer's %r has no T5 weight (the T5 state lacks %r)" %
          (name, name[len("model."):] if name.startswith("model.") else name))
    initialized.append(name)
  return ConversionInfo(unused_t5_weights=unused,
                        initialized_weights=initialized)


def from_t5(t5_model_or_path: Union[PreTrainedModel, str],
            encoder_synthesizers: Optional[Sequence[str]] = None,
            decoder_synthesizers: Optional[Sequence[str]] = None,
            synthesizer_max_length: int = 512,
            output_loading_info: bool = False,
            model_class: Optional[type] = None,
            **config_overrides) -> Any:
  """A Synthesizer with a transformers T5's weights.

  Args:
    t5_model_or_path: a T5ForConditionalGeneration or
      MT5ForConditionalGeneration (T5, T5 v1.1, FLAN-T5, mT5, ByT5), or a
      path or Hub name `AutoModelForSeq2SeqLM.from_pretrained` loads as one.
    encoder_synthesizers: the encoder self-attention's functions
      (`MtfSynthesizerConfig` names, a tuple or "+"-joined; several make a
      mixture); None: the configuration's default, the dot product (T5).
    decoder_synthesizers: the decoder self-attention's functions (None:
      as the encoder's default).
    synthesizer_max_length: N, the positions of R, FR, D and FD: the
      longest sequence a stack with them reads.
    output_loading_info: also return a `ConversionInfo`.
    model_class: the class to build (its config class builds the config):
      MtfSynthesizerForConditionalGeneration of this package's model code
      (the default) or of a copy of it.
    **config_overrides: other MtfSynthesizerConfig fields (dropout_rate,
      z_loss, dense_hidden_size, factorized_random_k, ...); not the sizes
      or the layout the T5 weights fix. A keyword close to one of the
      Synthesizer's own fields is kept as an attribute, with a warning
      naming the field.

  Returns:
    The model in eval mode and in the T5's dtype, or (model, ConversionInfo)
    with output_loading_info. The T5's output scaling is kept: T5.1.0
    (scaled, tied) gives tie_word_embeddings=True; T5 v1.1 and its
    descendants (unscaled) an output layer of their own, a copy of T5's
    (transformers 5 ties T5's even then; mesh's v1.1 had its own).

  Raises:
    T5ConversionError: a T5 weight that has no place (named), a model that
      is not a T5, an activation this model does not compute, or an
      override that contradicts the T5.
    FileNotFoundError: a path to a directory that does not exist.
    WeightsFileError: a safetensors file of the T5 directory that is
      truncated or corrupted (named; weight_files.py).
  """
  if model_class is None:
    model_class = modeling.MtfSynthesizerForConditionalGeneration
  config_class = model_class.config_class
  for key in config_overrides:
    close = misspellings.misspelled_field(key, config_class)
    if close:
      logger.warning("from_t5 got %r, which is no field of %s: did you mean "
                     "%r? It is kept as an attribute and does nothing.",
                     key, config_class.__name__, close)
  t5 = _load_t5(t5_model_or_path)
  scaled, tied = _scales_output(t5), _is_tied(t5)
  if scaled and not tied:
    raise T5ConversionError(
        "the T5 scales its decoder output but its lm_head.weight is not its "
        "embedding: the Synthesizer scales only a tied output layer")
  config = config_class(**config_fields(
      t5.config, encoder_synthesizers, decoder_synthesizers,
      synthesizer_max_length, scaled, config_overrides))
  model = model_class(config)
  info = copy_t5_weights(model, t5.state_dict())
  if getattr(t5, "generation_config", None) is not None:
    model.generation_config = copy.deepcopy(t5.generation_config)
  model.to(dtype=next(t5.parameters()).dtype)
  model.eval()
  if info.unused_t5_weights:
    logger.warning(
        "The variant (encoder %s, decoder %s) has no place for these T5 "
        "weights, which were left out: %s",
        "+".join(config.encoder_synthesizers),
        "+".join(config.decoder_synthesizers),
        ", ".join(info.unused_t5_weights))
  if info.initialized_weights:
    logger.warning(
        "These weights of the Synthesizer are not in the T5 checkpoint and "
        "were newly initialized (mesh's initializers); train the model "
        "before using it: %s", ", ".join(info.initialized_weights))
  return (model, info) if output_loading_info else model
