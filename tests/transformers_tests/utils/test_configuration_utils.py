# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The keywords every transformers configuration takes.

`ConfigTester.check_config_arguments_init` builds the configuration with
each of these and checks that it keeps the value: PreTrainedConfig's own
fields of transformers 5.23, with values other than their defaults.
"""

config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "output_attentions": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "architectures": ["MtfSynthesizerModel"],
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}
