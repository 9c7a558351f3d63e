# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The layer in plain NumPy (float64), one example at a time.

The paper's synthesizing functions and their mixture (sec. 3, eq. 1-8), the
softmax, masks, T5's relative position bias and RMS norm around them, and
the Linformer baseline (`linformer`).

Independent of mesh and of the rest of the package (it imports NumPy and the
functions' declarations, `synthesizing_functions`, which import only the
standard library): written from the paper (sec. 3, eq. 1-8), from mesh's
documented variable layouts (combined q/k/v/o kernels are [d_model, heads *
d_kv], heads-major) and from T5's relative position buckets. The tests check
the layer against it, and `tools/attention_pictures.py` computes attention
weights from checkpoints with it.

Variables are passed by their name local to the attention layer's scope,
e.g. "random/R", "q", "mixture/alpha_logits".

Adding a synthesizing function: its logits in `synthesized_logits`; its
variables and settings are its declaration's (`synthesizing_functions`),
and the settings reach the logits through `settings`.
"""

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from mtf_synthesizer import synthesizing_functions as declarations

MIXTURE_LOGITS = "mixture/alpha_logits"


def variable_shapes(kind: str, d_model: int, num_heads: int, d_kv: int,
                    max_length: int,
                    settings: Optional[Mapping[str, Any]] = None
                    ) -> Dict[str, List[Optional[int]]]:
  """Table 1: the variables a function adds to its layer, with their shapes.

  In mesh's layouts, as the function's declaration gives them
  (`synthesizing_functions.Function.variable_shapes`): combined [d_model,
  heads * d_kv] kernels for F_Q and F_K; per-head tables and projections
  otherwise (S_{h,l}: every parameter is per head). The value and output
  projections belong to the layer.

  Args:
    kind: a synthesizing function's name.
    d_model: the model width d.
    num_heads: h.
    d_kv: the per-head width (the default hidden width of D and FD).
    max_length: N.
    settings: the function's settings by name (e.g. FR's "k", FD's "a"
      and "b", D's "hidden_size" and "use_bias"); those not given take
      their declared defaults.

  Returns:
    Local variable name -> shape.
  """
  shapes = declarations.FUNCTIONS[kind].variable_shapes(
      declarations.Sizes(d_model, num_heads, d_kv, max_length), settings)
  return {name: list(shape) for name, shape in shapes.items()}


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
  """A numerically stable softmax; rows that are all -inf give zeros.

  Args:
    z: logits; -inf marks masked entries.
    axis: the axis to normalize over.

  Returns:
    An array like z whose slices along `axis` sum to one (or are zeros).
  """
  top = np.max(z, axis=axis, keepdims=True)
  top = np.where(np.isfinite(top), top, 0.0)
  e = np.exp(z - top)
  total = np.sum(e, axis=axis, keepdims=True)
  return e / np.where(total > 0, total, 1.0)


def _head(w: np.ndarray, h: int, dk: int) -> np.ndarray:
  """Columns of a combined [d_model, heads * d_kv] kernel for head h."""
  return w[:, h * dk:(h + 1) * dk]


def synthesized_logits(kind: str, v: Dict[str, np.ndarray],
                       x: Optional[np.ndarray], h: int, dk: int,
                       pos: np.ndarray,
                       settings: Optional[Mapping[str, Any]] = None
                       ) -> np.ndarray:
  """S_h(X) for one example: [length, length].

  Args:
    kind: random, fixed_random, factorized_random, dense, factorized_dense,
      dot_product.
    v: variables by local name (e.g. "random/R", "q").
    x: [length, d_model]; None for a function that does not read the input
      (R, Fix, FR).
    h: head index.
    dk: per-head width.
    pos: [length] positions of the tokens inside their segments.
    settings: the function's settings by name; those not given take their
      declared defaults (`synthesizing_functions`). The logits read those
      the variables' shapes do not say: D's and FD's use_bias, D's
      share_query_projection (relu of the layer's queries, the "q" kernel,
      stand for its first layer).

  Returns:
    Logits [query, memory].
  """
  if kind not in declarations.FUNCTIONS:
    raise ValueError("%s is not a declared synthesizing function" % kind)
  values = declarations.FUNCTIONS[kind].resolve(settings)
  if kind in ("random", "fixed_random"):
    r = v[kind + "/R"][h]                      # eq. 4
    return r[np.ix_(pos, pos)]
  if kind == "factorized_random":
    r1 = v["factorized_random/R1"][h]          # eq. 7
    r2 = v["factorized_random/R2"][h]
    return r1[pos] @ r2[pos].T
  if x is None:
    raise ValueError("%s reads the input: x is needed." % kind)

  def layer(inputs, name, out):
    """inputs @ W_<out> of head h, plus b_<out> with use_bias."""
    w = v[name + "/w" + out]
    y = inputs @ (w[:, h] if out == "1" else w[h])
    return y + v[name + "/b" + out][h] if values["use_bias"] else y

  if kind == "dense":                           # eq. 1-2
    if values["share_query_projection"]:
      hid = np.maximum(x @ _head(v["q"], h, dk), 0.0)
    else:
      hid = np.maximum(layer(x, kind, "1"), 0.0)
    return layer(hid, kind, "2")[:, pos]
  if kind == "factorized_dense":                # eq. 5-6
    hid = np.maximum(layer(x, kind, "1"), 0.0)
    a = layer(hid, kind, "a")                   # [length, a]
    b = layer(hid, kind, "b")                   # [length, b]
    n = a.shape[1] * b.shape[1]
    cols = np.arange(n)
    c = a[:, cols % a.shape[1]] * b[:, cols // a.shape[1]]
    return c[:, pos]
  if kind == "dot_product":
    q = x @ _head(v["q"], h, dk)
    k = x @ _head(v["k"], h, dk)
    return q @ k.T
  raise ValueError(kind)


def _own_variables(kind: str, v: Dict[str, np.ndarray]) -> List[np.ndarray]:
  """The variables under a function's scope, e.g. [R1, R2] of FR."""
  own = [v[n] for n in sorted(v) if n.startswith(kind + "/")]
  if not own:
    raise ValueError("no variable of %s among %s" % (kind, sorted(v)))
  return own


def max_positions(kind: str, v: Dict[str, np.ndarray]) -> int:
  """The positions N that the [heads, N, ...] tables of R, Fix or FR hold."""
  return _own_variables(kind, v)[0].shape[1]


def synthetic_logits(kind: str, v: Dict[str, np.ndarray],
                     length: int) -> np.ndarray:
  """R or R1 R2^T of a function that does not read the input.

  Args:
    kind: random, fixed_random or factorized_random.
    v: variables by local name.
    length: positions to keep; at most `max_positions`.

  Returns:
    The logits of every head at positions 0..length-1: [heads, length,
    length].
  """
  if length > max_positions(kind, v):
    raise ValueError("length %d exceeds max_length %d"
                     % (length, max_positions(kind, v)))
  pos = np.arange(length)
  return np.stack([synthesized_logits(kind, v, None, h, 0, pos)
                   for h in range(_own_variables(kind, v)[0].shape[0])])


def mixture_weights(v: Dict[str, np.ndarray]) -> Optional[np.ndarray]:
  """alpha = softmax over functions of the mixture logits (eq. 8).

  Args:
    v: variables by local name.

  Returns:
    [functions, heads], summing to one over functions; None without
    learned mixture weights.
  """
  if MIXTURE_LOGITS not in v:
    return None
  return softmax(v[MIXTURE_LOGITS], axis=0)


def attention_weights(kinds: Sequence[str], v: Dict[str, np.ndarray],
                      x: np.ndarray, num_heads: int, dk: int,
                      visible: Optional[np.ndarray] = None,
                      pos: Optional[np.ndarray] = None,
                      bias: Union[np.ndarray, float] = 0.0,
                      learned_weights: bool = True,
                      settings: Optional[Mapping[str, Mapping[str, Any]]]
                      = None) -> np.ndarray:
  """softmax(sum_i alpha_i S_i(X) + bias + mask) per head.  eq. 3, 8.

  Args:
    kinds: the synthesizing functions (several: a mixture, in the order of
      the mixture logits).
    v: variables by local name.
    x: [length, d_model], one example.
    num_heads: heads.
    dk: per-head width (of the q/k/v kernels).
    visible: [length, length] bool, False where query i may not see memory
      j; None: all visible.
    pos: [length] positions inside the segments; None: 0..length-1.
    bias: added to the logits, e.g. T5's relative position bias [heads,
      length, length].
    learned_weights: mixture weights softmax(alpha_logits), else all 1.
    settings: function name -> its settings (`synthesized_logits`); the
      declared defaults for those not given.

  Returns:
    [heads, length, length]; every row sums to one.
  """
  length = x.shape[0]
  pos = np.arange(length) if pos is None else pos
  alpha = mixture_weights(v) if len(kinds) > 1 and learned_weights else None
  logits = np.zeros((num_heads, length, length))
  for h in range(num_heads):
    for i, kind in enumerate(kinds):
      weight = 1.0 if alpha is None else alpha[i, h]
      logits[h] += weight * synthesized_logits(
          kind, v, x, h, dk, pos, (settings or {}).get(kind))
  logits = logits + bias
  if visible is not None:
    logits = np.where(visible, logits, -np.inf)
  return softmax(logits)


def layer_output(kinds: Sequence[str], v: Dict[str, np.ndarray],
                 x: np.ndarray, num_heads: int, dk: int,
                 causal: bool = False,
                 positions: Optional[np.ndarray] = None,
                 segment_ids: Optional[np.ndarray] = None,
                 learned_weights: bool = True,
                 settings: Optional[Mapping[str, Mapping[str, Any]]] = None
                 ) -> np.ndarray:
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
    settings: function name -> its settings (`synthesized_logits`).

  Returns:
    [batch, length, d_model].
  """
  batch, length, _ = x.shape
  value_kernel = v["v"] if "v" in v else v["kv"]
  out = np.zeros_like(x, dtype=np.float64)
  for e in range(batch):
    visible = np.ones((length, length), bool)
    if causal:
      visible &= causal_mask(length)
    if segment_ids is not None:
      visible &= segment_ids[e][:, None] == segment_ids[e][None, :]
    weights = attention_weights(
        kinds, v, x[e], num_heads, dk, visible,
        None if positions is None else positions[e],
        learned_weights=learned_weights, settings=settings)
    for h in range(num_heads):
      g = x[e] @ _head(value_kernel, h, dk)      # G_h(X)
      out[e] += weights[h] @ g @ v["o"][h * dk:(h + 1) * dk]
  return out


def causal_mask(length: int) -> np.ndarray:
  """[length, length] bool: True where query i may see memory j (j <= i)."""
  return np.tril(np.ones((length, length), bool))


def relative_position_bucket(relative_position: np.ndarray,
                             bidirectional: bool, num_buckets: int = 32,
                             max_distance: int = 128) -> np.ndarray:
  """T5's relative position buckets (mesh's `_relative_position_bucket`).

  Args:
    relative_position: memory position minus query position (int array).
    bidirectional: encoder (True) or causal stack (False).
    num_buckets: buckets (half for each direction when bidirectional).
    max_distance: distances from here on share the last bucket.

  Returns:
    Bucket ids like relative_position.
  """
  n = -relative_position
  ret = np.zeros_like(n)
  if bidirectional:
    num_buckets //= 2
    ret += (n < 0).astype(n.dtype) * num_buckets
    n = np.abs(n)
  else:
    n = np.maximum(n, 0)
  max_exact = num_buckets // 2
  with np.errstate(divide="ignore"):
    large = max_exact + (
        np.log(np.maximum(n, 1) / max_exact) / math.log(
            max_distance / max_exact) * (num_buckets - max_exact)).astype(
                n.dtype)
  large = np.minimum(large, num_buckets - 1)
  return ret + np.where(n < max_exact, n, large)


def relative_bias(table: np.ndarray, length: int,
                  bidirectional: bool) -> np.ndarray:
  """T5's relative position bias: [heads, length, length].

  Args:
    table: the `relative_attention_bias` variable, [heads, buckets].
    length: query and memory length (positions 0..length-1).
    bidirectional: encoder (True) or causal stack (False).

  Returns:
    The bias added to the logits of query i and memory j.
  """
  pos = np.arange(length)
  buckets = relative_position_bucket(pos[None, :] - pos[:, None],
                                     bidirectional, table.shape[-1])
  return table[:, buckets]


def rms_norm(x: np.ndarray, scale: np.ndarray,
             epsilon: float = 1e-6) -> np.ndarray:
  """mesh's layer norm: x / sqrt(mean(x^2) + epsilon) * scale (last axis)."""
  return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + epsilon) * scale


def linformer(v: Dict[str, np.ndarray], x: np.ndarray, num_heads: int,
              dk: int, nonpadding: Optional[np.ndarray] = None
              ) -> np.ndarray:
  """Linformer self-attention (Wang et al. 2020): [batch, length, d_model].

  Per head h: K' = E_h^T K_h, V' = F_h^T V_h over the length axis, then
  Y = sum_h softmax(Q_h K'^T) V' W_o,h (no 1/sqrt(d_kv): mesh folds it into
  the query kernel's initializer). Only the first `length` rows of E and F
  are used.

  Args:
    v: variables by local name: the combined kernels "q", "k", "v"
      [d_model, heads * d_kv] and "o" [heads * d_kv, d_model]; "E" [heads,
      N, k] or, shared by the heads, [N, k]; "F" like "E", absent when keys
      and values share E.
    x: [batch, length, d_model].
    num_heads: heads.
    dk: per-head width.
    nonpadding: [batch, length], 1 at real tokens and 0 at padding (their
      keys and values are zeroed before the projection); None: no padding.

  Returns:
    [batch, length, d_model].
  """
  batch, length, _ = x.shape
  e_all = v["E"]
  f_all = v.get("F", e_all)
  out = np.zeros(x.shape, np.float64)
  for b in range(batch):
    keep = (np.ones(length) if nonpadding is None
            else nonpadding[b].astype(np.float64))
    for h in range(num_heads):
      e = (e_all[h] if e_all.ndim == 3 else e_all)[:length]   # [length, k]
      f = (f_all[h] if f_all.ndim == 3 else f_all)[:length]
      q = x[b] @ _head(v["q"], h, dk)
      k = (x[b] @ _head(v["k"], h, dk)) * keep[:, None]
      val = (x[b] @ _head(v["v"], h, dk)) * keep[:, None]
      weights = softmax(q @ (e.T @ k).T)                      # [length, k]
      out[b] += weights @ (f.T @ val) @ v["o"][h * dk:(h + 1) * dk]
  return out
