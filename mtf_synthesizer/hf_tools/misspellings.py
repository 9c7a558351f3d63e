# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The Synthesizer's configuration field that a keyword likely misspells.

`MtfSynthesizerConfig`, as every transformers configuration, keeps a
keyword that is no field as an attribute that does nothing. Where this
package takes configuration fields from a user (`from_t5`'s overrides),
`misspelled_field` names the field a keyword is close to: only the
Synthesizer's own fields (those `T5Config` lacks) are candidates, and
never a name that a transformers configuration uses.
"""

import dataclasses
import difflib
import functools
import pathlib
import re
from typing import Optional

import transformers
from transformers import T5Config

from mtf_synthesizer.hf_model import configuration_mtf_synthesizer


@functools.lru_cache(maxsize=None)
def _transformers_configuration_sources() -> str:
  """The text of every configuration file transformers ships, joined.

  The base configuration, generation's, and each model's
  `configuration_*.py`: where every field and alias of a transformers
  configuration is written. Read as text, so that no configuration class
  is imported (importing them all takes seconds).
  """
  root = pathlib.Path(transformers.__file__).parent
  paths = [root / "configuration_utils.py",
           root / "generation" / "configuration_utils.py"]
  paths += sorted(root.glob("models/*/configuration_*.py"))
  return "\n".join(p.read_text(encoding="utf-8") for p in paths
                   if p.is_file())


def _transformers_uses(name: str) -> bool:
  """Whether a configuration file of transformers names `name`."""
  word = re.compile(r"\b%s\b" % re.escape(name))
  return word.search(_transformers_configuration_sources()) is not None


def misspelled_field(key: str,
                     config_class: Optional[type] = None) -> Optional[str]:
  """The Synthesizer's field a keyword likely misspells, or None.

  Args:
    key: a keyword that is no field.
    config_class: the configuration class (default this package's
      `MtfSynthesizerConfig`).

  Returns:
    The closest of the Synthesizer's own fields, or None.
  """
  config_class = (config_class or
                  configuration_mtf_synthesizer.MtfSynthesizerConfig)
  t5_fields = {f.name for f in dataclasses.fields(T5Config)}
  own = [f.name for f in dataclasses.fields(config_class)
         if f.name not in t5_fields]
  close = difflib.get_close_matches(key, own, n=1, cutoff=0.8)
  if not close or _transformers_uses(key):
    return None
  return close[0]
