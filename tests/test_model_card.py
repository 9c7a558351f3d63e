# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every model directory has a model card the Hub reads; a user's is kept.

`mtf_synthesizer.hf_tools.saving.save_pretrained` writes README.md with the
Hub's metadata (parsed here by huggingface_hub's own `ModelCard`), for both
heads and every variant of the table; the commands' cards are checked in
test_hf_export.py and test_from_t5_command.py.
"""

import huggingface_hub
import pytest

import tiny_models
from mtf_synthesizer import attentions
from mtf_synthesizer.hf_tools import model_card
from mtf_synthesizer.hf_tools import saving

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("causal_lm", [False, True], ids=["seq2seq", "lm"])
@pytest.mark.parametrize("variant", attentions.VARIANTS,
                         ids=[v.label for v in attentions.VARIANTS])
def test_save_pretrained_writes_a_card_the_hub_reads(variant, causal_lm,
                                                     tmp_path):
  build = tiny_models.causal_lm if causal_lm else tiny_models.seq2seq
  saving.save_pretrained(build(variant.components), tmp_path)
  card = huggingface_hub.ModelCard.load(tmp_path / "README.md")
  metadata = card.data.to_dict()
  assert metadata["library_name"] == "transformers"
  assert metadata["pipeline_tag"] == (
      "text-generation" if causal_lm else "text2text-generation")
  assert "synthesizer" in metadata["tags"]
  for name in variant.components:
    assert "`%s`" % name in card.text
  assert ("a mixture" in card.text) == (len(variant.components) > 1)
  assert "trust_remote_code=True" in card.text
  assert model_card.PAPER in card.text and "@inproceedings" in card.text


def test_a_users_own_card_is_kept(tmp_path):
  (tmp_path / "README.md").write_text("# My model\n")
  model = tiny_models.seq2seq(("dense", "dot_product"))
  saving.save_pretrained(model, tmp_path)
  assert (tmp_path / "README.md").read_text() == "# My model\n"
  # The package's own card is replaced on the next save.
  (tmp_path / "README.md").unlink()
  saving.save_pretrained(model, tmp_path)
  model.config.learned_mixture_weights = False
  written = model_card.write_model_card(tmp_path, model.config, "a test")
  assert written and "- Weights: a test" in (tmp_path / "README.md").read_text()


def test_a_card_names_its_base_model_and_licence():
  config = tiny_models.config(("random",))
  card = huggingface_hub.ModelCard(model_card.card_text(
      config, "converted", base_model="google/t5-v1_1-small",
      license_name="apache-2.0"))
  assert card.data.base_model == "google/t5-v1_1-small"
  assert card.data.license == "apache-2.0"
