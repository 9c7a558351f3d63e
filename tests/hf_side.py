# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Runs exported models in PyTorch, where mesh cannot be imported.

    <conftest.pytorch_python(...)> hf_side.py REQUEST.json RESULT_DIR

Run by a Python whose path has no TensorFlow, mesh, t5, gin, seqio or this
package (`conftest.pytorch_python`), so what runs is the exported directory
alone, as a PyTorch user gets it. REQUEST.json lists models:

  {"name": ..., "dir": the export, "causal": a language model,
   "tokens": a .npz with "inputs" and "targets" [batch, length] (0 pads),
   "texts": prompts, "max_length": the CLI's inputs length (an
   encoder-decoder's inputs are cut there, EOS included, as t5 cuts them),
   "new_tokens": the CLI's targets length, "encode": texts to tokenize}

and for each, RESULT_DIR/<name>.npz gets the logits of the tokens
(teacher forcing: an encoder-decoder's decoder reads the targets shifted
right; a language model reads [0] + targets) and RESULT_DIR/<name>.json
the greedy `generate()` ids and texts of the prompts, and what loading
reported. RESULT_DIR/side.json lists the top-level modules imported, those of
conftest.WITHOUT_TENSORFLOW that could be found, and the synthesizing
functions the modeling code implements.
"""

import importlib.util
import json
import os
import sys

import numpy as np
import torch
import transformers


def _text(tokenizer, ids):
  """Decoded text, without the ids mesh pads the vocabulary with."""
  return tokenizer.decode([i for i in ids if i < len(tokenizer)],
                          skip_special_tokens=True)


def run(model: dict, out_dir: str) -> set:
  """Loads one export; writes its logits, generations and loading info.

  Args:
    model: one entry of the request.
    out_dir: where to write.

  Returns:
    The names of the synthesizing functions its modeling code implements.
  """
  auto = (transformers.AutoModelForCausalLM if model["causal"]
          else transformers.AutoModelForSeq2SeqLM)
  net, info = auto.from_pretrained(model["dir"], trust_remote_code=True,
                                   output_loading_info=True)
  net.eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(
      model["dir"], trust_remote_code=True)
  tokens = np.load(model["tokens"])
  inputs = torch.tensor(tokens["inputs"], dtype=torch.long)
  targets = torch.tensor(tokens["targets"], dtype=torch.long)
  start = torch.zeros_like(targets[:, :1])
  shifted = torch.cat([start, targets[:, :-1]], dim=1)
  generated = []
  with torch.no_grad():
    if model["causal"]:
      logits = net(input_ids=shifted, use_cache=False).logits
      for text in model["texts"]:
        prompt = [0] + tokenizer(text, add_special_tokens=False).input_ids
        prompt = prompt[:1 + model["max_length"]]
        out = net.generate(torch.tensor([prompt]), do_sample=False,
                           max_length=1 + model["max_length"] +
                           model["new_tokens"])
        generated.append(out[0, len(prompt):].tolist())
    else:
      # transformers' T5 needs the mask (ours defaults to ids != 0).
      logits = net(input_ids=inputs, attention_mask=(inputs != 0).long(),
                   decoder_input_ids=shifted, use_cache=False).logits
      for text in model["texts"]:
        ids = tokenizer(text).input_ids[:model["max_length"]]
        out = net.generate(torch.tensor([ids]), do_sample=False,
                           max_new_tokens=model["new_tokens"])
        generated.append(out[0, 1:].tolist())
  np.savez(os.path.join(out_dir, model["name"] + ".npz"),
           logits=logits.float().numpy())
  with open(os.path.join(out_dir, model["name"] + ".json"), "w") as f:
    json.dump({"ids": generated,
               "encoded": [tokenizer(t).input_ids
                           for t in model.get("encode", [])],
               "texts": [_text(tokenizer, g) for g in generated],
               "loading": {k: sorted(map(str, v)) for k, v in info.items()},
               "class": type(net).__name__,
               "tokenizer": type(tokenizer).__name__}, f)
  return set(getattr(sys.modules[type(net).__module__], "FUNCTIONS", {}))


def main():
  request_path, out_dir = sys.argv[1:3]
  with open(request_path) as f:
    request = json.load(f)
  functions = set()
  for model in request["models"]:
    functions |= run(model, out_dir)
  findable = [name for name in request["absent"]
              if importlib.util.find_spec(name) is not None]
  with open(os.path.join(out_dir, "side.json"), "w") as f:
    json.dump({"modules": sorted({m.split(".")[0] for m in sys.modules}),
               "findable": findable, "functions": sorted(functions)}, f)


if __name__ == "__main__":
  main()
