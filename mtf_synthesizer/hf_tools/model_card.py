# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The model card (README.md) of a saved or exported Synthesizer.

`saving.save_pretrained`, `mtf-synthesizer-export-hf` and
`mtf-synthesizer-from-t5` write one into every model directory: the Hub's
YAML metadata (`library_name`, `pipeline_tag`, tags, `base_model` for a
model made from a T5, `license` where known), then which synthesizing
functions the model composes, where its weights came from, how to load it
and the paper to cite. A README.md that this module did not write (a
user's own card) is never replaced.
"""

import os
from typing import Optional

CARD_FILE = "README.md"
# The line that marks a card as this module's (replaced on the next save).
MARKER = "<!-- model card written by mtf_synthesizer -->"
PAPER = "https://arxiv.org/abs/2005.00743"
CITATION = """@inproceedings{tay2021synthesizer,
  title={Synthesizer: Rethinking Self-Attention for Transformer Models},
  author={Tay, Yi and Bahri, Dara and Metzler, Donald and Juan, Da-Cheng and
          Zhao, Zhe and Zheng, Che},
  booktitle={International Conference on Machine Learning},
  pages={10183--10192},
  year={2021},
  organization={PMLR}
}"""


def _yaml_string(value: str) -> str:
  """A YAML scalar in double quotes (JSON's escaping is YAML's)."""
  return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')


def _composition(functions) -> str:
  names = " + ".join("`%s`" % name for name in functions)
  return names + (" (a mixture, eq. 8)" if len(functions) > 1 else "")


def card_text(config, source: str, base_model: Optional[str] = None,
              license_name: Optional[str] = None) -> str:
  """The card of a model of `config`.

  Args:
    config: the model's MtfSynthesizerConfig.
    source: where the weights came from, one sentence (a mesh checkpoint
      and its step, a T5, or a model built in PyTorch).
    base_model: the Hub name of the T5 it was made from, if any.
    license_name: the weights' licence (a Hub licence id), if known.

  Returns:
    README.md's text.
  """
  seq2seq = config.is_encoder_decoder
  head = ("MtfSynthesizerForConditionalGeneration" if seq2seq else
          "MtfSynthesizerForCausalLM")
  auto = "AutoModelForSeq2SeqLM" if seq2seq else "AutoModelForCausalLM"
  lines = ["---", "library_name: transformers",
           "pipeline_tag: %s" % ("text2text-generation" if seq2seq else
                                 "text-generation"),
           "tags:", "- mtf_synthesizer", "- synthesizer", "- t5"]
  if base_model:
    lines.append("base_model: %s" % _yaml_string(base_model))
  if license_name:
    lines.append("license: %s" % license_name)
  lines += ["---", MARKER, "",
            "# A Synthesizer T5 (%s)" % head, "",
            "A T5 whose self-attention composes synthesizing functions "
            "(Tay et al., [Synthesizer: Rethinking Self-Attention for "
            "Transformer Models](%s)), written by the `mtf_synthesizer` "
            "package." % PAPER, ""]
  if seq2seq:
    lines += ["- Encoder self-attention: %s" %
              _composition(config.encoder_synthesizers),
              "- Decoder self-attention: %s" %
              _composition(config.decoder_synthesizers)]
  else:
    lines.append("- Self-attention: %s" %
                 _composition(config.decoder_synthesizers))
  lines += ["- Sizes: d_model %d, %d heads of d_kv %d, d_ff %d, %s; "
            "synthesizer_max_length (N) %d" % (
                config.d_model, config.num_heads, config.d_kv, config.d_ff,
                ("%d encoder and %d decoder blocks" % (
                    config.num_layers, config.num_decoder_layers)
                 if seq2seq else "%d blocks" % config.num_layers),
                config.synthesizer_max_length),
            "- Weights: %s" % source, "",
            "## Load it", "",
            "The model's code is in this directory; without the "
            "`mtf_synthesizer` package, load it with "
            "`trust_remote_code=True`:", "",
            "```python",
            "from transformers import %s" % auto,
            "model = %s.from_pretrained(PATH, trust_remote_code=True)" % auto,
            "```", "",
            "## Cite", "", "```bibtex", CITATION, "```", ""]
  return "\n".join(lines)


def write_model_card(directory: str, config, source: str,
                     base_model: Optional[str] = None,
                     license_name: Optional[str] = None) -> bool:
  """Writes README.md unless the directory has one this module did not write.

  Args:
    directory: the model directory.
    config: the model's MtfSynthesizerConfig.
    source: where the weights came from (`card_text`).
    base_model: the Hub name of the T5 it was made from, if any.
    license_name: the weights' licence, if known.

  Returns:
    Whether the card was written (False: a user's own card is kept).
  """
  path = os.path.join(os.fspath(directory), CARD_FILE)
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      if MARKER not in f.read():
        return False
  with open(path, "w", encoding="utf-8") as f:
    f.write(card_text(config, source, base_model, license_name))
  return True
