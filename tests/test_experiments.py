# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The experiment gin files, the commands of Tables 2-7, the encoder-only
classifier and scoring through the stock CLI."""

import math
import os
import shlex

import gin
import mesh_tensorflow.transformer
import pytest
import seqio

import conftest
import mtf_synthesizer
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import cloud_tpu
from mtf_synthesizer.jobs import experiments
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner
import t5.models
import t5_tasks  # pylint: disable=unused-import

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

for _module in (mesh_tensorflow.transformer, t5.models):
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(_module.__file__), "gin"))


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _parse(*gin_files):
  gin.parse_config_files_and_bindings(
      ["models/t5.1.0.base.gin"] + list(gin_files), [])


_TFDS_SPLITS = {
    "synth_c4_span_corruption": ("train", "validation"),
    "synth_lm1b": ("train", "test"),
    "synth_wmt14_ende": ("train", "validation", "test"),
    "synth_wmt14_enfr": ("train", "validation", "test"),
    "synth_cnn_dailymail": ("train", "validation", "test"),
}


def _lengths(experiment):
  inputs, targets = experiment.train_lengths
  if inputs is None:
    return {"targets": targets}
  return {"inputs": inputs, "targets": targets}


@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_experiment_file_matches_the_tool_and_registry(name):
  experiment = experiments.EXPERIMENTS[name]
  _parse(experiment.gin_file, "synthesizer/random.gin")
  assert gin.query_parameter("utils.run.model_type") == experiment.model_type
  mixture = gin.query_parameter("%MIXTURE_NAME")
  assert mixture == experiment.train_mixture
  assert seqio.get_mixture_or_task(mixture) is not None
  assert conftest.gin_value("utils.run.sequence_length") == _lengths(
      experiment)
  assert gin.query_parameter("utils.run.train_steps") == (
      experiment.train_steps)
  assert conftest.gin_value("SynthesizerAttention.max_length") == max(
      n for n in experiment.train_lengths if n)
  assert gin.query_parameter("utils.run.batch_size") == (
      "tokens_per_batch", experiments.TOKENS_PER_BATCH)
  # The T5 model file keeps its size: the experiment file sets none.
  assert gin.query_parameter("%d_model") == 768
  # The evaluated split exists (TFDS facts for the builders whose splits
  # seqio would look up online).
  splits = _TFDS_SPLITS.get(mixture) or seqio.get_mixture_or_task(
      mixture).splits
  assert experiment.eval_split in splits, (experiment.eval_split, splits)


def test_c4_then_glue_super_glue_finetune_file():
  experiment = experiments.EXPERIMENTS["c4_glue_superglue"]
  _parse(experiment.gin_file)
  assert gin.query_parameter("utils.run.train_steps") == 2 ** 19
  gin.clear_config()
  _parse(experiment.gin_file, "synthesizer/random.gin",
         experiment.finetune_gin_file)
  assert gin.query_parameter("%MIXTURE_NAME") == experiment.finetune_mixture
  assert conftest.gin_value("utils.run.sequence_length") == {
      "inputs": 512, "targets": 128}
  assert conftest.gin_value("SynthesizerAttention.max_length") == 512
  # T5's finetuning: constant 1e-3 for 2^18 steps after the pretraining.
  assert gin.query_parameter(
      "learning_rate_schedules.constant_learning_rate.learning_rate") == 1e-3
  assert gin.query_parameter("utils.run.train_steps") == 2 ** 19 + 2 ** 18


@pytest.mark.parametrize("name", ["ag_news", "imdb"])
def test_encoder_classifier_files(name):
  _parse(experiments.EXPERIMENTS[name].gin_file,
         "synthesizer/factorized_random.gin")
  assert gin.query_parameter("utils.run.model_type") == "aligned"
  assert gin.query_parameter("mesh_train_dataset_fn.pack") is False
  # Table 7: k = 32 for the factorized models.
  synth = mtf_synthesizer.SynthesizerAttention().synthesizer
  assert isinstance(synth, mtf_synthesizer.FactorizedRandom)
  assert synth.k == 32


def test_factorized_random_keeps_k_8_elsewhere():
  _parse("experiments/wmt14_ende.gin", "synthesizer/factorized_random.gin")
  assert mtf_synthesizer.SynthesizerAttention().synthesizer.k == 8


def test_paper_commands_cover_every_table_and_variant(capsys):
  assert conftest.run_tool("paper_commands.py", []) == 0
  text = capsys.readouterr().out
  for table, names in experiments.TABLE_EXPERIMENTS.items():
    for experiment in names:
      for variant in experiments.TABLE_VARIANTS[table]:
        header = "# %s, variant %s" % (
            experiments.EXPERIMENTS[experiment].paper, variant)
        assert header in text, header
  # They run on the TPU VM (--tpu=local); the bucket is left to the shell.
  assert "--tpu=local" in text and "gs://${BUCKET}/" in text
  assert "\\$" not in text
  # Table 4 is the C4 pretraining alone; Tables 5-6 finetune on GLUE too.
  table4 = "\n".join(cloud_tpu.table_commands("Table 4", ["random"]))
  assert "glue_super_glue_finetune.gin" not in table4
  table56 = "\n".join(cloud_tpu.table_commands("Tables 5-6", ["random"]))
  assert "experiments/glue_super_glue_finetune.gin" in table56
  # The baseline rows (tests/test_tpu_job.py checks their commands).
  for table, names in experiments.TABLE_BASELINES.items():
    for experiment in experiments.TABLE_EXPERIMENTS[table]:
      for name in names:
        header = "# %s, baseline %s (%s)" % (
            experiments.EXPERIMENTS[experiment].paper, name,
            attentions.get(name).label)
        assert header in text, header
  assert "baseline linformer" in text and "baseline dynamic_conv" in text


def _printed_job(table, baseline, experiment):
  """The first command of a baseline's job, as printed for `table`."""
  header = "# %s, baseline %s (%s)" % (
      experiments.EXPERIMENTS[experiment].paper, baseline.name,
      baseline.label)
  lines = cloud_tpu.table_commands(table, baseline_names=[baseline.name])
  return shlex.split(lines[lines.index(header) + 1].replace("\\\n", " "))


@pytest.mark.parametrize("table,label,experiment", [
    ("Table 4", "DyConv", "c4_glue_superglue"),
    ("Table 4", "LightConv", "c4_glue_superglue"),
    ("Table 7", "Linformer", "ag_news"),
    ("Table 7", "Linformer", "imdb")])
def test_printed_baseline_command_configures_the_baseline(table, label,
                                                           experiment):
  # The gin files and bindings of the printed training command, parsed as
  # the CLI would (after T5's model file, its own experiment file).
  argv = _printed_job(table, attentions.get(label), experiment)
  files = [a.split("=", 1)[1] for a in argv if a.startswith("--gin_file=")]
  params = [a.split("=", 1)[1] for a in argv if a.startswith("--gin_param=")]
  gin.parse_config_files_and_bindings(files, params)
  assert gin.query_parameter("%MIXTURE_NAME") == (
      experiments.EXPERIMENTS[experiment].train_mixture)
  stack = "transformer.make_layer_stack.layers"
  if label == "Linformer":
    # The encoder-only model's one stack; the paper's k.
    assert conftest.gin_value(stack)[0].selector == (
        "mtf_synthesizer.LinformerAttention")
    assert gin.query_parameter("mtf_synthesizer.LinformerAttention.k") == 32
  else:
    for scope in ("encoder/", "decoder/"):
      assert conftest.gin_value(scope + stack)[0].selector == (
          "mtf_synthesizer.DecodableLocalConvAttnBlock")


# --- through the stock CLI --------------------------------------------------

_TINY = {"d_model": 32, "num_layers": 2, "d_ff": 64, "num_heads": 2,
         "d_kv": 16}
_CLASSIFIER_STEPS = 100
_LENGTH = 64


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
  """Trains an encoder-only FR classifier on ListOps, then decodes."""
  model_dir = str(tmp_path_factory.mktemp("classifier"))
  command = commands.local_train(
      model_dir, "factorized_random", _CLASSIFIER_STEPS, mixture="listops",
      length=_LENGTH, batch_size=8, dims=_TINY,
      base_gin_files=["experiments/_encoder_classifier.gin"],
      env={"MTF_SYNTH_VOCAB": "byte"})
  train = runner.run(command, timeout=900)
  evaluation = None
  if train.returncode == 0:
    evaluation = runner.run(
        commands.decode_eval(command, _CLASSIFIER_STEPS), timeout=900)
  return model_dir, train, evaluation


def test_encoder_classifier_trains_one_stack_with_k_32(classifier):
  model_dir, train, _ = classifier
  assert train.returncode == 0, train.stderr[-3000:]
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  names = dict(tf.train.list_variables(
      os.path.join(model_dir, "model.ckpt-%d" % _CLASSIFIER_STEPS)))
  # An encoder only: one stack, no encoder/decoder scopes, no EncDec layer.
  assert not [n for n in names if n.startswith(("encoder/", "decoder/"))]
  r1 = "transformer/block_000/layer_000/SynthesizerAttention/" \
       "factorized_random/R1"
  assert names[r1] == [2, _LENGTH, 32]
  assert not [n for n in names if "EncDecAttention" in n]


def test_encoder_classifier_decodes_labels_in_one_pass(classifier):
  model_dir, _, evaluation = classifier
  assert evaluation is not None and evaluation.returncode == 0, (
      evaluation and evaluation.stderr[-3000:])
  out = os.path.join(model_dir, "validation_eval")
  with open(os.path.join(out, "listops_%d_predictions" %
                         _CLASSIFIER_STEPS)) as f:
    predictions = f.read().splitlines()
  with open(os.path.join(out, "listops_targets")) as f:
    targets = f.read().splitlines()
  assert len(predictions) == len(targets) > 0
  # After training, the model writes a label and EOS at the first
  # positions: every prediction is one of ListOps' labels (digits).
  assert all(p in [str(d) for d in range(10)] for p in predictions), (
      sorted(set(predictions))[:10])
  # The reported accuracy is that of the files.
  expected = 100.0 * sum(p == t for p, t in zip(predictions, targets)) / len(
      targets)
  line = [l for l in evaluation.stderr.splitlines()
          if "eval/listops/accuracy at step %d" % _CLASSIFIER_STEPS in l]
  assert line, evaluation.stderr[-2000:]
  assert math.isclose(float(line[-1].rsplit(":", 1)[1]), expected,
                      abs_tol=1e-3)


def test_predict_labels_refuses_an_autoregressive_model():
  from mesh_tensorflow.transformer import transformer  # pylint: disable=g-import-not-at-top
  model = transformer.Unitransformer(
      layer_stack=transformer.LayerStack([]), d_model=8,
      input_vocab_size=16, output_vocab_size=16, autoregressive=True,
      max_length=8)
  with pytest.raises(ValueError, match="encoder-only"):
    mtf_synthesizer.baselines.encoder_classifier.predict_labels(model, {}, None)


_SCORE_INPUTS = ["def add(a, b):", "import os", "def add(a, b):"]
_SCORE_TARGETS = ["    return a + b", "print(os.getcwd())", "    return a + b"]


@pytest.mark.parametrize("variant", ["random_vanilla", "dense"])
def test_score_mode_scores_each_pair(trained_models, tmp_path, variant):
  model_dir, train = trained_models[variant]
  assert train.returncode == 0, train.stderr[-3000:]
  inputs, targets = tmp_path / "inputs.txt", tmp_path / "targets.txt"
  inputs.write_text("\n".join(_SCORE_INPUTS) + "\n")
  targets.write_text("\n".join(_SCORE_TARGETS) + "\n")
  scores = tmp_path / "scores"
  train_command = commands.local_train(
      model_dir, variant, steps=conftest.TRAIN_STEPS, length=conftest.LENGTH)
  command = commands.score(
      train_command, str(inputs), str(targets), str(scores),
      conftest.TRAIN_STEPS).extended(gin_params=[
          # mesh 0.1.21 cannot write the example text when the vocabulary
          # decodes in the graph (the byte vocabulary does): it calls
          # .tolist() on the decoded bytes. Scores only.
          "save_scores.save_example_text = False",
          "utils.get_variable_dtype.slice_dtype = 'float32'",
          "utils.get_variable_dtype.activation_dtype = 'float32'"])
  proc = runner.run(command, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(str(scores) + ".scores") as f:
    values = [float(v) for v in f.read().split()]
  assert len(values) == len(_SCORE_TARGETS)
  # Log-likelihoods: finite and negative; the same pair scores the same.
  assert all(math.isfinite(v) and v < 0 for v in values), values
  assert values[0] == pytest.approx(values[2], rel=1e-5)
  assert values[0] != pytest.approx(values[1], rel=1e-3)
