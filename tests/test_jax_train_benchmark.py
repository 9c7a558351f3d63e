# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""tools/benchmark_jax_train.py's reading and reporting, on canned inputs.

The benchmark trains for minutes; nothing here trains or times anything.
The rates are checked against NumPy on canned records, the event-file
readers on event files written here in each program's form, the driver's
order, commands and report with a runner that writes canned event files
instead of training, and docs/jax_train_benchmark.md's figures against the
report's format.
"""

import os
import re
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from workbench import checkout
from workbench import jax_train_benchmark as bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "jax_train_benchmark.md")
SETTINGS = bench.Settings(steps=100, warmup_steps=50, log_every_steps=25,
                          mesh_python=sys.executable,
                          jax_python=sys.executable)


def _numpy_rate(steps, rates, start, stop):
  """The time-weighted rate, computed independently with NumPy."""
  steps, rates = np.asarray(steps, float), np.asarray(rates, float)
  spans = np.diff(steps)
  ends, begins = steps[1:], steps[:-1]
  keep = (begins >= start) & (ends <= stop)
  return spans[keep].sum() / (spans[keep] / rates[1:][keep]).sum()


def test_measured_rate_weighs_periods_by_their_time():
  steps = [25, 50, 75, 100, 130, 200]
  rates = [0.5, 3.0, 4.0, 5.0, 8.0, 2.0]
  rate, counted = bench.measured_rate(dict(zip(steps, rates)), 50, 200)
  assert counted == 150
  assert rate == pytest.approx(_numpy_rate(steps, rates, 50, 200), rel=1e-12)
  # Not the mean of the rates: the slow period weighs most.
  assert rate != pytest.approx(np.mean(rates[2:]))


def test_measured_rate_leaves_out_warmup_and_the_last_step():
  # The CLI's form: a record every step, a slow start, a slow last step
  # (the final checkpoint).
  records = {s: 1.0 if s <= 50 else 16.0 for s in range(2, 100)}
  records[100] = 1.7
  rate, counted = bench.measured_rate(records, 50, 99)
  assert (rate, counted) == (pytest.approx(16.0), 49)
  rate, _ = bench.measured_rate(records, 50, 100)
  assert rate < 16.0


def test_measured_rate_refuses_an_empty_window_and_bad_rates():
  with pytest.raises(ValueError, match="no record period"):
    bench.measured_rate({25: 1.0, 50: 2.0}, 50, 100)
  with pytest.raises(ValueError, match="rate"):
    bench.measured_rate({50: 1.0, 75: 0.0}, 50, 100)


def _write_events(directory, events):
  """An event file of (step, tf.Summary.Value) pairs, as TensorFlow's."""
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, "events.out.tfevents.0.canned")
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(tf.Event(wall_time=0.0, file_version="brain.Event:2")
                 .SerializeToString())
    for step, value in events:
      writer.write(tf.Event(wall_time=float(step), step=step,
                            summary=tf.Summary(value=[value]))
                   .SerializeToString())


def _cli_events(model_dir, rates, batch):
  """The CLI's form: simple values every step, and a text summary."""
  text = tf.Summary.Value(
      tag="gin/operative_config",
      tensor=tf.make_tensor_proto(np.array(b"run.train_steps = 100")))
  events = [(0, text)]
  for step, rate in rates.items():
    events.append((step, tf.Summary.Value(tag="global_step/sec",
                                          simple_value=rate)))
    events.append((step, tf.Summary.Value(tag="examples/sec",
                                          simple_value=rate * batch)))
  _write_events(model_dir, events)


def _jax_events(model_dir, rates, batch):
  """The JAX trainer's form: scalar tensors in model_dir/train/."""
  metadata = tf.SummaryMetadata(
      plugin_data=tf.SummaryMetadata.PluginData(plugin_name="scalars"))
  events = []
  for step, rate in rates.items():
    for tag, value in (("steps_per_sec", rate),
                       ("examples_per_sec", rate * batch), ("loss", 2.5)):
      events.append((step, tf.Summary.Value(
          tag=tag, metadata=metadata,
          tensor=tf.make_tensor_proto(np.float32(value)))))
  _write_events(os.path.join(model_dir, "train"), events)


def _cli_rates(rate):
  out = {s: 3.0 for s in range(2, 51)}
  out.update({s: rate for s in range(51, 100)})
  out[100] = 1.5
  return out


def _jax_rates(rate):
  return {25: 0.4, 50: rate * 0.9, 75: rate, 100: rate}


def test_readers_and_measure_on_canned_event_files(tmp_path):
  _cli_events(str(tmp_path / "cli"), _cli_rates(16.0), 16)
  _jax_events(str(tmp_path / "jax"), _jax_rates(5.0), 16)
  cli = bench.cli_records(str(tmp_path / "cli"))
  jax = bench.jax_records(str(tmp_path / "jax"))
  assert sorted(cli) == sorted(bench.RATE_TAGS["CLI"])
  assert cli["global_step/sec"][60] == 16.0 and len(cli["examples/sec"]) == 99
  assert jax["steps_per_sec"] == pytest.approx(_jax_rates(5.0))
  cli_figures = bench.measure("CLI", cli, SETTINGS)
  jax_figures = bench.measure("JAX", jax, SETTINGS)
  assert cli_figures == {"steps_per_sec": pytest.approx(16.0),
                         "examples_per_sec": pytest.approx(256.0),
                         "measured_steps": 49, "window": [50, 99]}
  assert jax_figures == {"steps_per_sec": pytest.approx(5.0),
                         "examples_per_sec": pytest.approx(80.0),
                         "measured_steps": 50, "window": [50, 100]}


def _flag(argv, name):
  (value,) = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
  return value


def test_run_interleaves_the_programs_and_reports(tmp_path):
  calls = []

  def runner(argv, env, log_path, timeout_s):
    assert env["MTF_SYNTH_VOCAB"] == "byte"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == checkout.ROOT
    assert timeout_s == SETTINGS.timeout_s and log_path.endswith(".log")
    model_dir = _flag(argv, "--model_dir")
    if argv[0] == SETTINGS.jax_python:
      calls.append(("JAX", argv))
      gin_files = [a.split("=", 1)[1] for a in argv
                   if a.startswith("--gin_file=")]
      with open(gin_files[-1]) as f:
        assert f.read() == bench.jax_gin(bench.Shape(), SETTINGS)
      _jax_events(model_dir, _jax_rates(5.0 if len(calls) < 3 else 4.0), 16)
    else:
      calls.append(("CLI", argv))
      _cli_events(model_dir, _cli_rates(16.0), 16)
    return 0

  report = bench.run(bench.Shape(), SETTINGS, command="canned",
                     runner=runner)
  assert [c[0] for c in calls] == ["CLI", "JAX", "CLI", "JAX"]
  assert calls[0][1][0] == os.path.join(os.path.dirname(sys.executable),
                                        "t5_mesh_transformer")
  assert "--gin_file=synthesizer/vanilla.gin" in calls[0][1]
  assert any(a.endswith("gin/flax/dense_vanilla.gin") for a in calls[3][1])
  assert [(r["framework"], r["label"]) for r in report["runs"]] == [
      ("CLI", "V"), ("JAX", "V"), ("CLI", "D+V"), ("JAX", "D+V")]
  v, dv = report["results"]
  assert (v["label"], dv["label"]) == ("V", "D+V")
  assert v["ratio"] == pytest.approx(80.0 / 256.0)
  assert dv["ratio"] == pytest.approx(64.0 / 256.0)
  assert report["versions"]["CLI"]["python"] and report["cores_visible"] >= 1
  # The commands are stated without this machine's folders.
  for text in report["commands"].values():
    assert checkout.ROOT not in text and "$WORK" in text
  text = bench.markdown(report)
  assert "| V | 256.0 | 80.0 | 0.31 | 16.00 | 5.00 |" in text
  assert "| D+V | 256.0 | 64.0 | 0.25 | 16.00 | 4.00 |" in text
  assert text.startswith("Command: `canned`")


def test_both_programs_train_the_same_model():
  shape = bench.Shape()
  model_dir = "/tmp/md"
  cli = bench.cli_command("dense_vanilla", shape, SETTINGS, model_dir)
  bindings = dict(p.split(" = ", 1) for p in cli.gin_params)
  jax = dict(line.split(" = ", 1) for line in
             bench.jax_gin(shape, SETTINGS).splitlines() if " = " in line)
  pairs = {"d_model": "T5Config.d_model", "d_ff": "T5Config.d_ff",
           "num_heads": "T5Config.num_heads", "d_kv": "T5Config.head_dim",
           "num_layers": "T5Config.num_encoder_layers",
           "utils.run.train_steps": "train.train_steps",
           "SynthesizerAttention.max_length": "T5Config.max_length"}
  for mesh_key, jax_key in pairs.items():
    assert bindings[mesh_key] == jax[jax_key], mesh_key
  assert jax["T5Config.num_decoder_layers"] == bindings["num_layers"]
  assert bindings["utils.run.batch_size"] == "('tokens_per_batch', %d)" % (
      shape.batch * shape.length)
  assert jax["train.batch_size"] == str(shape.batch)
  assert bindings["mesh_train_dataset_fn.pack"] == "False"
  assert bindings["dropout_rate"] == jax["T5Config.dropout_rate"] == "0.0"
  for dtype in ("master_dtype", "slice_dtype", "activation_dtype"):
    assert bindings["get_variable_dtype." + dtype] == "'float32'"
  assert jax["train.learning_rate_schedule"].endswith(
      bindings.get("utils.run.learning_rate_schedule",
                   "learning_rate_schedule_noam"))
  assert "models/bi_v1.gin" in cli.gin_files
  assert cli.gin_files[-1] == "synthesizer/dense_vanilla.gin"
  argv = bench.jax_argv("dense_vanilla", SETTINGS, model_dir, "b.gin")
  for path in [a.split("=", 1)[1] for a in argv[3:-1]
               if a.startswith("--gin_file=")]:
    assert os.path.exists(path), path


def test_bad_settings_are_refused():
  with pytest.raises(ValueError, match="unknown variants"):
    bench.check(SETTINGS, ["vanilla", "nope"])
  with pytest.raises(ValueError, match="multiples"):
    bench.check(bench.Settings(steps=110, mesh_python=sys.executable,
                               jax_python=sys.executable), ["vanilla"])
  with pytest.raises(ValueError, match="two record periods"):
    bench.check(bench.Settings(steps=75, mesh_python=sys.executable,
                               jax_python=sys.executable), ["vanilla"])
  with pytest.raises(FileNotFoundError, match="no Python"):
    bench.check(bench.Settings(jax_python="/nonexistent/python"),
                ["vanilla"])


def _table(text, header):
  lines = text.splitlines()
  start = lines.index(header) + 2
  rows = []
  for line in lines[start:]:
    if not line.startswith("|"):
      break
    rows.append([c.strip() for c in line.strip("|").split("|")])
  return rows


def test_the_documents_figures_follow_the_report():
  with open(DOC) as f:
    text = f.read()
  (command,) = re.findall(r"^Command: `([^`]*)`", text, re.M)
  assert command.startswith("python tools/benchmark_jax_train.py")
  batch = int(re.search(r"batch (\d+) x", text).group(1))
  results = _table(text, bench.TABLE_HEADER)
  runs = _table(text, bench.RUNS_HEADER)
  assert [r[0] for r in results] == [bench.label(v) for v in bench.VARIANTS]
  for label, cli, jax, ratio, cli_steps, jax_steps in results:
    assert float(ratio) == pytest.approx(float(jax) / float(cli), abs=0.006)
    assert float(cli) == pytest.approx(batch * float(cli_steps), rel=0.002)
    assert float(jax) == pytest.approx(batch * float(jax_steps), rel=0.002)
    for framework, figure in (("CLI", cli), ("JAX", jax)):
      mine = [float(r[5]) for r in runs if r[1] == framework and r[2] == label]
      assert mine and float(figure) == pytest.approx(
          np.median(mine), abs=0.051), (label, framework)
  # Interleaved: the programs alternate.
  assert [r[1] for r in runs] == ["CLI", "JAX"] * (len(runs) // 2)


def test_the_documents_bindings_are_the_tools():
  with open(DOC) as f:
    lines = {line.strip() for line in f}
  settings = bench.Settings()
  cli = bench.cli_command("vanilla", bench.Shape(), settings, "md")
  expected = list(cli.gin_params) + bench.jax_gin(
      bench.Shape(), settings).splitlines()
  assert [line for line in expected if line not in lines] == []
