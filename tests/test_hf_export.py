# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Trained models exported to transformers compute what mesh computes.

Every row of the attention table and mesh's own SelfAttention (the tiny
encoder-decoders of conftest, trained by the stock CLI), and two decoder-only
byte language models trained here, are exported with `tools/export_hf.py`.
A fresh Python process in which TensorFlow, mesh, t5, gin and this package
cannot be imported (`hf_side.py`) loads each export with `transformers`
(`trust_remote_code=True`) and must give:

  * the mesh model's logits on the same tokens (the model rebuilt in this
    process from the run's operative_config.gin and restored from its
    checkpoint), within 1e-4 of their largest magnitude;
  * with `generate()` (greedy, with its key/value cache), the stock CLI's
    decodes of the same texts, including one longer than the model's
    inputs, which both cut at LENGTH tokens (EOS included).
"""

import concurrent.futures
import json
import locale
import os
import subprocess
import sys

import gin
import huggingface_hub
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
from mesh_tensorflow.transformer import utils as mtf_utils
import numpy as np
import pytest
import seqio
import t5.models
import tensorflow.compat.v1 as tf

import conftest
import doc_blocks
import lowering as lowering_lib
from mtf_synthesizer import attentions
from mtf_synthesizer import synthesizers
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner

# Runs the stock CLI: `make test-fast` skips it.
pytestmark = pytest.mark.slow

VARIANTS = conftest.VARIANTS + (conftest.MESH_ATTENTION,)
# Decoder-only language models: a sample of the table (each is two more
# stock-CLI runs): a position table that decoding reads row by row (R) and a
# mixture of a function of the input with the dot product (D+V).
LM_VARIANTS = ("random", "dense_vanilla")
LM_TASK = "pydocs_lm"
# The LMs decode prompts of up to LM_INPUTS tokens and continue them up to
# LM_INPUTS + LM_TARGETS = LENGTH positions, the size of their tables.
LM_INPUTS = LM_TARGETS = conftest.LENGTH // 2
LM_PROMPTS = ("The \"assert\" statement is",
              "A class definition defines",
              "Python's documentation, repeated until it is longer than "
              "the decoded prompts.")
TOLERANCE = 1e-4  # of the largest logit magnitude
# README.md's export command (recipe 3, the installed command) exports the
# CLI's models, with their folders; its Python block runs on R's export,
# with that export's folder.
README_EXPORT = doc_blocks.find("README.md", "mtf-synthesizer-export-hf")
README_BLOCK = doc_blocks.find_block("README.md", "python", "model.generate(")
README_BLOCK_PATH = '"runs/demo/random/hf"'
README_MODEL_DIR = "runs/demo/random/model"
# docs/export.md's training recipe, run on R's export too.
README_TRAIN_BLOCK = doc_blocks.find_block("docs/export.md", "python",
                                           "mesh_optimizer(model")
VOCAB = 384  # the byte vocabulary, padded as mesh pads it
SIZES = ["d_model = 32", "num_layers = 2", "d_ff = 64", "num_heads = 2",
         "d_kv = 16"]
# Layouts beyond the CLI-trained models, built here with random weights:
# name -> (t5's model gin file, variant, bindings, model type).
LAYOUTS = {
    # T5.1.0: ReLU, one embedding for both stacks and the softmax; stored
    # under the released checkpoints' layer_norm / final_layer_norm names.
    "t5.1.0": ("models/bi_v1.gin", "dense_vanilla", SIZES, "bitransformer"),
    "bias_per_layer": ("models/t5.1.1.tiny.gin", "random_vanilla",
                       ["SelfAttention.relative_attention_type = 'bias'"],
                       "bitransformer"),
    "multi_query": ("models/t5.1.1.tiny.gin", "dense_vanilla",
                    ["SelfAttention.num_memory_heads = 1"], "bitransformer"),
    "one_head": ("models/t5.1.1.tiny.gin", "random_dense", ["num_heads = 1"],
                 "bitransformer"),
    "scaled_queries": ("models/t5.1.1.tiny.gin", conftest.MESH_ATTENTION,
                       ["SelfAttention.fold_scaling_into_initializer = "
                        "False"], "bitransformer"),
    "lm_positions": ("models/t5.1.1.tiny.gin", "factorized_dense",
                     ["Unitransformer.positional_embedding = True"], "lm"),
}
RELEASED_NAMES = {"t5.1.0"}
# mesh's SelfAttention model exported with --t5, as transformers' T5.
PLAIN_T5 = "plain_t5"
# The layout exported with a SentencePiece vocabulary (seqio's test model)
# instead of bytes.
SENTENCEPIECE_LAYOUT = "t5.1.0"
SENTENCEPIECE_MODEL = os.path.join(os.path.dirname(seqio.__file__),
                                   "test_data", "sentencepiece",
                                   "sentencepiece.model")

for _module in (transformer, t5.models):
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(_module.__file__), "gin"))


def _tokens(seed: int = 0):
  """Inputs and targets [3, LENGTH]: one full row, two padded (0)."""
  rng = np.random.RandomState(seed)
  length = conftest.LENGTH
  rows = {}
  for key, lengths in (("inputs", (length, 20, 45)),
                       ("targets", (length, 12, 30))):
    rows[key] = np.zeros((3, length), np.int32)
    for i, n in enumerate(lengths):
      rows[key][i, :n - 1] = rng.randint(3, 259, n - 1)
      rows[key][i, n - 1] = 1  # EOS
  return rows


def _mesh_logits(model_dir: str, tokens) -> np.ndarray:
  """The mesh model's logits [batch, length, vocab], as the CLI builds it."""
  checkpoint = tf.train.latest_checkpoint(model_dir)
  shapes = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
  gin.clear_config()
  gin.parse_config_file(os.path.join(model_dir, "operative_config.gin"),
                        skip_unknown=True)
  try:
    model_type = gin.query_parameter("run.model_type")
    vocab = next(s[0] for n, s in shapes.items()
                 if n.split("/")[-1] == "embedding")

    def logits_fn(imported):
      model = mtf_utils.build_model(
          model_type=model_type, input_vocab_size=vocab,
          output_vocab_size=vocab,
          layout_rules=mtf.convert_to_layout_rules(""),
          mesh_shape=mtf.convert_to_shape(""))
      targets = imported["targets"]
      if model_type == "lm":
        inputs = transformer.autoregressive_inputs(targets)
      else:
        inputs = imported["inputs"]
      logits, _ = model.call_simple(
          inputs=inputs, targets=targets, compute_loss=False,
          mode=tf.estimator.ModeKeys.EVAL,
          variable_dtype=mtf_utils.get_variable_dtype())
      return logits

    return lowering_lib.restored_logits(checkpoint, tokens, logits_fn)
  finally:
    gin.clear_config()


def _save(prefix: str, tensors) -> None:
  """Writes a checkpoint (and its `checkpoint` file) of name -> array."""
  with tf.Graph().as_default(), tf.Session() as sess:
    sess.run(tf.raw_ops.SaveV2(
        prefix=prefix, tensor_names=list(tensors),
        shape_and_slices=[""] * len(tensors),
        tensors=[tf.constant(v) for v in tensors.values()]))
  with open(os.path.join(os.path.dirname(prefix), "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "%s"\n' % os.path.basename(prefix))


def _synthetic_model(root, name: str, layout=None,
                     weights: bool = True) -> str:
  """A model directory of a LAYOUTS case: checkpoint and operative config.

  Args:
    root: where to make it.
    name: the LAYOUTS case (or a name for `layout`).
    layout: (model gin, variant, bindings, model type) instead of LAYOUTS'.
    weights: every variable, with random values; else only the embedding
      (enough for the export to read the layers and refuse them).

  Returns:
    The model directory.
  """
  model_gin, variant, bindings, model_type = layout or LAYOUTS[name]
  model_dir = root / ("layout_" + name)
  gin.clear_config()
  gin.parse_config_files_and_bindings(
      ["defaults.gin", model_gin] + commands.variant_gin_files(variant),
      list(bindings) + [
          "SynthesizerAttention.max_length = %d" % conftest.LENGTH,
          # float32 activations, as the CLI's runs on CPU have them.
          "get_variable_dtype.activation_dtype = 'float32'"])
  try:
    with tf.Graph().as_default():
      graph = mtf.Graph()
      mesh = mtf.Mesh(graph, "mesh")
      model = mtf_utils.build_model(
          model_type=model_type, input_vocab_size=VOCAB,
          output_vocab_size=VOCAB,
          layout_rules=mtf.convert_to_layout_rules(""),
          mesh_shape=mtf.convert_to_shape(""))
      if not weights:
        model_dir.mkdir()
        _save(str(model_dir / "model.ckpt-1"),
              {"shared/embedding": np.zeros((VOCAB, 32), np.float32)})
        (model_dir / "operative_config.gin").write_text(
            gin.operative_config_str() +
            "\nutils.run.model_type = %r\n" % model_type)
        return str(model_dir)
      ids = mtf.zeros(mesh, mtf.Shape([mtf.Dimension("batch", 1),
                                       mtf.Dimension("length",
                                                     conftest.LENGTH)]),
                      tf.int32)
      model.call_simple(inputs=ids, targets=ids, compute_loss=False,
                        mode=tf.estimator.ModeKeys.EVAL,
                        variable_dtype=mtf_utils.get_variable_dtype())
      lowering_lib.lower(graph, mesh)
      masters = [v.get_master() for v in graph.all_variables]
      # mesh's initial values, moved off their zeros and ones (biases,
      # mixture weights, norm scales).
      rng = np.random.RandomState(len(name))
      assign = [tf.assign_add(m, tf.cast(
          rng.normal(0, 0.1, m.shape.as_list()), m.dtype)) for m in masters]
      saver = tf.train.Saver(masters)
      with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(assign)
        saver.save(sess, str(model_dir / "model.ckpt"), global_step=1)
    operative = gin.operative_config_str()
  finally:
    gin.clear_config()
  (model_dir / "operative_config.gin").write_text(
      operative + "\nutils.run.model_type = %r\n" % model_type)
  return str(model_dir)


def _with_released_norm_names(model_dir: str, out_dir: str) -> str:
  """A copy of a checkpoint under T5.1.0's released norm names."""
  checkpoint = tf.train.latest_checkpoint(model_dir)
  reader = tf.train.load_checkpoint(checkpoint)
  names, values = [], []
  for name in sorted(reader.get_variable_to_shape_map()):
    new = name.replace("/rms_norm/scale", "/layer_norm/scale")
    if new.count("/") == 2:  # encoder/layer_norm/scale: the stack's last
      new = new.replace("/layer_norm/", "/final_layer_norm/")
    names.append(new)
    values.append(reader.get_tensor(name))
  os.makedirs(out_dir)
  _save(os.path.join(out_dir, "model.ckpt-1"), dict(zip(names, values)))
  with open(os.path.join(model_dir, "operative_config.gin")) as f:
    operative = f.read()
  with open(os.path.join(out_dir, "operative_config.gin"), "w") as f:
    f.write(operative)
  return out_dir


def _lm_train_and_decode(root, variant):
  """Trains a byte LM with the stock CLI and decodes LM_PROMPTS."""
  model_dir = str(root / ("lm_" + variant))
  train = commands.local_train(
      model_dir, variant, conftest.TRAIN_STEPS, length=conftest.LENGTH,
      mixture=LM_TASK, lengths={"targets": conftest.LENGTH},
      gin_params=["utils.run.model_type = 'lm'"])
  result = runner.run(train, timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  prompts = root / ("lm_%s.prompts.txt" % variant)
  prompts.write_text("\n".join(LM_PROMPTS) + "\n")
  decode = commands.infer(train, str(prompts), model_dir + "/decodes").extended(
      gin_params=["utils.run.sequence_length = %r" % {
          "inputs": LM_INPUTS, "targets": LM_TARGETS}])
  result = runner.run(decode, timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  return model_dir, conftest.cli_decodes(
      "%s/decodes-%d" % (model_dir, conftest.TRAIN_STEPS))


@pytest.fixture(scope="module")
def results(trained_models, cli_decodes_of, tmp_path_factory):
  """Per model: mesh logits, CLI decodes and what PyTorch computed."""
  root = tmp_path_factory.mktemp("hf")
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    lm_jobs = {v: pool.submit(_lm_train_and_decode, root, v)
               for v in LM_VARIANTS}
    decodes = cli_decodes_of(VARIANTS)
    models = {}
    for variant in VARIANTS:
      models[variant] = {"dir": trained_models[variant][0], "causal": False,
                         "texts": list(conftest.DECODE_INPUTS),
                         "max_length": conftest.LENGTH,
                         "new_tokens": conftest.LENGTH,
                         "cli": decodes[variant]}
    # mesh's SelfAttention is plain T5: exported also as transformers' T5.
    models[PLAIN_T5] = dict(models[conftest.MESH_ATTENTION],
                            export_args=["--t5"])
    for variant, job in lm_jobs.items():
      model_dir, lm_decodes = job.result()
      models["lm_" + variant] = {"dir": model_dir, "causal": True,
                                 "texts": list(LM_PROMPTS),
                                 "max_length": LM_INPUTS,
                                 "new_tokens": LM_TARGETS, "cli": lm_decodes}
  tokens = _tokens()
  np.savez(root / "tokens.npz", **tokens)
  for name in LAYOUTS:
    model_dir = _synthetic_model(root, name)
    models["layout_" + name] = {
        "dir": model_dir, "causal": LAYOUTS[name][3] == "lm", "texts": [],
        "max_length": conftest.LENGTH, "new_tokens": 0,
        "encode": list(conftest.DECODE_INPUTS)}
    if name in RELEASED_NAMES:
      models["layout_" + name]["export_from"] = _with_released_norm_names(
          model_dir, model_dir + "_released")
  request = []
  for name, model in models.items():
    out_dir = root / ("export_" + name)
    if name.startswith("layout_"):  # no run's task: the vocabulary given
      vocabulary = (SENTENCEPIECE_MODEL
                    if name == "layout_" + SENTENCEPIECE_LAYOUT else "byte")
      argv = [model.get("export_from", model["dir"]), str(out_dir),
              "--vocabulary=" + vocabulary]
    elif "export_args" in model:
      argv = [model["dir"], str(out_dir)] + model["export_args"]
    else:  # README.md's command, by the checkout's script of its name
      assert doc_blocks.tool_of(README_EXPORT.argv[0]) == "tools/export_hf.py"
      argv = README_EXPORT.substituted({
          README_BLOCK_PATH.strip('"'): str(out_dir),
          README_MODEL_DIR: model["dir"]})[1:]
    status = conftest.run_tool("export_hf.py", argv)
    assert status == 0, name
    model["config"] = json.loads((out_dir / "config.json").read_text())
    model["card"] = (out_dir / "README.md").read_text() if (
        out_dir / "README.md").exists() else None
    model["mesh_logits"] = _mesh_logits(model["dir"], tokens)
    request.append({"name": name, "dir": str(out_dir),
                    "causal": model["causal"], "texts": model["texts"],
                    "encode": model.get("encode", []),
                    "tokens": str(root / "tokens.npz"),
                    "max_length": model["max_length"],
                    "new_tokens": model["new_tokens"]})
  (root / "request.json").write_text(json.dumps({
      "models": request, "absent": sorted(conftest.WITHOUT_TENSORFLOW)}))
  out = root / "torch"
  out.mkdir()
  # One torch thread in each side process: a greedy decode compared token
  # by token must not depend on the machine's core count or load.
  env = dict(os.environ, OMP_NUM_THREADS="1")
  proc = subprocess.run(
      conftest.pytorch_python(root) + [
          os.path.join(os.path.dirname(__file__), "hf_side.py"),
          str(root / "request.json"), str(out)],
      stdin=subprocess.DEVNULL, capture_output=True, text=True,
      timeout=900, env=env)
  assert proc.returncode == 0, proc.stderr[-5000:]
  for name, model in models.items():
    model["torch_logits"] = np.load(out / (name + ".npz"))["logits"]
    model["torch"] = json.loads((out / (name + ".json")).read_text())
  found = {"models": models, "tokens": tokens,
           "side": json.loads((out / "side.json").read_text())}
  # The README's blocks, as a user copies them, on R's export: loading and
  # generating where only torch and transformers are installed, training
  # with mesh's optimizer where this package is too.
  for name, block, python in (
      ("readme_block", README_BLOCK, conftest.pytorch_python(root)),
      ("readme_train_block", README_TRAIN_BLOCK, [sys.executable])):
    script = root / (name + ".py")
    script.write_text(doc_blocks.substitute_text(
        block.text, {README_BLOCK_PATH: repr(str(root / "export_random"))}))
    run = subprocess.run(
        python + [str(script)], stdin=subprocess.DEVNULL,
        capture_output=True, timeout=600, env=env)
    # Decoded as written: text mode reads a decoded "\r" as a line end.
    encoding = locale.getpreferredencoding(False)
    found[name] = subprocess.CompletedProcess(
        run.args, run.returncode, run.stdout.decode(encoding),
        run.stderr.decode(encoding, "replace"))
  return found


DECODED = list(VARIANTS) + ["lm_" + v for v in LM_VARIANTS] + [PLAIN_T5]
NAMES = DECODED + ["layout_" + name for name in LAYOUTS]


@pytest.mark.parametrize("name", NAMES)
def test_writes_a_model_card(results, name):
  card = results["models"][name]["card"]
  if name == PLAIN_T5:  # transformers' own T5: no card of this package
    assert card is None
    return
  assert "exported from the mesh checkpoint model.ckpt-" in card, name
  assert "trust_remote_code=True" in card
  metadata = huggingface_hub.ModelCard(card).data.to_dict()
  assert metadata["library_name"] == "transformers"
  assert metadata["pipeline_tag"] == (
      "text-generation" if results["models"][name]["causal"] else
      "text2text-generation")


@pytest.mark.parametrize("name", NAMES)
def test_loads_every_weight(results, name):
  model = results["models"][name]
  loading = model["torch"]["loading"]
  assert not any(loading.values()), loading
  expected = ("MtfSynthesizerForCausalLM" if model["causal"] else
              "MtfSynthesizerForConditionalGeneration")
  if name == PLAIN_T5:
    expected = "T5ForConditionalGeneration"
    assert model["config"]["model_type"] == "t5"
  assert model["torch"]["class"] == expected
  assert model["torch"]["tokenizer"] == (
      "T5Tokenizer" if name == "layout_" + SENTENCEPIECE_LAYOUT
      else "ByT5Tokenizer")


@pytest.mark.parametrize("name", ["layout_" + n for n in LAYOUTS])
def test_tokenizer_encodes_as_t5(results, name):
  """The exported tokenizer gives t5's ids (its vocabulary, EOS appended)."""
  if name == "layout_" + SENTENCEPIECE_LAYOUT:
    vocabulary = seqio.SentencePieceVocabulary(SENTENCEPIECE_MODEL,
                                               extra_ids=100)
  else:
    vocabulary = seqio.ByteVocabulary(extra_ids=100)
  expected = [vocabulary.encode(t) + [1] for t in conftest.DECODE_INPUTS]
  assert results["models"][name]["torch"]["encoded"] == expected


def _real_positions(results, name):
  """Where the targets are tokens: [batch, length] bool."""
  return results["tokens"]["targets"] > 0


@pytest.mark.parametrize("name", NAMES)
def test_logits_equal_mesh(results, name):
  model = results["models"][name]
  keep = _real_positions(results, name)
  mesh_logits = model["mesh_logits"][keep]
  torch_logits = model["torch_logits"][keep]
  scale = np.abs(mesh_logits).max()
  assert scale > 0
  np.testing.assert_allclose(torch_logits, mesh_logits, rtol=0,
                             atol=TOLERANCE * scale)


@pytest.mark.parametrize("name", DECODED)
def test_generate_equals_cli_decodes(results, name):
  model = results["models"][name]
  assert len(model["cli"]) == len(model["texts"])
  assert model["torch"]["texts"] == model["cli"]


def test_layouts_are_what_they_say(results):
  """Each layout's export has the setting it stands for."""

  def config(name):
    return results["models"]["layout_" + name]["config"]

  assert config("t5.1.0")["feed_forward_proj"] == "relu"
  assert config("t5.1.0")["tie_word_embeddings"]
  assert config("t5.1.0")["shared_embedding"]
  assert config("bias_per_layer")["relative_attention_type"] == "bias"
  assert config("multi_query")["num_memory_heads"] == 1
  assert config("one_head")["num_heads"] == 1
  assert config("one_head")["encoder_synthesizers"] == ["random", "dense"]
  assert config("scaled_queries")["scale_queries"]
  assert config("scaled_queries")["encoder_synthesizers"] == ["dot_product"]
  assert not config("lm_positions")["is_encoder_decoder"]
  assert config("lm_positions")["max_position_embeddings"]
  assert config("lm_positions")["decoder_synthesizers"] == [
      "factorized_dense"]
  for name in LAYOUTS:
    if name != "t5.1.0":
      assert config(name)["feed_forward_proj"] == "gated-gelu"
      assert not config(name)["tie_word_embeddings"]
  # The T5.1.0 export read the released names.
  released = results["models"]["layout_t5.1.0"]["export_from"]
  names = tf.train.load_checkpoint(released).get_variable_to_shape_map()
  assert "encoder/final_layer_norm/scale" in names


def test_readme_python_block(results):
  """README.md's loading and generating, on R's export: the CLI's decode."""
  run = results["readme_block"]
  assert run.returncode == 0, run.stderr[-3000:]
  text = "for x in range(3): print(x)"
  assert text in README_BLOCK.text
  assert "[:%d]" % conftest.LENGTH in README_BLOCK.text
  cli = results["models"]["random"]["cli"][conftest.DECODE_INPUTS.index(text)]
  assert run.stdout == cli + "\n", run.stderr[-3000:]


def test_readme_training_block(results):
  """docs/export.md's recipe finetunes R's export, saves and reloads it;
  from_config builds bigger."""
  run = results["readme_train_block"]
  assert run.returncode == 0, run.stderr[-3000:]
  lines = run.stdout.splitlines()
  losses = [float(l.split()[-1]) for l in lines if l.startswith("step ")]
  assert len(losses) == 5 and losses[-1] < losses[0], lines
  assert "reloaded the same model: True" in lines, lines
  # More blocks than the export's: more parameters.
  assert results["models"]["random"]["config"]["num_layers"] < 4
  _, exported, _, fresh = lines[-1].split()
  assert int(fresh) > int(exported) > 0


@pytest.mark.parametrize("baseline", [b.name for b in attentions.BASELINES])
def test_baselines_are_refused_by_name(tmp_path, capsys, baseline):
  """A layer the PyTorch model lacks: exit status 2 and its name."""
  model_dir = _synthetic_model(
      tmp_path, baseline, ("models/t5.1.1.tiny.gin", baseline, [],
                           "bitransformer"), weights=False)
  status = conftest.run_tool("export_hf.py", [model_dir,
                                              str(tmp_path / "out"),
                                              "--vocabulary=byte"])
  assert status == 2
  error = capsys.readouterr().err
  assert "is not supported by the export" in error, error
  assert not os.path.exists(tmp_path / "out" / "model.safetensors")


def test_plain_t5_refuses_a_synthesizer(results, tmp_path, capsys):
  """--t5 on a Synthesizer: exit status 2 and why; nothing written."""
  status = conftest.run_tool("export_hf.py", [
      results["models"]["random"]["dir"], str(tmp_path / "out"), "--t5"])
  assert status == 2
  error = capsys.readouterr().err
  assert "not plain T5" in error and "encoder_synthesizers" in error, error
  assert not os.path.exists(tmp_path / "out" / "model.safetensors")


USER_TASK_MODULE = """
import seqio
feature = seqio.Feature(seqio.ByteVocabulary(extra_ids=7))
seqio.TaskRegistry.add(
    %r, source=seqio.FunctionDataSource(lambda split, shuffle_files: None,
                                        splits=["train"]),
    output_features={"inputs": feature, "targets": feature})
"""


def test_module_import_finds_a_user_tasks_vocabulary(tmp_path, capsys,
                                                      monkeypatch):
  """A run on the user's own task: its module gives the vocabulary."""
  task, module = "user_bytes_task_for_export", "user_tasks_for_export"
  (tmp_path / (module + ".py")).write_text(USER_TASK_MODULE % task)
  monkeypatch.syspath_prepend(str(tmp_path))
  model_dir = _synthetic_model(tmp_path, "t5.1.0")
  with open(os.path.join(model_dir, "operative_config.gin"), "a") as f:
    f.write("\nt5.models.mesh_transformer.get_vocabulary."
            "mixture_or_task_name = %r\n" % task)
  try:
    out = tmp_path / "out"
    assert conftest.run_tool("export_hf.py", [model_dir, str(out)]) == 2
    assert "say which vocabulary" in capsys.readouterr().err
    assert conftest.run_tool("export_hf.py", [
        model_dir, str(out), "--module_import=" + module]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["tokenizer"] == "ByT5Tokenizer", summary
    assert conftest.run_tool("export_hf.py", [  # out holds the export now
        model_dir, str(tmp_path / "out2"),
        "--module_import=no_such_module_here"]) == 2
    assert "no_such_module_here" in capsys.readouterr().err
  finally:
    if task in seqio.TaskRegistry.names():
      seqio.TaskRegistry.remove(task)


def test_the_comparisons_can_fail(results):
  """Other models' logits and decodes differ beyond the tolerance."""
  models = results["models"]
  keep = _real_positions(results, None)
  a, b = models["random"], models["dense"]
  scale = np.abs(a["mesh_logits"][keep]).max()
  assert np.abs(a["mesh_logits"][keep] - b["torch_logits"][keep]).max() > (
      100 * TOLERANCE * scale)
  assert len({tuple(m["cli"]) for m in models.values() if "cli" in m}) > 1


def test_long_input_is_cut_to_the_models_length(results):
  """The long text is longer than the inputs: both sides must cut it."""
  assert len(conftest.LONG_INPUT.encode("utf-8")) + 1 > conftest.LENGTH
  assert len(LM_PROMPTS[-1].encode("utf-8")) > LM_INPUTS


def test_pytorch_side_had_no_tensorflow_and_every_function(results):
  side = results["side"]
  assert side["findable"] == []
  assert not conftest.WITHOUT_TENSORFLOW & set(side["modules"])
  assert "torch" in side["modules"]
  # The PyTorch model implements every synthesizing function of the table.
  assert sorted(side["functions"]) == sorted(synthesizers.BY_NAME)
