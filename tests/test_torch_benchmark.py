# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Smoke test of tools/benchmark_torch.py at tiny dims, on the CPU.

Checks the report's structure (every requested model, T5 and V always, the
device line, the table's columns), that the figures are positive, the saved
activations' count (each storage once, weights left out), the operator
count (every operator once, the backward's too; the same at every run; a
decoder layer of V no costlier to the host than one of T5), the MFU
column (the step's FLOPs per second over the run's matmul peak), that the
workbench module runs without TensorFlow or the package, the CLI, and
that the modules of workbench/pytorch/ import each other one way (no
circle). It makes no claim about speed.
"""

import ast
import dataclasses
import gc
import json
import os
import re
import subprocess
import sys
import types
import weakref

import pytest
import torch
from transformers.generation import utils as generation_utils

import conftest
from workbench.pytorch import benchmark
from workbench.pytorch import measure

TINY = benchmark.Dims(
    d_model=32, num_heads=2, d_kv=16, d_ff=64, num_layers=1,
    num_decoder_layers=1, vocab_size=64, batch=2, input_length=16,
    target_length=8, new_tokens=4)
SETTINGS = benchmark.Settings(steps=2, warmup=1, rounds=2,
                              generate_repeats=1, device="cpu")
TINY_FLAGS = ["--device", "cpu", "--d_model", "32", "--num_heads", "2",
              "--d_kv", "16", "--d_ff", "64", "--num_layers", "1",
              "--num_decoder_layers", "1", "--vocab_size", "64", "--batch",
              "2", "--input_length", "16", "--target_length", "8",
              "--new_tokens", "4", "--steps", "1", "--warmup", "1",
              "--rounds", "1", "--generate_repeats", "1"]
COLUMNS = 19


@pytest.fixture(scope="module")
def report():
  return benchmark.run(TINY, SETTINGS, models=["R", "D+V"],
                       command="tiny")


def test_every_variant_of_the_table_is_a_model():
  labels = benchmark.model_labels()
  assert labels[0] == benchmark.T5
  assert {"V", "R", "Fix", "FR", "D", "FD", "R+V", "D+V"} <= set(labels)
  assert len(labels) == len(set(labels))


def test_report_has_every_requested_model_and_positive_figures(report):
  results = report["results"]
  assert [r["label"] for r in results] == ["T5", "V", "R", "D+V"]
  assert [r["components"] for r in results] == [
      [], ["dot_product"], ["random"], ["dense", "dot_product"]]
  for r in results:
    assert len(r["step_s_all"]) == SETTINGS.steps, r["label"]
    assert r["train_steps_per_s"] > 0 and r["step_s"] > 0, r["label"]
    assert r["generate_tokens_per_s"] > 0, r["label"]
    assert r["params"] > 0 and r["state_bytes"] > 0, r["label"]
    assert r["train_steps_per_s_vs_t5"] > 0, r["label"]
    assert r["train_steps_per_s_vs_v"] > 0, r["label"]
    assert r["generate_tokens_per_s_vs_v"] > 0, r["label"]
    assert r["peak_bytes"] is None  # no CPU allocator statistics
    assert r["saved_bytes"] > 0 and r["saved_bytes_vs_v"] > 0, r["label"]
    assert r["train_ops"] > 0 and r["train_ops_vs_v"] > 0, r["label"]
    assert r["decode_ops_per_step"] > 0, r["label"]
    assert r["train_flops"] == sum(r["train_flops_terms"].values()) > 0
    # MFU: the step's FLOPs per second over the run's matmul peak.
    assert r["mfu"] == pytest.approx(
        r["train_flops"] / r["step_s"] /
        report["matmul_peak"]["flops_per_s"]), r["label"]
    assert r["mfu"] > 0, r["label"]
  assert report["matmul_peak"]["dtype"] == "float32"
  assert report["matmul_peak"]["flops_per_s"] > 0
  by_label = {r["label"]: r for r in results}
  assert by_label["T5"]["train_steps_per_s_vs_t5"] == 1.0
  assert by_label["V"]["train_steps_per_s_vs_v"] == 1.0
  # T5 and V have the same weights' shapes.
  assert by_label["T5"]["params"] == by_label["V"]["params"]
  assert report["dims"]["d_model"] == 32 and report["command"] == "tiny"
  json.dumps(report)  # serializable


def test_markdown_names_the_device_and_has_a_row_per_model(report):
  text = benchmark.markdown(report)
  assert re.search(r"^- device: CPU: .+", text, re.M), text
  assert "torch %s, transformers %s" % (report["torch"],
                                        report["transformers"]) in text
  assert "- dims: d_model 32, 2 heads x 16" in text
  rows = [line for line in text.splitlines() if line.startswith("|")]
  header, rule, body = rows[0], rows[1], rows[2:]
  assert header.count("|") == rule.count("|") == COLUMNS + 1
  assert [row.split("|")[1].strip() for row in body] == [
      "T5", "V", "R", "D+V"]
  for row in body:
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert len(cells) == COLUMNS, row
    steps, tokens = float(cells[3]), float(cells[7])
    assert steps > 0 and tokens > 0, row
    assert header.split("|")[7].strip() == "MFU"
    label = cells[0]
    mfu = [r["mfu"] for r in report["results"] if r["label"] == label][0]
    assert cells[6] == "%.1f%%" % (100 * mfu), row
    assert cells[10] == "n/a", row  # peak memory on CPU
    assert float(cells[12]) > 0 and cells[13].endswith("x"), row
    assert float(cells[15]) > 0 and cells[16].endswith("x"), row
    assert float(cells[17]) > 0 and cells[18].endswith("x"), row
  assert re.search(r"^- MFU: .+ matmul peak measured in this run: "
                   r"[0-9.]+ [GT]FLOP/s \(1024 x 1024 float32 matmul\)$",
                   text, re.M), text


def test_unknown_model_is_refused():
  with pytest.raises(ValueError, match="unknown models"):
    benchmark.run(TINY, SETTINGS, models=["nope"])


def test_workbench_module_needs_neither_tensorflow_nor_the_package():
  code = ("import sys\n"
          "from workbench.pytorch import benchmark as b\n"
          "b.variants(); b.load_model_code()\n"
          "print('tensorflow' in sys.modules, "
          "'mtf_synthesizer' in sys.modules)\n")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=300, cwd=conftest.REPO)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.split()[-2:] == ["False", "False"]


def test_cli_help():
  proc = subprocess.run(
      [sys.executable, os.path.join(conftest.TOOLS, "benchmark_torch.py"),
       "--help"], capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "--attn_implementation" in proc.stdout
  assert "--compile" in proc.stdout and "--preset" in proc.stdout
  assert "--no_relative_bias" in proc.stdout
  assert "--cache_implementation" in proc.stdout


def test_saved_activations_count_each_storage_once():
  """A forward that saves one [4, 8] float32 tensor (twice, and a view)."""
  weight = torch.nn.Parameter(torch.ones(8, 8))

  class Toy(torch.nn.Module):

    def __init__(self):
      super().__init__()
      self.weight = weight

    def forward(self, x, use_cache):
      del use_cache
      h = x.exp()  # saves its output h (128 bytes)
      y = h * h[:, :8]  # saves h twice (one of them a view)
      loss = (y @ self.weight).sum()  # saves y and the weight
      return types.SimpleNamespace(loss=loss)

  x = torch.zeros(4, 8, requires_grad=True)
  saved = benchmark.saved_activation_bytes(Toy(), {"x": x},
                                           torch.device("cpu"))
  assert saved == 2 * 4 * 8 * 4  # h and y, each once; no weight


def test_operator_count_counts_each_operator_and_the_backward():
  """x * 2 + 1 and its sum: 3 forward operators, and each of the backward's
  (the sum's gradient expanded, the product's times 2) once."""
  x = torch.ones(3, requires_grad=True)
  with benchmark.OperatorCount() as forward:
    y = (x * 2 + 1).sum()
  assert forward.calls == 3
  with benchmark.OperatorCount() as backward:
    y.backward()
  # ones_like (the seed), expand (sum's backward), mul (x * 2's), and
  # detach (the leaf's gradient stored); the add's is the identity.
  assert backward.calls == 4
  assert torch.equal(x.grad, torch.full((3,), 2.0))


def test_operator_counts_are_the_same_at_every_run():
  """A count depends on the model and the shapes only: not on the time,
  the load or the thread count."""
  model = benchmark.build_model("D+V", TINY, "sdpa")
  batch = {"input_ids": torch.randint(2, 64, (2, 16)),
           "labels": torch.randint(2, 64, (2, 8))}
  cpu = torch.device("cpu")
  first = benchmark.training_operator_calls(model, batch, cpu)
  threads = torch.get_num_threads()
  torch.set_num_threads(2 if threads == 1 else 1)
  try:
    assert benchmark.training_operator_calls(model, batch, cpu) == first
  finally:
    torch.set_num_threads(threads)
  assert all(p.grad is None for p in model.parameters())


def test_a_decoder_layer_of_v_dispatches_what_one_of_t5_does():
  """V is T5's math: a decoding step costs the host no more operators per
  decoder layer (self- and cross-attention, feed-forward) than
  transformers' T5 does. Each layer's count: the difference between 2+2
  and 1+1 blocks (the encoder runs outside the decoding steps)."""
  inputs = {"input_ids": torch.randint(2, 64, (2, 16)),
            "attention_mask": torch.ones(2, 16, dtype=torch.long)}
  cpu = torch.device("cpu")
  per_layer = {}
  for label in ("T5", "V"):
    counts = []
    for layers in (1, 2):
      dims = dataclasses.replace(TINY, num_layers=layers,
                                 num_decoder_layers=layers)
      model = benchmark.build_model(label, dims, "sdpa")
      counts.append(benchmark.decode_operator_calls(model, inputs,
                                                    dims, cpu))
    per_layer[label] = counts[1] - counts[0]
  assert per_layer["T5"] > 0
  assert per_layer["V"] <= per_layer["T5"], per_layer


def test_saved_activations_are_freed_after_the_count():
  """Nothing the measured forward saved outlives it (a model's activations
  would stay on the device, model after model)."""
  saved = []

  class Toy(torch.nn.Module):

    def __init__(self):
      super().__init__()
      self.weight = torch.nn.Parameter(torch.ones(8, 8))

    def forward(self, x, use_cache):
      del use_cache
      h = x.exp()  # saves its own output
      saved.append(weakref.ref(h))
      return types.SimpleNamespace(loss=(h @ self.weight).sum())

  x = torch.zeros(4, 8, requires_grad=True)
  assert benchmark.saved_activation_bytes(
      Toy(), {"x": x}, torch.device("cpu")) == 4 * 8 * 4
  gc.collect()
  assert saved and saved[0]() is None


def test_saved_activations_without_relative_bias(report):
  """The Synthesizer's stacks without T5's relative bias save less."""
  settings = dataclasses.replace(SETTINGS, relative_bias=False,
                                 dropout_rate=0.0, generate_repeats=0,
                                 steps=1, rounds=1, warmup=0)
  without = benchmark.run(TINY, settings, models=["R"])
  assert without["settings"]["relative_bias"] is False
  by_label = {r["label"]: r for r in without["results"]}
  with_bias = {r["label"]: r for r in report["results"]}
  assert by_label["V"]["saved_bytes"] < with_bias["V"]["saved_bytes"]
  assert "without relative bias" in benchmark.markdown(without)


def test_cli_writes_its_table_and_json(tmp_path, capsys):
  status = conftest.run_tool("benchmark_torch.py", TINY_FLAGS + [
      "--variants", "FR", "--attn_implementation", "eager",
      "--output_dir", str(tmp_path)])
  assert status == 0, capsys.readouterr().err[-3000:]
  with open(tmp_path / "torch_benchmark.json") as f:
    written = json.load(f)
  assert [r["label"] for r in written["results"]] == ["T5", "V", "FR"]
  assert written["settings"]["attn_implementation"] == "eager"
  assert "tools/benchmark_torch.py" in written["command"]
  with open(tmp_path / "torch_benchmark.md") as f:
    assert f.read() == capsys.readouterr().out
  assert conftest.run_tool("benchmark_torch.py",
                           TINY_FLAGS + ["--variants", "nope"]) == 2


def test_profiles_name_each_model_and_what_it_ran(tmp_path, capsys):
  """--profile_dir: one file per model, a training step and a generate()."""
  status = conftest.run_tool("benchmark_torch.py", TINY_FLAGS + [
      "--variants", "D+V", "--profile_dir", str(tmp_path)])
  assert status == 0, capsys.readouterr().err[-3000:]
  assert sorted(os.listdir(tmp_path)) == [
      "D_V.profile.txt", "T5.profile.txt", "V.profile.txt"]
  for label in ("T5", "V", "D+V"):
    with open(benchmark.profile_path(str(tmp_path), label)) as f:
      text = f.read()
    assert text.startswith(label + " ("), text[:200]
    train, generate = text.split("## One training step\n")[1].split(
        "## One generate()")
    for section in (train, generate):
      calls = re.search(r"^(\d+) aten operator calls", section, re.M)
      assert calls and int(calls.group(1)) > 0, section[:300]
      assert "aten::" in section, section[:300]
    assert "aten::mm" in train or "aten::addmm" in train, train[:2000]


def test_generate_with_a_static_cache(capsys, monkeypatch):
  """Every model, T5 too, generates with transformers' StaticCache."""
  made = []

  class Counted(generation_utils.StaticCache):

    def __init__(self, *args, **kwargs):
      super().__init__(*args, **kwargs)
      made.append(self)

  monkeypatch.setattr(generation_utils, "StaticCache", Counted)
  status = conftest.run_tool("benchmark_torch.py", TINY_FLAGS + [
      "--variants", "R+V", "--steps", "1", "--cache_implementation",
      "static"])
  assert status == 0, capsys.readouterr().err[-3000:]
  text = capsys.readouterr().out
  assert "generate() with a static cache" in text
  rows = [line for line in text.splitlines() if line.startswith("|")][2:]
  assert [row.split("|")[1].strip() for row in rows] == ["T5", "V", "R+V"]
  for row in rows:
    assert float(row.split("|")[8]) > 0, row  # generate tokens/s
  # Each of the 3 models' warmup and timed call: a self-attention cache
  # and a cross-attention one.
  assert len(made) == 3 * 2 * 2


def test_compile_with_a_static_cache_compiles_generate_on_a_cpu(
    capsys, monkeypatch):
  """--compile --cache_implementation static: every model's training call
  and its generate()'s decoding steps go through torch.compile on a CPU,
  where transformers would not compile by itself (torch.compile is
  stubbed: what is compiled is recorded, nothing is), and dynamo keeps
  room for every model's graphs (they share their classes' code)."""
  compiled, limits = [], []
  dynamo_config = torch._dynamo.config  # pylint: disable=protected-access
  limit = dynamo_config.recompile_limit

  def record(fn, **kwargs):
    del kwargs
    compiled.append(fn)
    limits.append(dynamo_config.recompile_limit)
    return fn

  monkeypatch.setattr(torch, "compile", record)
  flags = TINY_FLAGS + ["--variants", "D+V", "--steps", "1",
                        "--cache_implementation", "static"]
  assert conftest.run_tool("benchmark_torch.py", flags) == 0
  assert not compiled  # static alone: transformers' choice (not a CPU)
  capsys.readouterr()
  assert conftest.run_tool("benchmark_torch.py", flags + [
      "--compile", "--compile_scope", "model"]) == 0
  text = capsys.readouterr().out
  assert "torch.compile (training step; generate()'s decoding steps)" in text
  models = [fn for fn in compiled if isinstance(fn, torch.nn.Module)]
  steps = [fn.__self__ for fn in compiled if hasattr(fn, "__self__")]
  assert [type(m).__name__ for m in models] == [
      "T5ForConditionalGeneration"] + [
          "MtfSynthesizerForConditionalGeneration"] * 2
  # One compilation per model (its generate() calls reuse it).
  assert steps == models, (compiled, models)
  assert min(limits) >= 2 * 3 and min(limits) > limit
  assert dynamo_config.recompile_limit == limit


def test_compile_compiles_each_block_and_not_the_model(capsys, monkeypatch):
  """--compile --compile_scope blocks (regional): every repeated block of each
  model, T5's T5Block and the Synthesizer's MtfSynthesizerBlock, is
  compiled in place and nothing else (torch.compile is stubbed: what is
  compiled is recorded), generate() does not compile its whole step, and
  the report gives each model's first step and generate()."""
  compiled, configs = [], []

  def record(fn, **kwargs):
    del kwargs
    compiled.append(fn)
    return fn

  config = measure._generation_config  # pylint: disable=protected-access

  def recorded_config(*args):
    configs.append(config(*args))
    return configs[-1]

  monkeypatch.setattr(torch, "compile", record)
  monkeypatch.setattr(measure, "_generation_config",
                      recorded_config)
  flags = TINY_FLAGS + ["--variants", "D+V", "--steps", "1",
                        "--cache_implementation", "static", "--compile",
                        "--compile_scope", "blocks"]
  assert conftest.run_tool("benchmark_torch.py", flags) == 0
  text = capsys.readouterr().out
  owners = [type(getattr(fn, "__self__", fn)).__name__ for fn in compiled]
  # One encoder and one decoder block per model: T5, V, D+V.
  assert owners == ["T5Block"] * 2 + ["MtfSynthesizerBlock"] * 4, owners
  assert configs and all(c.disable_compile and c.compile_config is None
                         for c in configs)
  assert "torch.compile of each repeated block" in text
  (line,) = [l for l in text.splitlines()
             if l.startswith("- compilation (each repeated block")]
  for label in ("T5", "V", "D+V"):
    assert re.search(r"\b%s \d+\.\d / \d+\.\d" % re.escape(label),
                     line), line


def test_compiled_blocks_train_as_the_eager_model():
  """A tiny D+V's loss and gradients with its blocks compiled (inductor, on
  the CPU) equal the eager model's."""
  model = benchmark.build_model("D+V", TINY, "sdpa", 0, 0.0, True)
  batch = {"input_ids": torch.randint(2, TINY.vocab_size, (2, 16),
                                      generator=torch.Generator().manual_seed(0)),
           "labels": torch.randint(2, TINY.vocab_size, (2, 8),
                                   generator=torch.Generator().manual_seed(1))}

  def step():
    model.zero_grad(set_to_none=True)
    loss = model(**batch, use_cache=False).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone()
                           for n, p in model.named_parameters()
                           if p.grad is not None}

  eager_loss, eager_grads = step()
  assert measure.compile_blocks(model) == 2
  compiled_loss, compiled_grads = step()
  torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-5,
                             atol=1e-6)
  assert compiled_grads.keys() == eager_grads.keys()
  for name, grad in eager_grads.items():
    torch.testing.assert_close(compiled_grads[name], grad, rtol=1e-4,
                               atol=1e-6, msg=name)


def test_a_failing_model_is_reported_and_the_others_measured(tmp_path,
                                                             monkeypatch,
                                                             capsys):
  """R runs out of memory in round 2: round 1's report is on disk after
  round 1, and the final one has R's error and the others' figures."""
  train_step = measure.train_step
  written = []

  def failing(entry, batch, device):
    if entry.label == "R" and entry.step_s:
      raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate")
    return train_step(entry, batch, device)

  def dump(_):
    with open(tmp_path / "torch_benchmark.json") as f:
      written.append(json.load(f))

  monkeypatch.setattr(measure, "train_step", failing)
  run = benchmark.run
  monkeypatch.setattr(benchmark, "run", lambda *a, **k: run(
      *a, **dict(k, progress=lambda r: (k["progress"](r), dump(r)))))
  flags = list(TINY_FLAGS)
  flags[flags.index("--rounds") + 1] = "2"
  flags[flags.index("--steps") + 1] = "2"
  status = conftest.run_tool("benchmark_torch.py", flags + [
      "--variants", "R", "--generate_repeats", "0",
      "--output_dir", str(tmp_path)])
  assert status == 1
  assert [[r["error"] for r in w["results"]] for w in written] == [
      [None, None, None],
      [None, None, "round 2: CUDA out of memory. Tried to allocate"]]
  first = {r["label"]: r for r in written[0]["results"]}
  assert all(len(first[m]["step_s_all"]) == 1 for m in ("T5", "V", "R"))
  final = {r["label"]: r for r in written[1]["results"]}
  assert len(final["V"]["step_s_all"]) == 2
  assert final["R"]["step_s_all"] == first["R"]["step_s_all"]
  assert final["R"]["train_steps_per_s_vs_v"] > 0
  text = capsys.readouterr().out
  assert "- R failed in round 2: CUDA out of memory" in text
  with open(tmp_path / "torch_benchmark.md") as f:
    assert f.read() == text


def _pytorch_workbench_imports():
  """{module: the workbench/pytorch modules it imports, anywhere in it}."""
  folder = os.path.join(conftest.REPO, "workbench", "pytorch")
  graph = {}
  for name in sorted(os.listdir(folder)):
    if not name.endswith(".py") or name == "__init__.py":
      continue
    with open(os.path.join(folder, name)) as f:
      tree = ast.parse(f.read())
    graph[name[:-3]] = {
        alias.name for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and
        node.module == "workbench.pytorch" for alias in node.names}
  return graph


def _cycle(graph):
  """A cycle of the import graph, as a list of modules, or None."""
  def visit(module, path):
    if module in path:
      return path[path.index(module):] + [module]
    for imported in sorted(graph.get(module, ())):
      found = visit(imported, path + [module])
      if found:
        return found
    return None

  for module in graph:
    found = visit(module, [])
    if found:
      return found
  return None


def test_the_pytorch_workbench_imports_run_one_way():
  """No module of workbench/pytorch/ imports one that imports it (in a
  function or at the top)."""
  graph = _pytorch_workbench_imports()
  assert {"benchmark", "cuda_choices", "route_choices"} <= set(graph)
  assert _cycle(graph) is None, _cycle(graph)
  # The check can fail: a circle such as the two choices modules had.
  assert _cycle(dict(graph, timed_pairs={"route_choices"})) is not None

