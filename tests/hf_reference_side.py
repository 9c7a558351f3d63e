# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Checks the PyTorch model against the NumPy reference, without mesh.

    <conftest.pytorch_python(...)> hf_reference_side.py CASES.json RESULT.json

Runs where TensorFlow, mesh, gin and this package cannot be imported: the
modeling code is loaded as `transformers` loads an export (its two files in
a package of their own) and `mtf_synthesizer/core/reference.py` by its path
(it imports NumPy and the functions' declarations: the model code's copy of
them here). CASES.json lists compositions (lists of synthesizing function
names). For each, with random weights, RESULT.json gets the
largest difference between:

  * "layer": the attention layer's output and `reference.layer_output`
    (eq. 3 and 8), causal and not;
  * "decoding": a language model's full pass and its step-by-step decoding
    with the key/value cache (each step reads its row of the tables);
  * "generate": an encoder-decoder's greedy `generate()` with and without
    the cache (token ids, as a count of differing ids).
"""

import importlib.util
import json
import os
import sys
import types

import numpy as np
import torch

# Run by path without tests/ on sys.path: the shared loader of the model code.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_code  # pylint: disable=g-import-not-at-top,wrong-import-position

REPO = model_code.REPO
D_MODEL, HEADS, D_KV, N = 8, 2, 4, 8
SETTINGS = {"factorized_random": {"k": 2},
            "factorized_dense": {"a": 2, "b": 4}}


def _load(path, name):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module


def _load_reference(path):
  """reference.py, its declarations the model code's copy of them.

  The reference imports `mtf_synthesizer.synthesizing_functions`, which
  imports the standard library only; here the model code's copy of that
  file stands for it while the reference loads, so that the package is
  never imported.
  """
  package = types.ModuleType("mtf_synthesizer")
  package.synthesizing_functions = model_code.load("synthesizing_functions")
  sys.modules["mtf_synthesizer"] = package
  try:
    return _load(path, "reference_alone")
  finally:
    del sys.modules["mtf_synthesizer"]


def _config(modeling, names, causal_lm=False, **fields):
  """A tiny configuration whose stacks compose `names`."""
  return modeling.MtfSynthesizerConfig(
      vocab_size=16, d_model=D_MODEL, d_kv=D_KV, d_ff=16, num_layers=2,
      num_heads=HEADS, feed_forward_proj="gated-gelu", dropout_rate=0.0,
      encoder_synthesizers=names, decoder_synthesizers=names,
      synthesizer_max_length=N,
      factorized_random_k=SETTINGS["factorized_random"]["k"],
      factorized_dense_factors=(SETTINGS["factorized_dense"]["a"],
                                SETTINGS["factorized_dense"]["b"]),
      is_encoder_decoder=not causal_lm, **fields)


def mesh_variables(attention):
  """The layer's weights in mesh's names and layouts (reference.py's)."""
  out = {}
  for name, tensor in list(attention.named_parameters()) + list(
      attention.named_buffers()):
    value = tensor.detach().double().numpy()
    parts = name.split(".")
    if parts[0] in ("q", "k", "v", "o"):
      out[parts[0]] = value.T
    elif parts[0] == "alpha_logits":
      out["mixture/alpha_logits"] = value
    elif parts[1] == "w1":  # Linear [heads * hidden, d_model]
      if parts[2] == "weight":
        out[parts[0] + "/w1"] = value.T.reshape(D_MODEL, HEADS, -1)
      else:
        out[parts[0] + "/b1"] = value.reshape(HEADS, -1)
    else:
      out["/".join(parts)] = value
  return out


def _randomize(module, seed):
  generator = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for tensor in list(module.parameters()) + list(module.buffers()):
      tensor.copy_(torch.randn(tensor.shape, generator=generator))


def layer_difference(modeling, reference, names):
  attention = modeling.MtfSynthesizerAttention(_config(modeling, names),
                                               tuple(names))
  _randomize(attention, 0)
  variables = mesh_variables(attention)
  x = torch.randn(2, N - 1, D_MODEL, generator=torch.Generator().manual_seed(1))
  worst = 0.0
  for causal in (False, True):
    t = x.shape[1]
    positions = modeling.Positions(0, t, t)
    mask = None
    if causal:
      mask = torch.ones(t, t, dtype=torch.bool).tril()[None, None]
    with torch.no_grad():
      ours = attention(x, None, positions, mask=mask)[0].double().numpy()
    expected = reference.layer_output(
        names, variables, x.double().numpy(), HEADS, D_KV, causal=causal)
    worst = max(worst, float(np.abs(ours - expected).max() /
                             np.abs(expected).max()))
  return worst


def decoding_difference(modeling, names):
  model = modeling.MtfSynthesizerForCausalLM(_config(modeling, names, True))
  _randomize(model, 2)
  model.eval()
  ids = torch.randint(2, 16, (2, N), generator=torch.Generator().manual_seed(3))
  with torch.no_grad():
    full = model(input_ids=ids, use_cache=False).logits
    cache, steps = None, []
    for i in range(N):
      out = model(input_ids=ids[:, i:i + 1], past_key_values=cache,
                  use_cache=True)
      cache = out.past_key_values
      steps.append(out.logits)
  stepped = torch.cat(steps, dim=1)
  return float((full - stepped).abs().max() / full.abs().max())


def generate_difference(modeling, names):
  model = modeling.MtfSynthesizerForConditionalGeneration(
      _config(modeling, names))
  _randomize(model, 4)
  model.eval()
  ids = torch.randint(2, 16, (2, N - 2),
                      generator=torch.Generator().manual_seed(5))
  ids[1, -2:] = 0  # padding
  with torch.no_grad():
    kwargs = dict(do_sample=False, max_new_tokens=N - 1, eos_token_id=None)
    cached = model.generate(ids, use_cache=True, **kwargs)
    uncached = model.generate(ids, use_cache=False, **kwargs)
  return int((cached != uncached).sum()) if cached.shape == uncached.shape \
      else -1


def main():
  cases_path, result_path = sys.argv[1:3]
  with open(cases_path) as f:
    cases = json.load(f)
  modeling = model_code.load()
  path = os.path.join(REPO, "mtf_synthesizer", "core", "reference.py")
  if not os.path.exists(path):
    path = os.path.join(REPO, "mtf_synthesizer", "reference.py")
  reference = _load_reference(path)
  out = {}
  for names in cases:
    key = "+".join(names)
    out[key] = {"layer": layer_difference(modeling, reference, names),
                "decoding": decoding_difference(modeling, names),
                "generate": generate_difference(modeling, names)}
  out["_modules"] = sorted({m.split(".")[0] for m in sys.modules})
  out["_functions"] = sorted(modeling.FUNCTIONS)
  with open(result_path, "w") as f:
    json.dump(out, f)


if __name__ == "__main__":
  main()
