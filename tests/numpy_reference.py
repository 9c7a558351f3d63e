# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The paper's equations in plain NumPy (float64), one example at a time.

Independent of mesh and of the package: written from the paper (sec. 3,
eq. 1-8) and from mesh's documented variable layouts (combined q/k/v/o
kernels are [d_model, heads * d_kv], heads-major).
"""

from typing import Dict, Optional, Sequence

import numpy as np


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
  z = z - np.max(z, axis=axis, keepdims=True)
  e = np.exp(z)
  return e / np.sum(e, axis=axis, keepdims=True)


def _head(w: np.ndarray, h: int, dk: int) -> np.ndarray:
  """Columns of a combined [d_model, heads * d_kv] kernel for head h."""
  return w[:, h * dk:(h + 1) * dk]


def synthesized_logits(kind: str, v: Dict[str, np.ndarray], x: np.ndarray,
                       h: int, dk: int, pos: np.ndarray) -> np.ndarray:
  """S_h(X) for one example: [length, length].

  Args:
    kind: random, fixed_random, factorized_random, dense, factorized_dense,
      dot_product.
    v: variables by local name (e.g. "random/R", "q").
    x: [length, d_model].
    h: head index.
    dk: per-head width.
    pos: [length] positions of the tokens inside their segments.

  Returns:
    Logits [query, memory].
  """
  if kind in ("random", "fixed_random"):
    r = v[kind + "/R"][h]                      # eq. 4
    return r[np.ix_(pos, pos)]
  if kind == "factorized_random":
    r1 = v["factorized_random/R1"][h]          # eq. 7
    r2 = v["factorized_random/R2"][h]
    return r1[pos] @ r2[pos].T
  if kind == "dense":                           # eq. 1-2
    hid = np.maximum(x @ v["dense/w1"][:, h] + v["dense/b1"][h], 0.0)
    rows = hid @ v["dense/w2"][h] + v["dense/b2"][h]
    return rows[:, pos]
  if kind == "factorized_dense":                # eq. 5-6
    p = "factorized_dense/"
    hid = np.maximum(x @ v[p + "w1"][:, h] + v[p + "b1"][h], 0.0)
    a = hid @ v[p + "wa"][h] + v[p + "ba"][h]   # [length, a]
    b = hid @ v[p + "wb"][h] + v[p + "bb"][h]   # [length, b]
    n = a.shape[1] * b.shape[1]
    cols = np.arange(n)
    c = a[:, cols % a.shape[1]] * b[:, cols // a.shape[1]]
    return c[:, pos]
  if kind == "dot_product":
    q = x @ _head(v["q"], h, dk)
    k = x @ _head(v["k"], h, dk)
    return q @ k.T
  raise ValueError(kind)


def layer_output(kinds: Sequence[str], v: Dict[str, np.ndarray],
                 x: np.ndarray, num_heads: int, dk: int,
                 causal: bool = False,
                 positions: Optional[np.ndarray] = None,
                 segment_ids: Optional[np.ndarray] = None,
                 learned_weights: bool = True) -> np.ndarray:
  """Y = sum_h softmax(sum_i alpha_i S_i + mask) G_h(X) W_o,h.  eq. 3, 8.

  Args:
    kinds: the synthesizing functions (several: a mixture).
    v: variables by local name.
    x: [batch, length, d_model].
    num_heads: heads.
    dk: per-head width.
    causal: mask j > i.
    positions: [batch, length] or None (0..length-1).
    segment_ids: [batch, length] or None.
    learned_weights: mixture weights softmax(alpha_logits), else all 1.

  Returns:
    [batch, length, d_model].
  """
  batch, length, _ = x.shape
  value_kernel = v["v"] if "v" in v else v["kv"]
  out = np.zeros_like(x, dtype=np.float64)
  for e in range(batch):
    pos = np.arange(length) if positions is None else positions[e]
    visible = np.ones((length, length), bool)
    if causal:
      visible &= np.tril(np.ones((length, length), bool))
    if segment_ids is not None:
      visible &= segment_ids[e][:, None] == segment_ids[e][None, :]
    for h in range(num_heads):
      if len(kinds) > 1 and learned_weights:
        alpha = softmax(v["mixture/alpha_logits"][:, h], axis=0)
      else:
        alpha = np.ones(len(kinds))
      s = sum(a * synthesized_logits(k, v, x[e], h, dk, pos)
              for a, k in zip(alpha, kinds))
      weights = softmax(np.where(visible, s, -1e9))
      g = x[e] @ _head(value_kernel, h, dk)      # G_h(X)
      out[e] += weights @ g @ v["o"][h * dk:(h + 1) * dk]
  return out


def numerical_grad(f, value: np.ndarray, eps: float = 1e-4) -> np.ndarray:
  """Central differences of scalar f with respect to `value` (in place)."""
  grad = np.zeros_like(value, dtype=np.float64)
  flat = value.reshape(-1)
  for i in range(flat.size):
    old = flat[i]
    flat[i] = old + eps
    up = f()
    flat[i] = old - eps
    down = f()
    flat[i] = old
    grad.reshape(-1)[i] = (up - down) / (2 * eps)
  return grad
