# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Exports tiny models to ONNX and runs them in onnxruntime, without TF.

    <conftest.pytorch_python(...)> onnx_side.py REQUEST.json RESULT.json

Run by a Python whose path has no TensorFlow, mesh or this package
(`conftest.pytorch_python`), with the ONNX packages of
requirements-onnx.lock (the virtual environment's `onnx-site` folder, which
the Makefile fills) first on its path: their protobuf and ml_dtypes are
newer than TensorFlow allows, so they are on no other process's path.
REQUEST.json:

  {"variants": {label: [synthesizing function names]},
   "snippet": docs/pytorch.md's export block, "work": a folder}

For each variant, a tiny `MtfSynthesizerForConditionalGeneration`
(input_ids, attention_mask, decoder_input_ids -> logits) and a tiny
`MtfSynthesizerForCausalLM` (input_ids -> logits), default attention
implementation, are exported by both of torch.onnx's exporters with dynamic
batch and sequence axes: the seq2seq model's dynamo export by the documented
snippet itself, from an unpadded batch. onnxruntime runs each file at the
shape it was exported with and at a second one (another batch, other
lengths, padding).
RESULT.json:

  {"variants": {label: {"seq2seq" or "causal_lm":
                        {"dynamo" or "torchscript":
                         {"error": null or the exporter's or onnxruntime's
                          message, "max_abs_diff": [at the first shape,
                          (the documented block's run there,) at the
                          second]}}}},
   "implementation": the models' attention implementation,
   "versions": {package: version}, "protobuf_file": where protobuf came
   from, "modules": the top-level modules imported}
"""

import json
import os
import sys
import traceback
import warnings

# The ONNX packages first, before anything imports protobuf or ml_dtypes:
# the virtual environment's folder holds the interpreter's bin/ (without
# `site`, sys.prefix is the base Python's).
ONNX_SITE = os.path.join(
    os.path.dirname(os.path.dirname(sys.executable)), "onnx-site")
sys.path.insert(0, ONNX_SITE)
# Run by path without tests/ on sys.path: the shared loader of the model code.
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
import onnx
import onnxruntime
import onnxscript
import torch
import transformers
from google import protobuf

import model_code
import tiny_models

VOCAB, N = tiny_models.VOCAB, tiny_models.N
# (batch, encoder length, decoder length, padded) of the export, then of the
# check: a file traced from an unpadded batch must still read a mask.
SHAPES = ((2, 7, 6, False), (3, 5, 4, True))


def _inputs(shape, seed, causal_lm):
  """Model inputs by name; padded: the encoder's last row ends in ids 0."""
  batch, length, decoder_length, padded = shape
  generator = torch.Generator().manual_seed(seed)
  input_ids = torch.randint(2, VOCAB, (batch, length), generator=generator)
  if causal_lm:
    return {"input_ids": input_ids}
  if padded:
    input_ids[-1, length - 2:] = 0
  return {"input_ids": input_ids,
          "attention_mask": (input_ids != 0).long(),
          "decoder_input_ids": torch.randint(
              2, VOCAB, (batch, decoder_length), generator=generator)}


class CausalLogits(torch.nn.Module):
  """The causal LM's forward as ONNX sees it: input_ids -> logits."""

  def __init__(self, model):
    super().__init__()
    self.model = model

  def forward(self, input_ids):
    return self.model(input_ids=input_ids, use_cache=False).logits


class Seq2SeqLogits(torch.nn.Module):
  """The seq2seq forward for the TorchScript exporter (positional inputs)."""

  def __init__(self, model):
    super().__init__()
    self.model = model

  def forward(self, input_ids, attention_mask, decoder_input_ids):
    return self.model(input_ids=input_ids, attention_mask=attention_mask,
                      decoder_input_ids=decoder_input_ids,
                      use_cache=False).logits


def _export(model, inputs, path, dynamo, snippet):
  """Writes `path` with torch.onnx.export.

  Returns:
    (the module it exported, the documented block's onnxruntime logits or
    None).
  """
  if dynamo and "decoder_input_ids" in inputs:
    # docs/pytorch.md's block, as written: `model` and the inputs in, the
    # file "synthesizer.onnx" (in the current folder) out.
    scope = dict(model=model, **inputs)
    cwd = os.getcwd()
    os.chdir(os.path.dirname(path))
    try:
      exec(snippet, scope)  # pylint: disable=exec-used
    finally:
      os.chdir(cwd)
    os.replace(os.path.join(os.path.dirname(path), "synthesizer.onnx"), path)
    return scope["Logits"](model), scope["logits"]
  wrapper = (Seq2SeqLogits(model) if "decoder_input_ids" in inputs
             else CausalLogits(model))
  names = list(inputs)
  if dynamo:
    batch = torch.export.Dim("batch")
    length = torch.export.Dim("length", max=N)
    torch.onnx.export(wrapper, tuple(inputs.values()), path, dynamo=True,
                      input_names=names, output_names=["logits"],
                      dynamic_shapes={"input_ids": {0: batch, 1: length}})
  else:
    axes = {name: {0: "batch", 1: name.replace("_ids", "") + "_length"}
            for name in names}
    axes["attention_mask"] = axes["input_ids"] = {0: "batch", 1: "length"}
    torch.onnx.export(wrapper, tuple(inputs.values()), path, dynamo=False,
                      input_names=names, output_names=["logits"],
                      dynamic_axes={n: axes[n] for n in names})
  return wrapper, None


def _check(names, causal_lm, dynamo, snippet, folder):
  """Exports one model; its logits' differences at the two shapes."""
  modeling = model_code.load()
  torch.manual_seed(0)
  head = (modeling.MtfSynthesizerForCausalLM if causal_lm
          else modeling.MtfSynthesizerForConditionalGeneration)
  model = tiny_models.perturb(head(tiny_models.config(
      names, causal_lm, modeling))).eval()
  path = os.path.join(folder, "%s_%s.onnx" % (
      "causal_lm" if causal_lm else "seq2seq",
      "dynamo" if dynamo else "torchscript"))
  shapes = [_inputs(shape, seed, causal_lm)
            for seed, shape in enumerate(SHAPES)]
  try:
    # As a user would, outside no_grad (which changes the SDPA kernel the
    # dynamo exporter traces).
    wrapper, documented = _export(model, shapes[0], path, dynamo, snippet)
    session = onnxruntime.InferenceSession(
        path, providers=["CPUExecutionProvider"])
    diffs = []
    for inputs in shapes:
      with torch.no_grad():
        expected = wrapper(**inputs).numpy()
      (got,) = session.run(None, {k: v.numpy() for k, v in inputs.items()})
      assert got.shape == expected.shape, (got.shape, expected.shape)
      diffs.append(float(np.abs(got - expected).max()))
      if documented is not None:  # the block's own run, at the first shape
        diffs.append(float(np.abs(documented - expected).max()))
        documented = None
  except Exception:  # pylint: disable=broad-except
    return {"error": traceback.format_exc()[-3000:], "max_abs_diff": None}
  # pylint: disable=protected-access
  implementation = model.config._attn_implementation
  # pylint: enable=protected-access
  return {"error": None, "max_abs_diff": diffs,
          "implementation": implementation}


def main(request_path: str, result_path: str) -> None:
  """Exports and checks every variant of the request.

  Args:
    request_path: REQUEST.json.
    result_path: where RESULT.json goes.
  """
  with open(request_path) as f:
    request = json.load(f)
  torch.set_num_threads(1)
  warnings.simplefilter("ignore")
  results, implementations = {}, set()
  for label, names in request["variants"].items():
    folder = os.path.join(request["work"], label.replace("+", "_"))
    os.makedirs(folder, exist_ok=True)
    results[label] = {}
    for causal_lm in (False, True):
      head = "causal_lm" if causal_lm else "seq2seq"
      results[label][head] = {}
      for dynamo in (True, False):
        checked = _check(names, causal_lm, dynamo, request["snippet"], folder)
        implementations.add(checked.pop("implementation", None))
        results[label][head]["dynamo" if dynamo else "torchscript"] = checked
  implementations.discard(None)
  with open(result_path, "w") as f:
    json.dump({
        "variants": results,
        "implementation": sorted(implementations),
        "versions": {
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "onnxscript": onnxscript.__version__,
            "protobuf": protobuf.__version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__},
        "protobuf_file": protobuf.__file__,
        "modules": sorted({m.split(".")[0] for m in sys.modules}),
    }, f, indent=1)


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
