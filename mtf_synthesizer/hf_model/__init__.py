# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The PyTorch model that `mtf_synthesizer.export` writes beside weights.

Importing this package imports nothing; its modeling module needs torch
(`pip install mtf_synthesizer[torch]`).
"""
