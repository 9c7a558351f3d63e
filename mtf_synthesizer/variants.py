# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The variants: one table from which gin checks, tests and tools are driven.

A variant is one gin file under `gin/synthesizer/` that swaps the
self-attention of every layer stack for `SynthesizerAttention` with a given
composition of synthesizing functions. Each row names the file, the paper's
label and the functions (keys of `synthesizers.BY_NAME`), in the order the
gin file lists them.

`MESH_ATTENTION` is not a variant: it is mesh's own `SelfAttention`, as in a
plain T5 model file (no variant file at all). Tools that compare against
"what T5 ships" use it; `vanilla` is the dot product inside
`SynthesizerAttention` (the same math, this package's variable layout).

Adding a synthesizing function: its class in `synthesizers.py`, its gin
file, its NumPy reference and test, and one row here.
"""

import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass(frozen=True)
class Variant:
  """One attention variant.

  Attributes:
    name: the gin file's stem (`synthesizer/<name>.gin`); the name tools and
      tests use.
    label: the paper's notation (Table 1 and Tables 2-7), e.g. "R+V".
    components: the synthesizing functions, as `synthesizers.BY_NAME` keys,
      in the gin file's order; empty for mesh's own attention.
    equation: the paper's equation numbers ("" for the dot product).
    in_paper: one of the paper's variants; the README's variant table lists
      exactly these (a test checks it). Extensions set False.
  """
  name: str
  label: str
  components: Tuple[str, ...]
  equation: str = ""
  in_paper: bool = True

  @property
  def gin_file(self) -> Optional[str]:
    """The `--gin_file` argument, or None for mesh's own attention."""
    if not self.components:
      return None
    return "synthesizer/%s.gin" % self.name

  @property
  def is_mixture(self) -> bool:
    return len(self.components) > 1


VARIANTS = (
    Variant("vanilla", "V", ("dot_product",)),
    Variant("random", "R", ("random",), "4"),
    Variant("fixed_random", "Fix", ("fixed_random",), "4"),
    Variant("factorized_random", "FR", ("factorized_random",), "7"),
    Variant("dense", "D", ("dense",), "1-3"),
    Variant("factorized_dense", "FD", ("factorized_dense",), "5-6"),
    Variant("random_dense", "R+D", ("random", "dense"), "8"),
    Variant("dense_vanilla", "D+V", ("dense", "dot_product"), "8"),
    Variant("random_vanilla", "R+V", ("random", "dot_product"), "8"),
    Variant("factorized_random_vanilla", "FR+V",
            ("factorized_random", "dot_product"), "8"),
)

# Mesh's own SelfAttention, as in T5's model files: no variant gin file.
MESH_ATTENTION = Variant("t5_attention", "V (mesh)", ())

BY_NAME = {v.name: v for v in VARIANTS}
BY_LABEL = {v.label: v for v in VARIANTS}
NAMES = tuple(v.name for v in VARIANTS)

# Gin files in `gin/synthesizer/` that are not variants: shared includes
# (leading underscore) and composable extras.
EXTRA_GIN_FILES = ("init_from_t5", "keep_decoder_vanilla",
                   "keep_encoder_vanilla", "lean_adafactor")


def get(name: str) -> Variant:
  """Returns the variant called `name` (or mesh's own attention).

  Args:
    name: a variant name, a paper label, or `MESH_ATTENTION.name`.

  Returns:
    A Variant.

  Raises:
    ValueError: for an unknown name, listing the known ones.
  """
  if name == MESH_ATTENTION.name:
    return MESH_ATTENTION
  variant = BY_NAME.get(name) or BY_LABEL.get(name)
  if variant is None:
    raise ValueError("Unknown variant %r; known: %s (or %s for mesh's own "
                     "SelfAttention)." % (name, ", ".join(NAMES),
                                          MESH_ATTENTION.name))
  return variant
