# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The fused attention path on a device: equal to eager, in fused kernels.

For every variant of the attention table, a small
`MtfSynthesizerForConditionalGeneration` (padded batch, T5's relative bias
shared per stack) runs a training forward and backward with
`attn_implementation="eager"` (the reference) and with "sdpa" (the fused
path), in float32 (TF32 off); the check compares the logits and every
gradient (the largest difference relative to the largest value). On CUDA the
fused run may use sdpa's flash, memory-efficient and cuDNN kernels only (the
memory-efficient one where values are narrower), so a call that would fall
back to the math kernel (which writes the logits) raises instead of running
slowly; a bf16-autocast training step and an inference forward at the
benchmark's head width (64) run under the same restriction. The CPU has
no such restriction (its kernels take no bias needing a gradient).

Needs torch and transformers only (the model code is loaded by path, as
`models.load_model_code` loads it).
"""

import contextlib
import dataclasses
from typing import Any, Dict, List, Optional

import torch

from workbench.pytorch import benchmark

# float32 on both paths: the kernels sum in another order.
TOLERANCE = 1e-4


@dataclasses.dataclass
class Result:
  """One variant's check.

  Attributes:
    label: the variant's label.
    logits: the fused logits' largest difference from eager's, relative to
      eager's largest.
    gradients: the same over every gradient (each relative to its own).
    bf16_step: a bf16-autocast training step and inference forward at head
      width 64 ran in the fused kernels, finite.
    error: why a run failed, or None.
  """
  label: str
  logits: Optional[float] = None
  gradients: Optional[float] = None
  bf16_step: bool = False
  error: Optional[str] = None

  @property
  def passed(self) -> bool:
    return (self.error is None and self.bf16_step and
            self.logits < TOLERANCE and self.gradients < TOLERANCE)


def fused_kernels_only(device: torch.device):
  """A context in which sdpa on CUDA may not use its math kernel."""
  if device.type != "cuda":
    return contextlib.nullcontext()
  backend = torch.nn.attention.SDPBackend
  return torch.nn.attention.sdpa_kernel(
      [backend.FLASH_ATTENTION, backend.EFFICIENT_ATTENTION,
       backend.CUDNN_ATTENTION])


def _model(components, device, **fields):
  modeling = benchmark.load_model_code()
  settings = dict(vocab_size=96, d_model=64, d_kv=16, d_ff=128,
                  num_layers=2, num_heads=4, dropout_rate=0.0,
                  synthesizer_max_length=24, factorized_random_k=4,
                  factorized_dense_factors=(4, 6),
                  relative_attention_num_buckets=8,
                  encoder_synthesizers=components,
                  decoder_synthesizers=components)
  settings.update(fields)
  torch.manual_seed(0)
  model = modeling.MtfSynthesizerForConditionalGeneration._from_config(  # pylint: disable=protected-access
      modeling.MtfSynthesizerConfig(**settings))
  with torch.no_grad():  # the weights mesh starts at zero, drawn
    for parameter in model.parameters():
      if not parameter.any():
        parameter.normal_()
  return model.to(device).train()


def _batch(device, vocab, batch=3, inputs=20, targets=12):
  generator = torch.Generator().manual_seed(0)
  input_ids = torch.randint(2, vocab, (batch, inputs), generator=generator)
  input_ids[1, inputs // 2:] = 0  # a padded row
  labels = torch.randint(2, vocab, (batch, targets), generator=generator)
  return {"input_ids": input_ids.to(device),
          "attention_mask": (input_ids != 0).long().to(device),
          "labels": labels.to(device)}


@contextlib.contextmanager
def _narrow_values_fused_only(device: torch.device):
  """The model's kernels for narrower values without math, on CUDA."""
  attention = benchmark.load_model_code("attention")
  backends = attention.NARROW_VALUE_BACKENDS
  if device.type == "cuda":
    attention.NARROW_VALUE_BACKENDS = [
        torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION]
  try:
    with fused_kernels_only(device):
      yield
  finally:
    attention.NARROW_VALUE_BACKENDS = backends


def _run(model, batch, implementation, device):
  model.set_attn_implementation(implementation)
  model.zero_grad(set_to_none=True)
  context = (_narrow_values_fused_only(device) if implementation == "sdpa"
             else contextlib.nullcontext())
  with context:
    out = model(**batch, use_cache=False)
    out.loss.backward()
  return out.logits.detach(), {n: p.grad.detach().clone()
                               for n, p in model.named_parameters()
                               if p.grad is not None}


def _relative(actual: torch.Tensor, expected: torch.Tensor) -> float:
  scale = float(expected.abs().max()) or 1.0
  return float((actual - expected).abs().max()) / scale


def check_variant(label: str, components, device: torch.device) -> Result:
  """Checks one variant on the device (see the module's docstring)."""
  result = Result(label)
  try:
    model = _model(components, device)
    batch = _batch(device, model.config.vocab_size)
    eager = _run(model, batch, "eager", device)
    fused = _run(model, batch, "sdpa", device)
    result.logits = _relative(fused[0], eager[0])
    if sorted(fused[1]) != sorted(eager[1]):
      raise ValueError("the paths' gradients differ in their parameters")
    result.gradients = max(_relative(fused[1][n], eager[1][n])
                           for n in eager[1])
    # The benchmark's head width under bf16 autocast, fused kernels only.
    model = _model(components, device, d_model=128, num_heads=2, d_kv=64,
                   synthesizer_max_length=64,
                   factorized_dense_factors=(8, 8))
    model.set_attn_implementation("sdpa")
    batch = _batch(device, model.config.vocab_size, batch=2, inputs=64,
                   targets=16)
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16)
                if device.type == "cuda" else contextlib.nullcontext())
    with _narrow_values_fused_only(device):
      with autocast:
        loss = model(**batch, use_cache=False).loss
      loss.backward()
      model.eval()  # inference (no gradient) takes other kernels
      with autocast, torch.no_grad():
        logits = model(**batch, use_cache=False).logits
    result.bf16_step = bool(torch.isfinite(loss.detach()) and
                            torch.isfinite(logits).all())
  except (RuntimeError, ValueError) as e:  # a kernel refused the call
    result.error = str(e).splitlines()[0][:200]
  return result


def check(device: torch.device,
          labels: Optional[List[str]] = None) -> List[Result]:
  """Checks every variant of the table (or those labelled) on the device."""
  tf32 = (torch.backends.cuda.matmul.allow_tf32,
          torch.backends.cudnn.allow_tf32)
  torch.backends.cuda.matmul.allow_tf32 = False
  torch.backends.cudnn.allow_tf32 = False
  try:
    return [check_variant(label, components, device)
            for label, components in benchmark.variants()
            if not labels or label in labels]
  finally:
    (torch.backends.cuda.matmul.allow_tf32,
     torch.backends.cudnn.allow_tf32) = tf32


def markdown(results: List[Result], device: torch.device) -> str:
  """The results as a markdown table, the device named."""
  lines = ["Fused (sdpa) against eager on %s, float32: largest difference "
           "relative to the largest value (tolerance %g)." %
           (benchmark.device_name(device), TOLERANCE), "",
           "| variant | logits | gradients | bf16 step, fused kernels | "
           "result |", "| --- | ---: | ---: | --- | --- |"]
  for r in results:
    lines.append("| %s | %s | %s | %s | %s |" % (
        r.label, "%.1e" % r.logits if r.logits is not None else "-",
        "%.1e" % r.gradients if r.gradients is not None else "-",
        "yes" if r.bf16_step else "no",
        "pass" if r.passed else "FAIL" + (": " + r.error if r.error
                                          else "")))
  return "\n".join(lines) + "\n"


def as_json(results: List[Result]) -> List[Dict[str, Any]]:
  return [dict(dataclasses.asdict(r), passed=r.passed) for r in results]
