# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Export through the stock CLI, then serve with TensorFlow alone.

For R, D, FR+V and V (tiny models of conftest, trained by the stock CLI):
the CLI decodes a file (`infer.gin`) and exports a SavedModel with the
README's export command (read from README.md; `$MODEL_DIR` is the model's
directory, the export goes to a temporary one). A fresh Python process in
which mesh, t5, gin, seqio and this package cannot even be imported loads
each SavedModel (`tools/saved_model_predict.py`) and must give the CLI's
decodes, also for an input longer than the exported length (both truncate
it); the README's decoding command runs as written on one of them.
"""

import concurrent.futures
import json
import os
import subprocess
import sys

import pytest

import conftest
import doc_blocks
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner

# Runs the stock CLI: `make test-fast` skips it.
pytestmark = pytest.mark.slow

# A deliberate sample (each export is a stock-CLI run of about a minute): a
# position table (R), a function of the input (D), a mixture with the dot
# product (FR+V) and the dot product alone (V); the export's code path does
# not depend on the function beyond these.
VARIANTS = ("random", "dense", "factorized_random_vanilla", "vanilla")
README_EXPORT = doc_blocks.find("docs/export.md", "--mode=export_predict",
                                program=doc_blocks.CLI)
README_DECODE = doc_blocks.find("docs/export.md", "saved_model_predict.py")
(BATCH,) = map(int, README_EXPORT.values("batch_size"))  # the exported batch
LONG = conftest.LONG_INPUT
INPUTS = list(conftest.DECODE_INPUTS)

def _saved_model(export_dir):
  (stamp,) = [d for d in os.listdir(export_dir) if d.isdigit()]
  return os.path.join(export_dir, stamp)



@pytest.fixture(scope="module")
def exported(trained_models, cli_decodes_of, tmp_path_factory):
  """Per variant: the CLI's decodes and the exported SavedModel."""
  root = tmp_path_factory.mktemp("export")

  def export(variant):
    model_dir, trained = trained_models[variant]
    assert trained.returncode == 0, trained.stderr[-3000:]
    command = [commands.cli_path()] + README_EXPORT.substituted({
        "--export_dir=$MODEL_DIR/export":
            "--export_dir=" + str(root / (variant + "_export")),
        "--model_dir=$MODEL_DIR": "--model_dir=" + model_dir})[1:]
    return variant, runner.run(command, timeout=900)

  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    runs = dict(pool.map(export, VARIANTS))
  for variant, result in runs.items():
    assert result.returncode == 0, (variant, result.stderr[-3000:])
  decodes = cli_decodes_of(VARIANTS)
  out = {}
  for variant in VARIANTS:
    out[variant] = {
        "cli": decodes[variant],
        "saved_model": _saved_model(str(root / (variant + "_export")))}
  served = conftest.tf_only_predict([(out[v]["saved_model"], INPUTS, BATCH)
                            for v in VARIANTS])
  for variant in VARIANTS:
    out[variant]["served"] = served[out[variant]["saved_model"]]
  return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_served_outputs_equal_cli_decodes(exported, variant):
  cli = exported[variant]["cli"]
  served = [r["output"] for r in exported[variant]["served"]]
  assert len(cli) == len(INPUTS)
  assert served == cli


def test_outputs_tell_the_models_apart(exported):
  """The comparison can fail: the variants' decodes are not all the same."""
  decodes = {tuple(exported[v]["cli"]) for v in VARIANTS}
  assert len(decodes) > 1, decodes


@pytest.mark.parametrize("variant", VARIANTS)
def test_long_input_is_truncated_to_the_exported_length(exported, variant):
  long_result = exported[variant]["served"][INPUTS.index(LONG)]
  # Byte vocabulary: one id per byte, EOS appended, then cut to LENGTH.
  assert long_result["truncated_input"] == LONG[:conftest.LENGTH]
  short = exported[variant]["served"][0]
  assert short["truncated_input"] == INPUTS[0]


def test_the_readme_export_has_the_trained_length():
  for flag in ("input_sequence_length", "target_sequence_length"):
    assert README_EXPORT.values(flag) == [str(conftest.LENGTH)], flag


def test_a_request_holds_at_most_the_exported_batch(exported):
  """One example more than the export's batch size is refused."""
  saved_model = exported["random"]["saved_model"]
  inputs = (INPUTS * BATCH)[:BATCH + 1]
  proc = subprocess.run(
      [sys.executable, os.path.join(conftest.TOOLS, "saved_model_predict.py"),
       saved_model, "--batch_size=%d" % (BATCH + 1)] + inputs,
      capture_output=True, text=True, timeout=600)
  assert proc.returncode != 0
  assert "Dataset had more than one element" in proc.stderr


def test_readme_decoding_command(exported):
  """docs/export.md's decoding command, with the SavedModel's folder."""
  argv = README_DECODE.substituted({
      "$MODEL_DIR/export/<timestamp>": exported["random"]["saved_model"]})
  proc = subprocess.run([sys.executable] + argv[1:], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, "%s\n%s" % (" ".join(argv),
                                           proc.stderr[-3000:])
  (result,) = [json.loads(l) for l in proc.stdout.splitlines()]
  assert result["input"] == result["truncated_input"] == README_DECODE.argv[-1]
  assert isinstance(result["output"], str)
