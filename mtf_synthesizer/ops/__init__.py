# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The mtf operations of the package, each with its gradient, written once.

  * `positions`: positions in packed segments; tables read at positions
    (R's rows, D's columns); decoding-state writes;
  * `softmax`: the attention's softmax and its gradient;
  * `products`: sums of products, per-head scaling and FD's outer product,
    with gradients that form no product-sized temporary;
  * `order`: waits that bound what is live at once;
  * `slices`: the TF functions on one device's slice that they share.

`synthesizers.py` and `layer.py` compose these; they hold no lowering code.
"""
