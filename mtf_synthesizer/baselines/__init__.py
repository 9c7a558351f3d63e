# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The attentions the paper compares against (docs/baselines.md).

  * `local_conv`: lightweight and dynamic convolutions (Wu et al. 2019),
    decodable;
  * `local_attention`: attention in a window (mesh's LocalSelfAttention);
  * `linformer`: Linformer's length projection (Wang et al. 2020);
  * `encoder_classifier`: decoding for the encoder-only classifiers of the
    paper's Table 7 (AG News, IMDB).

Each is a row of `mtf_synthesizer.attentions` with its gin file in
`gin/baselines/`.
"""
