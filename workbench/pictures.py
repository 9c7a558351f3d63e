# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Pictures of the attention of trained Synthesizer models and mesh's.

The library of `tools/attention_pictures.py`: finds a checkpoint's
attention layers (`attention_layers`), computes their attention
(`attention_maps`) and writes PNGs (matplotlib, Agg backend):

  synthetic_<model>.png   softmax(R) (R, Fix) or softmax(R1 R2^T) (FR) per
                          layer and head, the paper's pictures of learned
                          synthetic attention; truncated to `length`, with
                          the causal mask in decoder stacks.
  input_<model>.png       the attention weights on a text, per layer and
                          head, for every model (input-dependent or not).
  histograms.png          histograms of those weights per layer, one column
                          per model (synthesizer and mesh's side by side).
  mixture_<model>.png     the mixture weights alpha per layer and head.

The functions and their names come from the variant table and the NumPy
reference: a synthesizing function added there is drawn with no edit here.
"""

import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from workbench import attention_layers
from workbench import attention_maps

DEFAULT_TEXT = "The list.sort() method sorts the list in place."



def _plt():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _heatmap_grid(num_panels: int, columns: int
                  ) -> Tuple[int, int, Tuple[float, float]]:
  """(columns, rows, figure size in inches) of a plot_heatmaps picture."""
  columns = min(columns, num_panels)
  rows = int(math.ceil(num_panels / columns))
  # Inches that are exact binary fractions, so pixels are exact too.
  return columns, rows, (4.5 * columns, 4.0 * rows + 0.5)


def heatmap_size(num_panels: int, columns: int = 4,
                 dpi: int = 100) -> Tuple[int, int]:
  """The (width, height) in pixels of a plot_heatmaps picture."""
  width, height = _heatmap_grid(num_panels, columns)[2]
  return int(width * dpi), int(height * dpi)


def plot_heatmaps(panels: Sequence[Tuple[str, np.ndarray, bool]], path: str,
                  title: str, tick_labels: Optional[Sequence[str]] = None,
                  columns: int = 4, dpi: int = 100) -> str:
  """Writes a grid of [query, memory] heatmaps to `path`.

  Masked (future) cells of causal panels are white. The colour scale of each
  panel runs from its smallest to its 99th-percentile visible weight, so
  that a few large weights (e.g. row 0 of a causal panel, which is 1) do not
  hide the rest; the colour bar gives the values.

  Args:
    panels: (panel title, [length, length] weights, causal).
    path: the PNG to write.
    title: the figure title.
    tick_labels: token labels for both axes (up to 64 tokens).
    columns: panels per row.
    dpi: resolution.

  Returns:
    path.
  """
  plt = _plt()
  columns, rows, inches = _heatmap_grid(len(panels), columns)
  fig, axes = plt.subplots(rows, columns, figsize=inches, squeeze=False)
  for ax in axes.flat[len(panels):]:
    ax.axis("off")
  cmap = plt.get_cmap("viridis").copy()
  cmap.set_bad("white")
  for ax, (name, weights, causal) in zip(axes.flat, panels):
    length = weights.shape[-1]
    visible = (attention_maps.causal_mask(length) if causal
               else np.ones(weights.shape, bool))
    shown = np.ma.masked_where(~visible, weights)
    image = ax.imshow(shown, cmap=cmap, interpolation="nearest",
                      vmin=float(np.min(weights[visible])),
                      vmax=float(np.percentile(weights[visible], 99)))
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("memory position j (attended to)", fontsize=8)
    ax.set_ylabel("query position i", fontsize=8)
    if tick_labels is not None and len(tick_labels) <= 64:
      ticks = np.arange(len(tick_labels))
      ax.set_xticks(ticks, tick_labels, fontsize=6, rotation=90,
                    family="monospace")
      ax.set_yticks(ticks, tick_labels, fontsize=6, family="monospace")
    else:
      ax.tick_params(labelsize=7)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, extend="max")
    bar.ax.tick_params(labelsize=6)
  fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path


def plot_histograms(models: Dict[str, Dict[str, Tuple[str, np.ndarray]]],
                    path: str, title: str, bins: int = 40,
                    dpi: int = 100) -> str:
  """Histograms of attention weights per layer, one column per model.

  Args:
    models: model name -> {layer label -> (layer kind, weights [heads, L, L])}.
      Entries that are exactly 0 because of the causal mask are left out.
    path: the PNG to write.
    title: the figure title.
    bins: histogram bins over [0, 1].
    dpi: resolution.

  Returns:
    path.
  """
  plt = _plt()
  labels = []
  for per_layer in models.values():
    labels += [l for l in per_layer if l not in labels]
  fig, axes = plt.subplots(len(labels), len(models),
                           figsize=(4.0 * len(models), 2.5 * len(labels) + 0.5),
                           squeeze=False, sharex=True)
  edges = np.linspace(0.0, 1.0, bins + 1)
  for col, (model, per_layer) in enumerate(models.items()):
    for row, label in enumerate(labels):
      ax = axes[row, col]
      if label not in per_layer:
        ax.axis("off")
        continue
      kind, weights = per_layer[label]
      length = weights.shape[-1]
      causal = attention_maps.is_causal_stack(label.split()[0])
      visible = np.broadcast_to(
          attention_maps.causal_mask(length) if causal
          else np.ones((length, length), bool), weights.shape)
      ax.hist(weights[visible], bins=edges, color="C%d" % col, log=True)
      ax.set_title("%s (%s): %s" % (model, kind, label), fontsize=8)
      ax.tick_params(labelsize=7)
      if row == len(labels) - 1:
        ax.set_xlabel("attention weight", fontsize=8)
      if col == 0:
        ax.set_ylabel("count (log)", fontsize=8)
  fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path


def plot_mixture_weights(alphas: Sequence[Tuple[str, List[str], np.ndarray]],
                         path: str, title: str, dpi: int = 100) -> str:
  """Bar charts of alpha per head, one panel per layer.

  Args:
    alphas: (layer label, component short names, alpha [components, heads]).
    path: the PNG to write.
    title: the figure title.
    dpi: resolution.

  Returns:
    path.
  """
  plt = _plt()
  fig, axes = plt.subplots(1, len(alphas), figsize=(3.5 * len(alphas), 3.5),
                           squeeze=False)
  for ax, (label, names, alpha) in zip(axes.flat, alphas):
    heads = alpha.shape[1]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
      bars = ax.bar(np.arange(heads) + (i - (len(names) - 1) / 2) * width,
                    alpha[i], width, label=name)
      ax.bar_label(bars, fmt="%.4f", fontsize=6)
    ax.set_xticks(np.arange(heads), ["head %d" % h for h in range(heads)],
                  fontsize=7)
    ax.set_ylim(0.0, 1.0)
    ax.axhline(1.0 / len(names), color="gray", lw=0.6, ls="--")
    ax.set_title(label, fontsize=9)
    ax.set_ylabel("alpha", fontsize=8)
    ax.legend(fontsize=7)
  fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path


# --------------------------------------------------------------------- main


def _safe(name: str) -> str:
  return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def draw(models: Sequence[Tuple[str, str]], output_dir: str, text: str,
         length: int = 64, causal: bool = True, run_model: bool = True,
         dpi: int = 100) -> List[str]:
  """Writes every picture that applies to the models; returns the paths.

  Args:
    models: (name, model_dir or checkpoint path).
    output_dir: where the PNGs go (created).
    text: the input text for input-dependent attention.
    length: positions shown by the synthetic-attention pictures.
    causal: mask decoder stacks' synthetic attention causally.
    run_model: all layers through mesh (True) or layer 0 in NumPy only.
    dpi: resolution.

  Returns:
    The PNG paths written.
  """
  os.makedirs(output_dir, exist_ok=True)
  ids = attention_maps.encode_text(text)
  tokens = attention_maps.decode_ids(ids)
  written = []
  histograms = {}
  for name, path in models:
    variables = attention_layers.load_variables(path)
    model_dir = attention_layers.model_dir_of(path)
    config_path = os.path.join(model_dir, "operative_config.gin")
    config = (open(config_path).read() if os.path.exists(config_path)
              else None)
    layers = attention_layers.find_attention_layers(variables, config)
    if not layers:
      raise ValueError("No attention layers in %s." % path)
    max_length = attention_maps.max_positions(variables, layers)
    if max_length is not None and len(ids) > max_length:
      raise ValueError("The text is %d tokens (with EOS); %s holds %d "
                       "positions." % (len(ids), name, max_length))
    # 1. Input-independent synthetic attention.
    panels = []
    for layer in layers:
      for c in layer.components:
        if c not in attention_layers.INPUT_INDEPENDENT:
          continue
        masked = causal and attention_maps.is_causal_stack(layer.stack)
        weights = attention_maps.synthetic_attention(variables, layer, length,
                                                     masked, c)
        for h, w in enumerate(weights):
          panels.append(("%s: %s, head %d\nsoftmax(%s)%s" % (
              name, layer.label, h,
              attention_layers.SHORT_NAMES[c],
              ", causal" if masked else ""), w, masked))
    if panels:
      written.append(plot_heatmaps(
          panels, os.path.join(output_dir, "synthetic_%s.png" % _safe(name)),
          "%s: learned synthetic attention (first %d positions, no position "
          "bias)" % (name, length), dpi=dpi))
    # 2. Attention on the text.
    if run_model:
      attention = attention_maps.model_attention(model_dir, ids,
                                  None if os.path.isdir(path) else path)
    else:
      attention = attention_maps.first_layer_attention(variables, layers, ids)
    panels, per_layer = [], {}
    for layer in layers:
      if layer.scope not in attention:
        continue
      weights = attention[layer.scope]
      per_layer[layer.label] = (layer.short_kind, weights)
      for h, w in enumerate(weights):
        panels.append(("%s (%s): %s, head %d" % (
            name, layer.short_kind, layer.label, h), w,
                        attention_maps.is_causal_stack(layer.stack)))
    written.append(plot_heatmaps(
        panels, os.path.join(output_dir, "input_%s.png" % _safe(name)),
        "%s: attention on %r (%s)" % (
            name, text if len(text) < 50 else text[:47] + "...",
            "mesh forward pass" if run_model else "layer 0, NumPy"),
        tick_labels=tokens, dpi=dpi))
    histograms[name] = per_layer
    # 3. Mixture weights.
    alphas = []
    for layer in layers:
      alpha = attention_maps.mixture_weights(variables, layer)
      if alpha is not None:
        alphas.append(("%s %s" % (name, layer.label) if layer.order_known
                       else layer.label + " (order unknown)",
                       [attention_layers.SHORT_NAMES[c]
                        for c in layer.components], alpha))
    if alphas:
      written.append(plot_mixture_weights(
          alphas, os.path.join(output_dir, "mixture_%s.png" % _safe(name)),
          "%s: mixture weights alpha per layer and head" % name, dpi=dpi))
  written.append(plot_histograms(
      histograms, os.path.join(output_dir, "histograms.png"),
      "Attention weights on the text (%s)" % (
          "all layers" if run_model else "layer 0"), dpi=dpi))
  return written
