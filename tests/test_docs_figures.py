# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Each measured figure is stated once, or its copies equal the generated page.

The generated pages are written by the tools from their results files:
docs/benchmark_results.md (`tools/benchmark.py`) and
docs/reproduction_results.md (`tools/reproduce.py --report_only`, from
docs/reproduction_results.json). docs/benchmark.md reads its tables from
the first: every figure of them must be the generated page's. The second's
tables are copied nowhere: no other page (README.md, docs/ but the
history) holds one of its rows.
"""

import glob
import os
import re
from typing import Dict, List

import pytest

import conftest

BENCHMARK = "docs/benchmark.md"
GENERATED = "docs/benchmark_results.md"
REPRODUCTION = "docs/reproduction_results.md"


def _read(doc: str) -> str:
  with open(os.path.join(conftest.REPO, doc)) as f:
    return f.read()


def _cells(line: str) -> List[str]:
  return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(text: str, heading: str = "##") -> Dict[str, List[Dict[str, str]]]:
  """Each section's first table, as rows of {column: cell}.

  Args:
    text: a Markdown page.
    heading: the marker of the sections' headings ("##" or "###").

  Returns:
    {section title: rows}.
  """
  out = {}
  pattern = r"(?m)^%s (.*)\n" % re.escape(heading)
  parts = re.split(pattern, text)
  for title, body in zip(parts[1::2], parts[2::2]):
    lines = [l for l in body.splitlines() if l.startswith("|")]
    if len(lines) < 3:
      continue
    header = _cells(lines[0])
    rows = []
    for line in lines[2:]:
      if line.startswith("|---"):
        break
      rows.append(dict(zip(header, _cells(line))))
    out[title.strip()] = rows
  return out


def _by_model(rows: List[Dict[str, str]]) -> Dict[str, Dict[str, str]]:
  return {r["model"]: r for r in rows}


GENERATED_TABLES = tables(_read(GENERATED))


def _generated(block: str) -> Dict[str, Dict[str, str]]:
  (title,) = [t for t in GENERATED_TABLES if t.startswith(block + " ")]
  return _by_model(GENERATED_TABLES[title])


def _benchmark_table(prefix: str) -> List[Dict[str, str]]:
  found = tables(_read(BENCHMARK), "###")
  (title,) = [t for t in found if t.startswith(prefix)]
  return found[title]


# docs/benchmark.md's column -> the generated page's.
REFERENCE_COLUMNS = {"speed vs V (mesh)": "speed vs V (mesh)",
                     "decode vs V (mesh)": "decode vs V (mesh)",
                     "step peak vs V (mesh)": "peak vs V (mesh)",
                     "params": "params",
                     "GFLOP/step": "GFLOP/step", "MFU": "MFU"}


def test_benchmarks_reference_table_is_the_generated_one():
  generated = _generated("reference 512x4")
  rows = [r for r in _benchmark_table("Reference shape 512 x 4")
          if not r["speed vs V (mesh)"].startswith("not run")]
  assert rows
  for row in rows:
    for column, source in REFERENCE_COLUMNS.items():
      assert row[column] == generated[row["model"]][source], (
          row["model"], column)


def test_benchmarks_length_sweep_is_the_generated_one():
  rows = _benchmark_table("Length sweep (batch 1): training speed")
  lengths = [c for c in rows[0] if c != "model"]
  assert lengths
  checked = 0
  for length in lengths:
    generated = _generated("sweep %sx1" % length)
    for row in rows:
      if row[length] in ("skipped", "fails", "") or row["model"] not in (
          generated):
        continue
      speed, peak = [c.strip() for c in row[length].split("/")]
      source = generated[row["model"]]
      assert (speed, peak) == (source["speed vs V (mesh)"],
                               source["peak vs V (mesh)"]), (
          row["model"], length)
      checked += 1
  assert checked >= len(rows) * len(lengths) // 2


def _pages() -> List[str]:
  pages = glob.glob(os.path.join(conftest.REPO, "docs", "*.md"))
  return ["README.md"] + sorted(os.path.relpath(p, conftest.REPO)
                                for p in pages)


@pytest.mark.parametrize("doc", [p for p in _pages() if p != REPRODUCTION])
def test_the_reproductions_figures_are_copied_nowhere(doc):
  generated = [l.strip() for l in _read(REPRODUCTION).splitlines()
               if l.startswith("| ") and "±" in l]
  assert generated
  text = _read(doc)
  copies = [l for l in generated if l in text]
  assert not copies, "%s copies %s's rows (link to it): %s" % (
      doc, REPRODUCTION, copies[:3])


def test_the_reproduction_page_is_its_results_file_rendered(tmp_path):
  """docs/reproduction_results.md's tables are what the tool writes from
  docs/reproduction_results.json, committed beside it."""
  results = os.path.join(conftest.REPO, "docs", "reproduction_results.json")
  assert conftest.run_tool("reproduce.py", [
      "--output_dir", str(tmp_path), "--results", results,
      "--report_only"]) == 0
  generated = (tmp_path / "results.md").read_text()
  assert "presence" in generated and "neither label" in generated
  assert _read(REPRODUCTION).endswith("\n\n" + generated)
