# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Round trip through the stock `t5_mesh_transformer` console script.

docs/quickstart.md's commands, read from the document: its tiny
encoder-decoder is trained for a few steps on `pydocs_span_corruption` with
the Random Synthesizer and, dropping the two lines the quickstart names,
with T5's own attention (shared by the tests of this module), then
evaluated (`perplexity_eval.gin`) and asked to decode a file (`infer.gin`),
each as its own CLI process, exactly as a user would run them. The only
changes: a temporary model directory and files, STEPS steps, EVAL_STEPS
evaluation batches. Bad command lines must fail with a message that says
what is wrong.
"""

import concurrent.futures
import math
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow.compat.v1 as tf

import doc_blocks
from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import events
from mtf_synthesizer.jobs import runner
from mtf_synthesizer.stock_cli import checks as cli_checks

# Runs the stock CLI or builds many models: `make test-fast` skips it.
pytestmark = pytest.mark.slow

SEQ = 64
STEPS = 4
EVAL_STEPS = 5
INPUTS = ["The \"assert\" statement is a convenient way to insert",
          "A class definition defines a class object."]
_GIN_DIR = os.path.join(cli_checks.GIN_DIR, "synthesizer")
# T5's own attention (no variant file) and the Random Synthesizer.
VARIANTS = [attentions.MESH_SELF_ATTENTION.name, "random"]
_DIMS = {"d_model": 32, "d_ff": 64, "num_layers": 2, "num_heads": 2}
QUICKSTART = "docs/quickstart.md"


def command(model_dir, variant=attentions.MESH_SELF_ATTENTION.name,
            gin_files=(), gin_params=()):
  """A stock CLI command for the tiny model (the bad command lines)."""
  return commands.local_train(model_dir, variant, STEPS, length=SEQ,
                               dims=_DIMS, gin_files=gin_files,
                               gin_params=gin_params)


def quickstart(model_dir, variant, marker="synthesizer/random.gin",
               **replacements):
  """A command of docs/quickstart.md: the training, or flags appended to it.

  Args:
    model_dir: replaces the document's `runs/by_hand`.
    variant: "random" (the document's), or T5's own attention: the two
      lines the document says to drop are dropped.
    marker: text of the command's own line (the training's by default;
      "perplexity_eval.gin" and "infer.gin" for the flags appended to it).
    **replacements: more document text -> text, each found once.

  Returns:
    The command, with STEPS training steps and one checkpoint at the end.
  """
  doc = doc_blocks.find(QUICKSTART, marker, program=doc_blocks.CLI)
  argv = doc.substituted(dict({
      "--model_dir=runs/by_hand": "--model_dir=" + model_dir,
      "train_steps = 300": "train_steps = %d" % STEPS,
      "save_checkpoints_steps = 300": "save_checkpoints_steps = %d" % STEPS,
  }, **replacements))
  if variant == attentions.MESH_SELF_ATTENTION.name:
    argv = doc_blocks.drop(argv, "--gin_file=synthesizer/random.gin",
                           "SynthesizerAttention.max_length")
  else:
    assert variant == "random", variant
  return doc_blocks.to_stock_command(argv, doc.full_env())


def quickstart_eval(model_dir, variant):
  """The quickstart's evaluation, EVAL_STEPS batches."""
  return quickstart(model_dir, variant, "perplexity_eval.gin", **{
      "perplexity_eval_steps = 25": "perplexity_eval_steps = %d" % EVAL_STEPS})


def run(cmd):
  return runner.run(cmd, timeout=900)


def _tail(proc, n=3000):
  return "exit %d\n%s" % (proc.returncode, proc.stderr[-n:])


def _scalars(event_dir):
  """{tag: [(step, value)]}, read with jobs.events' reader."""
  return {tag: [(step, value) for step, _, value in points]
          for tag, points in events.read_scalars(event_dir).items()}


def _parallel(fn, items, workers=2):
  with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    return dict(zip(items, pool.map(fn, items)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Trains every variant, then evaluates and decodes with each."""
  root = tmp_path_factory.mktemp("cli")
  input_file = root / "inputs.txt"
  input_file.write_text("\n".join(INPUTS) + "\n")

  def train(variant):
    return run(quickstart(str(root / variant), variant))

  trained = _parallel(train, VARIANTS)

  def after(job):
    variant, mode = job
    model_dir = str(root / variant)
    if trained[variant].returncode != 0:
      return None
    if mode == "eval":
      return run(quickstart_eval(model_dir, variant))
    return run(quickstart(model_dir, variant, "infer.gin", **{
        "/tmp/inputs.txt": str(input_file),
        "/tmp/decodes.txt": str(root / (variant + ".out"))}))

  later = _parallel(after, [(v, m) for v in VARIANTS for m in ("eval", "infer")])
  return {"root": root, "train": trained, "after": later}


@pytest.mark.parametrize("variant", VARIANTS)
def test_train_writes_a_checkpoint(runs, variant):
  proc = runs["train"][variant]
  assert proc.returncode == 0, _tail(proc)
  model_dir = str(runs["root"] / variant)
  latest = tf.train.latest_checkpoint(model_dir)
  assert latest and latest.endswith("model.ckpt-%d" % STEPS)
  names = dict(tf.train.list_variables(latest))
  assert names["global_step"] == []
  # Byte vocabulary with 100 sentinels: 359 ids (mesh may pad the rows).
  embedding = [s for n, s in names.items() if n.startswith("shared/embedding")
               and "slot" not in n]
  assert embedding and 359 <= embedding[0][0] < 512
  attention = ("SelfAttention" if variant == attentions.MESH_SELF_ATTENTION.name
               else "SynthesizerAttention")
  assert any("encoder/block_000/layer_000/%s/" % attention in n for n in names)
  if variant == "random":
    assert names["encoder/block_000/layer_000/SynthesizerAttention/random/R"
                 ] == [2, SEQ, SEQ]
  # Summaries are written every 100 steps: here only at the start.
  losses = _scalars(model_dir).get("loss", [])
  assert losses and all(math.isfinite(v) and v > 0 for _, v in losses)


@pytest.mark.parametrize("variant", VARIANTS)
def test_eval_writes_validation_metrics(runs, variant):
  proc = runs["after"][(variant, "eval")]
  assert proc is not None and proc.returncode == 0, proc and _tail(proc)
  model_dir = runs["root"] / variant
  eval_dirs = [d for d in os.listdir(model_dir)
               if d.startswith("eval_pydocs_span_corruption_validation")]
  assert len(eval_dirs) == 1, os.listdir(model_dir)
  scalars = _scalars(str(model_dir / eval_dirs[0]))
  (step, nlp), = scalars["neg_log_perplexity"]
  assert step == STEPS
  # Cross-entropy per target token, in nats: positive and finite.
  assert math.isfinite(nlp) and nlp < 0
  assert scalars["num_eval_tokens"][0][1] > 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_infer_decodes_the_input_file(runs, variant):
  proc = runs["after"][(variant, "infer")]
  assert proc is not None and proc.returncode == 0, proc and _tail(proc)
  output = runs["root"] / ("%s.out-%d" % (variant, STEPS))
  assert output.exists(), os.listdir(runs["root"])
  lines = output.read_text().split("\n")
  if lines[-1] == "":
    lines.pop()
  assert len(lines) == len(INPUTS)
  assert "decoded 1:" in proc.stderr


def _neg_log_perplexity(model_dir):
  (eval_dir,) = [d for d in os.listdir(model_dir)
                 if d.startswith("eval_pydocs_span_corruption_validation")]
  (_, value), = _scalars(os.path.join(model_dir, eval_dir))[
      "neg_log_perplexity"]
  return value


def test_eval_scores_one_checkpoint_on_the_same_examples(runs, tmp_path):
  # Span corruption noises its evaluation data at random: T5's evaluation
  # dataset has no seed, so each evaluation scores other examples.
  # jobs.commands seeds it: evaluations of one checkpoint agree.
  trained = str(runs["root"] / "random")
  assert runs["after"][("random", "eval")].returncode == 0
  seeds = {"seeded_a": commands.EVAL_DATA_SEED,
           "seeded_b": commands.EVAL_DATA_SEED, "t5_a": None, "t5_b": None}

  def evaluate(name):
    model_dir = str(tmp_path / name)
    shutil.copytree(trained, model_dir, ignore=shutil.ignore_patterns(
        "eval_*"))
    proc = run(quickstart_eval(model_dir, "random").extended(
        gin_params=commands.eval_seed_params(seeds[name])))
    assert proc.returncode == 0, _tail(proc)
    return _neg_log_perplexity(model_dir)

  values = _parallel(evaluate, sorted(seeds))
  assert values["seeded_a"] == values["seeded_b"]
  assert values["t5_a"] != values["t5_b"]  # why the seed is bound


# --- bad command lines ----------------------------------------------------


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("bad")
  a_file = root / "a_file"
  a_file.write_text("not a directory\n")
  jobs = {
      "gin": command(str(root / "gin"),
                     gin_files=["synthesizer/nonexistent.gin"]),
      "model_dir": command(str(a_file / "sub")),
      "empty": command(
          str(root / "empty"),
          gin_params=["pydocs.corpus_options.validation_percent = 100"]),
  }
  procs = _parallel(lambda k: run(jobs[k]), sorted(jobs), workers=3)
  return {"root": root, "a_file": a_file, "procs": procs}


def _last_lines(proc, n=12):
  return "\n".join(proc.stderr.strip().splitlines()[-n:])


def test_unknown_gin_file_names_file_and_search_path(bad_runs):
  proc = bad_runs["procs"]["gin"]
  assert proc.returncode == 2
  tail = _last_lines(proc)
  assert "synthesizer/nonexistent.gin" in tail
  # mtf_synthesizer's early check: one line, no traceback.
  assert "t5_mesh_transformer: error: Unknown gin file" in tail
  assert "Traceback" not in proc.stderr
  # The search path includes the package's own gin folder.
  assert os.path.dirname(_GIN_DIR) in tail, tail
  assert not os.path.exists(bad_runs["root"] / "gin" / "model.ckpt-0.index")


def test_model_dir_under_a_file_fails_clearly(bad_runs):
  proc = bad_runs["procs"]["model_dir"]
  assert proc.returncode == 2
  tail = _last_lines(proc)
  assert str(bad_runs["a_file"]) in tail
  assert "not a directory" in tail
  assert "t5_mesh_transformer: error: --model_dir=" in tail  # early check
  assert "Traceback" not in proc.stderr
  assert bad_runs["a_file"].read_text() == "not a directory\n"


def test_empty_split_fails_clearly(bad_runs):
  proc = bad_runs["procs"]["empty"]
  assert proc.returncode != 0
  tail = _last_lines(proc)
  assert "EmptySplitError" in tail
  assert "'train' is empty" in tail
  assert "validation_percent=100" in tail


# --- cli_checks, in process -------------------------------------------------


def test_check_model_dir(tmp_path):
  a_file = tmp_path / "f"
  a_file.write_text("x")
  with pytest.raises(cli_checks.CliError, match="not a directory"):
    cli_checks.check_model_dir(str(a_file / "sub" / "deeper"))
  with pytest.raises(cli_checks.CliError, match="not a directory"):
    cli_checks.check_model_dir(str(a_file))
  with pytest.raises(cli_checks.CliError, match="empty"):
    cli_checks.check_model_dir("")
  good = tmp_path / "new" / "model"
  cli_checks.check_model_dir(str(good))
  assert good.is_dir() and not os.listdir(good)
  cli_checks.check_model_dir("gs://bucket/unchecked")


def test_check_gin_files(tmp_path):
  cli_checks.check_gin_files(["models/t5.1.1.tiny.gin", "anything.gin"])
  existing = cli_checks.variant_files()
  assert "synthesizer/vanilla.gin" in existing
  cli_checks.check_gin_files(existing)
  with pytest.raises(cli_checks.CliError) as err:
    cli_checks.check_gin_files(["synthesizer/nonexistent.gin"],
                               search_path=[str(tmp_path),
                                            cli_checks.GIN_DIR])
  message = str(err.value)
  assert "synthesizer/nonexistent.gin" in message
  assert str(tmp_path) in message and cli_checks.GIN_DIR in message
  assert "synthesizer/vanilla.gin" in message


def test_import_outside_the_stock_cli_has_no_side_effects(tmp_path):
  # A bad MTF_SYNTH_CPU_DEVICES would fail in the stock CLI (the start-up
  # hook runs cli_entry there); elsewhere the import changes nothing.
  code = ("import mtf_synthesizer\n"
          "from tensorflow_estimator.python.estimator import run_config\n"
          "print(dict(run_config.get_default_session_config()"
          ".device_count))\n")
  proc = subprocess.run(
      [sys.executable, "-c", code], capture_output=True, text=True,
      cwd=str(tmp_path), timeout=300,
      env=dict(os.environ, MTF_SYNTH_CPU_DEVICES="four"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.strip().splitlines()[-1] == "{}"
