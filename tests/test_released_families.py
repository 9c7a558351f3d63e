# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every released T5 family starts a Synthesizer model (init_from_t5.gin).

The checkpoints are tiny synthetic ones written from each family's public
layout (`released_families.py`). In process: the graphs mesh builds from
each family's gin file, with R+V and D (and every variant from T5.1.0), are
resolved against them, optimizer slots included. Through the stock CLI and
`mtf_synthesizer.MtfModel.finetune`: the first checkpoint of the finetuned
model holds the family checkpoint's values.
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap
from typing import Dict, List, Tuple

import gin
import mesh_tensorflow as mtf
import mesh_tensorflow.transformer
from mesh_tensorflow.transformer import utils as mtf_utils
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import released_families as families
from mtf_synthesizer import attentions
from mtf_synthesizer import checkpoints
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner
from mtf_synthesizer.stock_cli import gin_path  # pylint: disable=unused-import
import t5.models

# Builds many models and runs the stock CLI: `make test-fast` skips it.
pytestmark = pytest.mark.slow

for _module in (mesh_tensorflow.transformer, t5.models):
  gin.add_config_file_search_path(
      os.path.join(os.path.dirname(_module.__file__), "gin"))

LENGTH = 16
INIT = "synthesizer/init_from_t5.gin"
# Every family under each naming of its norm scales.
CASES = [(f.name, naming) for f in families.FAMILIES for naming in f.namings]


def _graph_variables(family: families.Family, variant: str
                     ) -> Tuple[Dict[str, List[int]], Dict[str, tf.DType]]:
  """The variables (slots included) of the family's model with a variant.

  Built as mesh's model_fn builds them: the model from the gin files, its
  loss, the gradients and T5's Adafactor.

  Args:
    family: a Family.
    variant: a variant name or attentions.MESH_SELF_ATTENTION.name.

  Returns:
    (name -> shape, name -> master dtype), global_step included.
  """
  gin.clear_config()
  gin.parse_config_files_and_bindings(
      ["defaults.gin", family.model_gin]
      + commands.variant_gin_files(variant),
      family.gin_params() + ["SynthesizerAttention.max_length = %d" % LENGTH])
  try:
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "mesh")
    model = mtf_utils.build_model(
        model_type="bitransformer", input_vocab_size=families.VOCAB,
        output_vocab_size=families.VOCAB,
        layout_rules=mtf.convert_to_layout_rules(""),
        mesh_shape=mtf.convert_to_shape(""))
    ids = mtf.zeros(mesh, mtf.Shape([mtf.Dimension("batch", 2),
                                     mtf.Dimension("length", LENGTH)]),
                    tf.int32)
    with tf.Graph().as_default():
      _, loss = model.call_simple(
          inputs=ids, targets=ids, compute_loss=True,
          mode=tf.estimator.ModeKeys.TRAIN,
          variable_dtype=mtf_utils.get_variable_dtype())
      trainable = graph.trainable_variables
      grads = mtf.gradients([loss], [v.outputs[0] for v in trainable])
      mtf.optimize.AdafactorOptimizer().apply_grads(grads, trainable)
  finally:
    gin.clear_config()
  shapes = {v.name: v.shape.to_integer_list for v in graph.all_variables}
  dtypes = {v.name: v.master_dtype for v in graph.all_variables}
  shapes["global_step"], dtypes["global_step"] = [], tf.int64
  return shapes, dtypes


@pytest.fixture(scope="module")
def written(tmp_path_factory):
  """Each case's checkpoint: (family, naming) -> (path, values)."""
  root = tmp_path_factory.mktemp("families")
  out = {}
  for name, naming in CASES:
    path = str(root / ("%s_%s" % (name.replace(" ", "_").replace(",", ""),
                                  naming)) / "model.ckpt-1000")
    out[name, naming] = path, families.write(families.BY_NAME[name], naming,
                                             path)
  return out


def _resolve(family, variant, path):
  shapes, dtypes = _graph_variables(family, variant)
  reader = tf.train.load_checkpoint(path)
  return shapes, checkpoints.resolve(
      shapes, reader.get_variable_to_shape_map(), path,
      graph_dtypes=dtypes, checkpoint_dtypes=reader.get_variable_to_dtype_map())


def _expected_fresh(family, shapes):
  return sorted(n for n in shapes if checkpoints.is_synthesizer_only(n)
                or ("_slot_" in n and not family.slots))


def _check_resolution(family, shapes, resolution):
  assert sorted(resolution.fresh) == _expected_fresh(family, shapes)
  assert len(resolution.restored) + len(resolution.fresh) == len(shapes)
  stored = tf.float32 if family.dtype == "float32" else tf.bfloat16
  # mesh's masters are bfloat16 here: a float32 checkpoint is cast.
  assert {s for s, _ in resolution.casts.values()} <= {stored}


@pytest.mark.parametrize("variant", ["random_vanilla", "dense"])
@pytest.mark.parametrize("family,naming", CASES)
def test_family_resolves_into_the_variant(written, family, naming, variant):
  family = families.BY_NAME[family]
  path, _ = written[family.name, naming]
  shapes, resolution = _resolve(family, variant, path)
  _check_resolution(family, shapes, resolution)
  # The norms of the graph (today's mesh names) read the checkpoint's.
  norm = "encoder/block_000/layer_000/rms_norm/scale"
  legacy = norm.replace("rms_norm", "layer_norm")
  assert resolution.restored[norm] == (legacy if naming == "layer_norm"
                                       else norm)


@pytest.mark.parametrize("variant", [
    v for v in attentions.VARIANT_NAMES if v not in ("random_vanilla", "dense")
] + [attentions.MESH_SELF_ATTENTION.name])
def test_released_t5_1_0_resolves_into_every_variant(written, variant):
  family = families.BY_NAME["T5.1.0"]
  path, _ = written[family.name, "layer_norm"]
  shapes, resolution = _resolve(family, variant, path)
  _check_resolution(family, shapes, resolution)


def test_a_missing_family_variable_is_still_an_error(written, tmp_path):
  """Negative control: the aliases do not hide a real gap."""
  family = families.BY_NAME["T5.1.0"]
  path, values = written[family.name, "layer_norm"]
  dropped = "decoder/final_layer_norm/scale"
  copy = str(tmp_path / "model.ckpt-1000")
  keep = sorted(set(values) - {dropped})
  with tf.Graph().as_default(), tf.Session() as sess:
    sess.run(tf.raw_ops.SaveV2(
        prefix=copy, tensor_names=keep, shape_and_slices=[""] * len(keep),
        tensors=[tf.constant(values[n]) for n in keep]))
  with pytest.raises(ValueError, match="decoder/rms_norm/scale .*looked for"):
    _resolve(family, "dense", copy)


# --- through the stock CLI and MtfModel.finetune -----------------------------

# The stock CLI: every family once, into R+V or D in turn, the families
# with two namings taking them in turn too.
CLI_CASES = [(f.name, f.namings[i // 2 % len(f.namings)],
              ("random_vanilla", "dense")[i % 2])
             for i, f in enumerate(families.FAMILIES)]
# MtfModel.finetune, in one process: the released T5.1.0 and the bfloat16,
# slot-less copy into the variant their CLI run did not have.
API_CASES = [("T5.1.0", "layer_norm", "dense"),
             ("T5.1.1, bfloat16, no slots", "rms_norm", "random_vanilla")]
NO_DECAY = "learning_rate_schedule_noam.linear_decay_fraction = 0.0"


def _finetune_params(family, path):
  return family.gin_params() + [
      "utils.run.init_checkpoint = '%s'" % path, NO_DECAY,
      "SynthesizerAttention.max_length = %d" % LENGTH]


def _assert_started_from(model_dir, values):
  """The finetuned model's first checkpoint holds the family's values."""
  start = tf.train.load_checkpoint(os.path.join(model_dir, "model.ckpt-1000"))
  graph_names = start.get_variable_to_shape_map()
  checked = 0
  for name in graph_names:
    if checkpoints.is_synthesizer_only(name) or name == "global_step":
      continue
    sources = [s for s in [checkpoints.checkpoint_name(name)]
               + checkpoints.norm_aliases(checkpoints.checkpoint_name(name))
               if s in values]
    if "_slot_" in name and not sources:
      continue  # the family stores no slots
    assert sources, name
    got = np.asarray(start.get_tensor(name)).astype(np.float32)
    expected = values[sources[0]]
    # bfloat16 masters: the float32 values rounded once.
    np.testing.assert_allclose(got, expected, rtol=2 ** -8, err_msg=name)
    checked += 1
  assert checked > 20
  assert start.get_tensor("global_step") == 1000


@pytest.fixture(scope="module")
def cli_runs(written, tmp_path_factory):
  root = tmp_path_factory.mktemp("family_cli")

  def finetune(case):
    name, naming, variant = case
    family = families.BY_NAME[name]
    path, _ = written[name, naming]
    model_dir = str(root / ("%s_%s_%s" % (
        name.replace(" ", "_").replace(",", ""), naming, variant)))
    result = runner.run(commands.local_train(
        model_dir, variant, None, length=LENGTH,
        base_gin_files=[commands.DATASET_GIN, family.model_gin],
        gin_files=[INIT], gin_params=_finetune_params(family, path) + [
            "utils.run.train_steps = 1001",
            "utils.run.save_checkpoints_steps = 1000"],
        env={"MTF_SYNTH_VOCAB": "byte"}), timeout=900)
    return case, (model_dir, result)

  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    return dict(pool.map(finetune, CLI_CASES))


@pytest.mark.parametrize("case", CLI_CASES, ids="-".join)
def test_family_finetunes_through_the_stock_cli(cli_runs, written, case):
  model_dir, result = cli_runs[case]
  assert result.returncode == 0, result.output[-3000:]
  _assert_started_from(model_dir, written[case[:2]][1])
  assert "init_from_t5: " in result.output
  assert os.path.exists(os.path.join(model_dir, "model.ckpt-1001.index"))


_API_SCRIPT = textwrap.dedent("""
    import json, sys
    import mtf_synthesizer, t5_tasks
    for model_dir, variant, pretrained_dir, params in json.loads(sys.argv[1]):
      model = mtf_synthesizer.MtfModel(
          variant=variant, model_dir=model_dir, tpu=None,
          batch_size=("tokens_per_batch", 64),
          sequence_length={"inputs": %d, "targets": %d},
          save_checkpoints_steps=1000, extra_gin_bindings=params)
      model.finetune("pydocs_span_corruption", finetune_steps=1,
                     pretrained_model_dir=pretrained_dir)
    """ % (LENGTH, LENGTH))


def _as_released(family, path):
  """The checkpoint's folder as released: a state file and the operative
  config (here: the family's model gin file at the tiny sizes)."""
  folder = os.path.dirname(path)
  with open(os.path.join(folder, "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "%s"\n' % os.path.basename(path))
  gin.clear_config()
  try:
    gin.parse_config_files_and_bindings(["defaults.gin", family.model_gin],
                                        family.gin_params())
    config = gin.config_str()  # flat, as an operative config is
  finally:
    gin.clear_config()
  with open(os.path.join(folder, "operative_config.gin"), "w") as f:
    f.write(config)
  return folder


def test_family_finetunes_through_mtf_model(written, tmp_path):
  jobs = []
  for name, naming, variant in API_CASES:
    family = families.BY_NAME[name]
    path, _ = written[name, naming]
    jobs.append((str(tmp_path / ("%s_%s" % (name, variant))), variant,
                 _as_released(family, path),
                 ["SynthesizerAttention.max_length = %d" % LENGTH, NO_DECAY]))
  proc = subprocess.run(
      [sys.executable, "-c", _API_SCRIPT, json.dumps(jobs)],
      capture_output=True, text=True, timeout=900, check=False,
      env=dict(os.environ, MTF_SYNTH_VOCAB="byte"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  for (model_dir, _, _, _), (name, naming, _) in zip(jobs, API_CASES):
    _assert_started_from(model_dir, written[name, naming][1])


def test_readme_table_follows_the_families_and_the_runs():
  """docs/finetuning.md's table: a row per family, in order, with its runs."""
  with open(os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), "docs", "finetuning.md")) as f:
    text = f.read()
  start = text.index("| family | layout facts | source | finetuned by |")
  rows = [line.split("|")[1:-1] for line in text[start:].split("\n\n")[0]
          .splitlines()[2:]]
  assert [r[0].strip() for r in rows] == [f.name for f in families.FAMILIES]
  label = {v.name: v.label for v in attentions.VARIANTS}
  for cells in rows:
    name = cells[0].strip()
    runs = ["CLI into %s" % label[v] for n, _, v in CLI_CASES if n == name]
    runs += ["`MtfModel.finetune` into %s" % label[v]
             for n, _, v in API_CASES if n == name]
    assert cells[3].strip() == ", ".join(runs), name
