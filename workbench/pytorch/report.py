# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch benchmark's report: a JSON-serializable dict and its markdown.

`make_report` gathers what a run measured of each model, with the ratios to T5
and to V and the model-FLOPs utilization (a training step's FLOPs per
second over the run's matmul peak); `markdown` writes it as a header of
facts (device, versions, dims, settings) and one table row a model.
"""

import dataclasses
import datetime
import platform
import statistics
from typing import Any, Dict, List, Optional

import torch
import transformers

from workbench import checkout
from workbench.pytorch import measure
from workbench.pytorch import models as bench_models

MIB = 2**20

def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
  return a / b if a and b else None


def make_report(entries: List[measure.Entry], dims: bench_models.Dims,
                settings: bench_models.Settings, rounds: int,
                device: torch.device, command: Optional[str],
                peak: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
  """The report of what the entries measured so far.

  Args:
    entries: the models, in the report's order (T5 and V among them).
    dims: the sizes.
    settings: how they were measured.
    rounds: the rounds run.
    device: where.
    command: the command line, or None.
    peak: `measure.matmul_peak`'s, or None: no MFU.

  Returns:
    The report: see `benchmark.run`.
  """
  results = []
  for entry in entries:
    step = statistics.median(entry.step_s) if entry.step_s else None
    tokens_per_s = (entry.generated / statistics.median(entry.generate_s)
                    if entry.generate_s else None)
    train_flops = sum(entry.train_flops.values()) or None
    mfu = None
    if step and train_flops and peak:
      mfu = train_flops / step / peak["flops_per_s"]
    results.append({
        "label": entry.label,
        "model": ("transformers T5ForConditionalGeneration"
                  if entry.label == bench_models.T5 else
                  "MtfSynthesizerForConditionalGeneration"),
        "components": list(entry.components),
        "params": sum(p.numel() for p in entry.model.parameters()),
        "step_s": step,
        "step_s_all": entry.step_s,
        "train_steps_per_s": 1.0 / step if step else None,
        "generate_s_all": entry.generate_s,
        "generate_tokens_per_s": tokens_per_s,
        "peak_bytes": entry.peak_bytes,
        "saved_bytes": entry.saved_bytes,
        "train_ops": entry.train_ops,
        "decode_ops_per_step": entry.decode_ops_per_step,
        "train_flops": train_flops,
        "train_flops_terms": dict(entry.train_flops),
        "mfu": mfu,
        "state_bytes": measure.state_bytes(entry.model, entry.optimizer),
        "loss_first": entry.losses[0] if entry.losses else None,
        "loss_last": entry.losses[-1] if entry.losses else None,
        "first_step_s": entry.first_step_s,
        "first_generate_s": entry.first_generate_s,
        "error": entry.error,
    })
  by_label = {r["label"]: r for r in results}
  for result in results:
    for key in ("train_steps_per_s", "generate_tokens_per_s", "peak_bytes",
                "saved_bytes", "train_ops", "decode_ops_per_step"):
      for ref in (bench_models.T5, bench_models.V):
        result["%s_vs_%s" % (key, ref.lower())] = _ratio(
            result[key], by_label[ref][key])
  return {
      "device": measure.device_name(device),
      "device_type": device.type,
      "torch": torch.__version__,
      "transformers": transformers.__version__,
      "python": platform.python_version(),
      "date": datetime.date.today().isoformat(),
      "commit": checkout.commit(),
      "dims": dataclasses.asdict(dims),
      "dims_text": dims.describe(),
      "settings": dataclasses.asdict(settings),
      "rounds": rounds,
      "command": command,
      "matmul_peak": peak,
      "results": results,
  }


def _number(value: Optional[float], digits: int = 2) -> str:
  return "n/a" if value is None else "%.*f" % (digits, value)


def _times(value: Optional[float]) -> str:
  return "n/a" if value is None else "%.2fx" % value


def _flops_per_s(value: float) -> str:
  if value >= 1e12:
    return "%.1f TFLOP/s" % (value / 1e12)
  return "%.1f GFLOP/s" % (value / 1e9)


def markdown(report: Dict[str, Any]) -> str:
  """The report as markdown: a header of facts, then one table row a model.

  Args:
    report: what `run` returns.

  Returns:
    The text, ending in a newline.
  """
  settings = report["settings"]
  lines = [
      "- device: %s" % report["device"],
      "- torch %s, transformers %s, Python %s; %s; checkout %s" % (
          report["torch"], report["transformers"], report["python"],
          report["date"], report["commit"]),
      "- dims: %s" % report["dims_text"],
      "- attention implementation: %s; %s; training steps: %d timed per "
      "model after %d warmup, in %d rounds; generate(): %d timed calls per "
      "model%s%s%s" % (
          settings["attn_implementation"],
          "bf16 autocast" if report["device_type"] == "cuda" else "float32",
          settings["steps"], settings["warmup"], report["rounds"],
          settings["generate_repeats"],
          ("; torch.compile (training step%s)" % (
              "; generate()'s decoding steps"
              if settings.get("cache_implementation") == "static" else "")
           if settings.get("compile_scope", "model") == "model" else
           "; torch.compile of each repeated block (every call)")
          if settings["compile"] else "",
          "; generate() with a %s cache" % settings["cache_implementation"]
          if settings.get("cache_implementation") else "",
          "; dropout %g%s" % (
              settings.get("dropout_rate", 0.1),
              "" if settings.get("relative_bias", True) else
              "; the Synthesizer without relative bias")),
      "- saved activations: bytes one training forward saves for backward "
      "(unique storages, weights excluded)",
      "- operators: ATen operators one training forward and backward "
      "dispatch (views included; the optimizer left out), and per "
      "decoding step of one greedy generate() (DynamicCache, not compiled)",
  ]
  matmul = report.get("matmul_peak")
  if matmul:
    lines.append(
        "- MFU: model FLOPs of a training step (every matmul of forward and "
        "backward, counted from the dims) per second of its median step, "
        "over the matmul peak measured in this run: %s (%d x %d %s matmul)" %
        (_flops_per_s(matmul["flops_per_s"]), matmul["size"], matmul["size"],
         matmul["dtype"]))
  if settings["compile"]:
    lines.append(
        "- compilation (%s): seconds of each model's first training step "
        "and first generate(), compiling included: %s" % (
            "each repeated block, regional" if settings.get(
                "compile_scope", "model") == "blocks" else "the whole model",
            "; ".join("%s %s / %s" % (r["label"],
                                      _number(r.get("first_step_s"), 1),
                                      _number(r.get("first_generate_s"), 1))
                      for r in report["results"])))
  if report.get("command"):
    lines.append("- command: `%s`" % report["command"])
  if report["device_type"] != "cuda":
    lines.append("- peak memory: n/a on CPU (torch keeps no CPU allocator "
                 "statistics); state = weights, buffers and AdamW moments")
  lines += [
      "",
      "| model | functions | params (M) | train steps/s | vs T5 | vs V | "
      "MFU | generate tokens/s | vs T5 | vs V | peak MiB | vs T5 | "
      "saved MiB | vs V | state MiB | train ops | vs V | decode ops/step | "
      "vs V |",
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ]
  for r in report["results"]:
    peak = r["peak_bytes"]
    saved = r.get("saved_bytes")
    mfu = r.get("mfu")
    lines.append("| %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s "
                 "| %s | %s | %s | %.1f | %s | %s | %s | %s |" % (
                     r["label"], "+".join(r["components"]) or "(T5)",
                     r["params"] / 1e6, _number(r["train_steps_per_s"]),
                     _times(r["train_steps_per_s_vs_t5"]),
                     _times(r["train_steps_per_s_vs_v"]),
                     "n/a" if mfu is None else "%.1f%%" % (100 * mfu),
                     _number(r["generate_tokens_per_s"], 0),
                     _times(r["generate_tokens_per_s_vs_t5"]),
                     _times(r["generate_tokens_per_s_vs_v"]),
                     "n/a" if peak is None else "%.0f" % (peak / MIB),
                     _times(r["peak_bytes_vs_t5"]),
                     "n/a" if saved is None else "%.1f" % (saved / MIB),
                     _times(r.get("saved_bytes_vs_v")),
                     r["state_bytes"] / MIB,
                     _number(r.get("train_ops"), 0),
                     _times(r.get("train_ops_vs_v")),
                     _number(r.get("decode_ops_per_step"), 1),
                     _times(r.get("decode_ops_per_step_vs_v"))))
  failed = [r for r in report["results"] if r.get("error")]
  if failed:
    lines.append("")
    lines += ["- %s failed in %s" % (r["label"], r["error"]) for r in failed]
  return "\n".join(lines) + "\n"
