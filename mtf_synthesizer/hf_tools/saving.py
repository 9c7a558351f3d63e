# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A PyTorch Synthesizer saved with its code, its extensions and a card.

`save_pretrained(model, directory)` writes what the export writes: the
weights and config.json (`auto_map` naming the classes), the model's code
beside them (transformers' own copy of the classes' files, as
`register_for_auto_class` asks), the module of each synthesizing function
from outside the package that the model uses (`extensions.py`), and a
model card (`model_card.py`), unless the folder has a card of its own.
The folder then loads with `trust_remote_code=True` where this package is
not installed. `model.save_pretrained(directory)` alone writes the weights
and config.json, which load where the package is imported.
"""

import os
from typing import Any, Dict, Optional

from transformers import PreTrainedModel

from mtf_synthesizer.hf_tools import extensions
from mtf_synthesizer.hf_tools import model_card

# The Auto class of each model class (by name, for any copy of the code).
AUTO_CLASSES: Dict[str, str] = {
    "MtfSynthesizerModel": "AutoModel",
    "MtfSynthesizerForConditionalGeneration": "AutoModelForSeq2SeqLM",
    "MtfSynthesizerForCausalLM": "AutoModelForCausalLM",
}


def register_for_auto_classes(model: PreTrainedModel) -> None:
  """Has transformers write the model's code and `auto_map` when saving.

  Args:
    model: a model of one of AUTO_CLASSES' classes.

  Raises:
    ValueError: a class that is not one of them.
  """
  name = type(model).__name__
  if name not in AUTO_CLASSES:
    raise ValueError("%s is not one of the Synthesizer's model classes (%s)"
                     % (name, ", ".join(AUTO_CLASSES)))
  type(model.config).register_for_auto_class()
  type(model).register_for_auto_class(AUTO_CLASSES[name])


def save_pretrained(model: PreTrainedModel, save_directory: Any,
                    source: Optional[str] = None,
                    base_model: Optional[str] = None, **kwargs: Any) -> None:
  """Saves a model so that its folder loads without this package.

  Args:
    model: a PyTorch Synthesizer (any of AUTO_CLASSES).
    save_directory: the folder.
    source: where the weights came from, for the model card (one
      sentence); default where the model was loaded from, or "built in
      PyTorch".
    base_model: the Hub name of the T5 it was made from, if any (the
      card's metadata).
    **kwargs: PreTrainedModel.save_pretrained's other arguments
      (`max_shard_size`, ...). Not `push_to_hub`: it would upload before
      the extensions and the card are written; upload the folder
      afterwards (huggingface_hub's `upload_folder`).

  Raises:
    ValueError: push_to_hub.
  """
  if kwargs.get("push_to_hub"):
    raise ValueError("save the folder, then upload it (huggingface_hub's "
                     "upload_folder): push_to_hub would leave out the "
                     "extensions and the model card")
  register_for_auto_classes(model)
  model.save_pretrained(save_directory, **kwargs)
  directory = os.fspath(save_directory)
  config = model.config
  extensions.write_extensions(
      directory, config.encoder_synthesizers + config.decoder_synthesizers,
      extensions.model_extension_files(model))
  if source is None:
    loaded_from = config.name_or_path
    source = ("saved by save_pretrained from a model loaded from %s" %
              loaded_from if loaded_from else
              "saved by save_pretrained from a model built in PyTorch")
  model_card.write_model_card(directory, config, source,
                              base_model=base_model)
