# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Synthesizing functions defined outside this package, imported with it.

In this package the list is empty. A saved or exported model whose
functions include one loaded by `mtf_synthesizer.hf_tools.extensions`
has its own copy of this file (`write_extensions`), which imports that
function's module from beside it: the configuration imports this file, so
the function is declared, and its class registered, wherever the model's
code is loaded, with `trust_remote_code=True` and without this package.
"""

# The modules of functions defined outside the package (file names without
# ".py"), each imported here with a relative import in a saved model's copy.
EXTENSIONS = ()
