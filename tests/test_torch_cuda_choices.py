# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""tools/compare_cuda_choices.py: each pair computes one function (here CPU).

The documented command runs without a GPU and finds each alternative equal
to the model's way; an alternative off by a little is reported as off; the
pairs take turns in alternating order. The attention plan's decisions
(`workbench/pytorch/route_choices.py`): each pair computes one function,
every route is taken, and docs/pytorch_benchmark.md has a row for each
case and each route.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

import conftest
from workbench.pytorch import choices as choices_lib
from workbench.pytorch import cuda_choices
from workbench.pytorch import models as bench_models
from workbench.pytorch import route_choices
from workbench.pytorch import timed_pairs

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = timed_pairs.Dims(batch=2, length=32, d_model=64, num_heads=4,
                        d_kv=16, fd_factors=(4, 8))


def test_documented_command_runs_without_a_gpu(tmp_path):
  proc = conftest.run_documented_on_cpu(
      "docs/pytorch_benchmark.md", "compare_cuda_choices.py --device cpu "
      "--batch 2", "runs/cuda_choices", tmp_path)
  with open(tmp_path / "cuda_choices.json") as f:
    results = json.load(f)["results"]
  assert [(r["choice"], r["case"]) for r in results] == [
      ("b2", "D"), ("b2", "D+V"), ("rms_norm", "[2, 32, 64] float32"),
      ("fd_flex", "FD core, 2 x 32, factors (4, 8)")]
  for r in results:
    if r["choice"] == "fd_flex" and r["error"]:
      # torch has no FlexAttention backward on a CPU.
      assert "backward on CPU" in r["error"]
      continue
    assert r["error"] is None
    assert r["difference"] < 1e-5, r
    assert r["model_ms"] > 0 and r["alternative_ms"] > 0
  with open(tmp_path / "cuda_choices.md") as f:
    assert f.read() == proc.stdout


def test_the_composed_norm_is_the_models_bf16_norm():
  """The comparison's first way is the norm a bf16 model computes."""
  modeling = bench_models.load_model_code()
  norm = modeling.MtfSynthesizerRMSNorm(16, 1e-6).to(torch.bfloat16)
  torch.nn.init.normal_(norm.weight, 1.0, 0.1)
  x = torch.randn(3, 5, 16, dtype=torch.bfloat16)
  torch.testing.assert_close(
      modeling.T5LayerNorm.forward(norm, x), norm(x),
      rtol=0, atol=0)


def test_an_alternative_off_by_a_little_is_seen(monkeypatch):
  rms_norm = torch.nn.functional.rms_norm
  monkeypatch.setattr(torch.nn.functional, "rms_norm",
                      lambda *args, **kwargs: rms_norm(*args, **kwargs) * 1.01)
  result = cuda_choices.compare_rms_norm(
      TINY, torch.device("cpu"), rounds=1, repeats=1)
  assert result.difference > 5e-3


def test_the_fd_core_matches_the_model_layout():
  """The model's route of the comparison builds FD's logits as the model."""
  functions = bench_models.load_model_code("functions")
  torch.manual_seed(0)
  # pylint: disable-next=protected-access
  config = timed_pairs.layer_config(TINY, ("factorized_dense",))
  fd = functions.MtfSynthesizerFactorizedDense(config)
  for p in fd.parameters():
    torch.nn.init.normal_(p)
  hidden = torch.randn(TINY.batch, 20, TINY.d_model)
  positions = functions.Positions(start=0, length=20, memory_length=20)
  logits = fd(hidden, None, positions)
  rows = fd.hidden_rows(hidden)
  fa = (torch.bmm(rows, fd.wa) + fd.ba[:, None]).view(
      TINY.num_heads, TINY.batch, 20, -1).transpose(0, 1)
  fb = (torch.bmm(rows, fd.wb) + fd.bb[:, None]).view(
      TINY.num_heads, TINY.batch, 20, -1).transpose(0, 1)
  # pylint: disable-next=protected-access
  built = cuda_choices._fd_bias(fa, fb, TINY.fd_factors[0], 20)
  # One sum in another order (baddbmm against bmm and an add).
  torch.testing.assert_close(built, logits, rtol=0,
                             atol=1e-5 * float(logits.abs().max()))


def test_pairs_take_turns_in_alternating_order():
  calls = []
  timed_pairs.time_pair(
      {"model": lambda: calls.append("m"),
       "alternative": lambda: calls.append("a")},
      torch.device("cpu"), rounds=3, repeats=2)
  assert "".join(calls) == "mmaa" + "mmaa" + "aamm" + "mmaa"


# The attention plan's decisions (workbench/pytorch/route_choices.py).
ROUTES_SECTION = "### The attention routes, each against its alternative"


ROUTES_COMMAND = "--choices routes"
# The documented command's sizes, and TINY's with one round of one call.
TINY_FLAGS = {"--batch": "2", "--length": "32", "--d_model": "64",
              "--num_heads": "4", "--d_kv": "16", "--fd_factors": "4,8",
              "--rounds": "1", "--repeats": "1"}


def _with_flags(argv, flags):
  """argv with each flag's value replaced (the flag must be there)."""
  argv = list(argv)
  for flag, value in flags.items():
    argv[argv.index(flag) + 1] = value
  return argv


@pytest.fixture(scope="module")
def tiny_routes(tmp_path_factory):
  """The documented routes command at TINY dims on the CPU: its results."""
  import doc_blocks  # pylint: disable=g-import-not-at-top
  out = tmp_path_factory.mktemp("routes")
  command = doc_blocks.find("docs/pytorch_benchmark.md",
                            "compare_cuda_choices.py", ROUTES_COMMAND)
  argv = _with_flags(command.substituted({
      ".venv/bin/python": sys.executable, "runs/routes": str(out)}),
                     TINY_FLAGS)
  env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
  proc = subprocess.run(argv, cwd=conftest.REPO, env=env, timeout=600,
                        capture_output=True, text=True)
  assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
  with open(out / "cuda_choices.json") as f:
    results = json.load(f)["results"]
  assert {r["choice"] for r in results} == set(
      command.argv[command.argv.index("--choices") + 1].split(","))
  return results


def test_each_route_pair_computes_one_function(tiny_routes):
  for r in tiny_routes:
    assert r["error"] is None
    assert r["difference"] < 1e-5, r
    assert r["model_ms"] > 0 and r["alternative_ms"] > 0


def test_the_cpu_has_no_values_apart():
  """The CPU's kernels take one width: the choice is CUDA's alone."""
  assert not route_choices.compare(
      "values_apart", TINY, torch.device("cpu"), 1, 1,
      situations=route_choices.SITUATIONS[:1])


def test_the_routes_choice_takes_every_route(tiny_routes):
  """Each Route is some CPU call's way or its alternative."""
  attention = bench_models.load_model_code("attention")
  ways = set()
  for r in tiny_routes:
    if r["choice"] == "routes":
      ways.update(w.split(" (")[0]
                  for w in r["case"].split(": ", 1)[1].split(" vs "))
  assert ways == {route.value for route in attention.Route}


def test_a_wrong_alternative_route_is_seen(monkeypatch):
  """A plan that adds R's logits a second time is reported as off."""
  def twice(attention, plan, functions, in_bias):
    del functions
    return attention.Plan(plan.route, plan.logits | in_bias)

  monkeypatch.setattr(route_choices, "other_route", twice)
  result = route_choices.compare_case(
      "routes", TINY, torch.device("cpu"), "R+V",
      ("random", "dot_product"), route_choices.SITUATIONS[2], 1, 1)
  assert result.difference > 1e-3, result


def _routes_tables():
  """docs/pytorch_benchmark.md's routes subsection: its tables' rows."""
  with open(os.path.join(conftest.REPO, "docs",
                         "pytorch_benchmark.md")) as f:
    text = f.read()
  assert ROUTES_SECTION in text
  section = text.split(ROUTES_SECTION, 1)[1].split("\n## ", 1)[0]
  section = section.split("\n### ", 1)[0]
  tables = {}
  header = None
  for line in section.splitlines():
    if not line.startswith("|"):
      header = None
      continue
    cells = [c.strip() for c in line.strip("|").split("|")]
    if header is None:
      header = cells[0]
      tables[header] = []
    elif not set(cells[0]) <= set("-: "):
      tables[header].append(cells)
  return tables


def test_every_measured_case_has_a_row_in_the_docs(tiny_routes):
  """The document's measured table holds the cases a CPU call takes."""
  rows = {(r[0], r[1]) for r in _routes_tables()["choice"]}
  assert rows == {(r["choice"], r["case"]) for r in tiny_routes}


def test_every_route_has_a_row_in_the_docs():
  """The document's decisions name every Route and every route choice."""
  attention = bench_models.load_model_code("attention")
  decided = _routes_tables()["route"]
  routes = {row[0].strip("`") for row in decided}
  assert {route.value for route in attention.Route} <= routes
  choices = {row[1].strip("`") for row in decided}
  assert set(route_choices.CHOICES) <= choices


def test_every_choice_is_known_by_one_module():
  """`choices` runs the fused path's choices and the plan's, each by the
  one module that times it; an unknown name raises."""
  assert set(choices_lib.KNOWN) == (set(cuda_choices.CHOICES) |
                                    set(route_choices.CHOICES))
  assert not set(cuda_choices.CHOICES) & set(route_choices.CHOICES)
  assert choices_lib.DEFAULT == cuda_choices.CHOICES
  with pytest.raises(ValueError, match="no_such_choice"):
    choices_lib.compare(TINY, torch.device("cpu"), ("no_such_choice",))

