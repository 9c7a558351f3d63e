# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Decoding for the encoder-only classifiers of the paper's Table 7.

The paper compares the models on AG News and IMDB with an encoder only (no
decoder, no autoregression). In mesh that is a non-autoregressive
Unitransformer (`utils.run.model_type = 'aligned'`): inputs and targets have
the same length and the model predicts target position i from the whole
input. A classification task's targets (the label text and EOS, padded) are
read at the first positions, so the model learns to write the label there
(gin file `experiments/_encoder_classifier.gin`).

Mesh's default prediction for a Unitransformer samples autoregressively,
which an encoder cannot do; `predict_labels` takes the most likely token at
every position in one forward pass instead. Bind it with
`utils.run.predict_fn = @mtf_synthesizer.predict_labels` (the gin file does).
Scoring (`score_from_*.gin`) calls the same hook and is not supported with it.
"""

import gin
import mesh_tensorflow as mtf
from mesh_tensorflow.transformer import transformer
import tensorflow.compat.v1 as tf


@gin.configurable(module="mtf_synthesizer")
def predict_labels(model: transformer.Unitransformer,
                   features: dict,
                   variable_dtype: mtf.VariableDType) -> mtf.Tensor:
  """Predicts every target position of a non-autoregressive model at once.

  Args:
    model: a Unitransformer with `autoregressive=False`.
    features: mtf features; "inputs" is [batch, length].
    variable_dtype: the variables' dtype.

  Returns:
    An int32 Tensor [batch, length]: the argmax token at each position (mesh
    cuts the decodes after the first EOS).

  Raises:
    ValueError: for an autoregressive model.
  """
  if model.autoregressive:
    raise ValueError(
        "predict_labels is for encoder-only models (utils.run.model_type = "
        "'aligned'); this model is autoregressive.")
  logits, _ = model.call_simple(
      inputs=features["inputs"], targets=None, compute_loss=False,
      mode=tf.estimator.ModeKeys.PREDICT, variable_dtype=variable_dtype)
  return mtf.argmax(logits, logits.shape.dims[-1])
