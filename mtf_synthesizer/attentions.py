# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""THE table of attentions: the paper's variants, the baselines, mesh's own.

Every gin check, test and tool that covers "every variant" or "every
baseline" enumerates this table (or a property of the synthesizing
functions, `interface.SynthesizingFunction`). One row per attention:

  * a variant (`Kind.SYNTHESIZER`): one gin file `gin/synthesizer/<name>.gin`
    that puts `SynthesizerAttention` with a composition of synthesizing
    functions (keys of `synthesizers.BY_NAME`, in the file's order) in every
    layer stack;
  * a baseline (`Kind.BASELINE`): one gin file `gin/baselines/<name>.gin`
    with another attention replacement the paper compares against, in the
    stacks where it is valid (docs/baselines.md);
  * mesh's own `SelfAttention` (`Kind.MESH`), as in a plain T5 model file:
    no gin file at all.

Names: `dot_product` is the function of eq. (1)'s comparison, the dot
product inside `SynthesizerAttention` (the variant `vanilla`, label V, this
package's variable layout); `t5_attention` is mesh's `SelfAttention`, the
same math in T5's variable layout (label "V (mesh)").
"""

import dataclasses
import enum
from typing import Optional, Tuple


class Kind(enum.Enum):
  """What a row of the table is."""
  SYNTHESIZER = "variant"
  BASELINE = "baseline"
  MESH = "mesh"


_GIN_FOLDERS = {Kind.SYNTHESIZER: "synthesizer", Kind.BASELINE: "baselines"}


@dataclasses.dataclass(frozen=True)
class Attention:
  """One attention of the table.

  Attributes:
    name: the gin file's stem (`<folder>/<name>.gin`); the name that tools,
      tests and model directories use.
    label: the paper's notation (Table 1 and Tables 2-7), e.g. "R+V", or a
      short name where the paper has none.
    kind: a variant, a baseline or mesh's own attention.
    components: a variant's synthesizing functions, as `synthesizers.BY_NAME`
      keys, in the gin file's order; empty otherwise.
    equation: a variant's equation numbers in the paper ("" for the dot
      product and for the others).
    in_paper: one of the paper's variants; docs/variants.md's table lists
      exactly these (a test checks it). Extensions set False.
    reference: a baseline's defining paper.
    paper_tables: the tables of the Synthesizer paper that report it (the
      variants of Tables 2-3 are every variant of the paper).
    causal: it can replace the self-attention of a causal stack (a decoder,
      a language model). False: encoders and encoder-only models only; in
      an encoder-decoder the decoder keeps its self-attention.
    layer: the layer class its gin file puts in the stacks, by name: a
      baseline's in `mtf_synthesizer`, mesh's `SelfAttention`; "" for the
      variants (all `SynthesizerAttention`).
  """
  name: str
  label: str
  kind: Kind = Kind.SYNTHESIZER
  components: Tuple[str, ...] = ()
  equation: str = ""
  in_paper: bool = True
  reference: str = ""
  paper_tables: Tuple[str, ...] = ()
  causal: bool = True
  layer: str = ""

  @property
  def gin_file(self) -> Optional[str]:
    """The `--gin_file` argument, or None for mesh's own attention."""
    folder = _GIN_FOLDERS.get(self.kind)
    return folder and "%s/%s.gin" % (folder, self.name)

  @property
  def is_variant(self) -> bool:
    return self.kind is Kind.SYNTHESIZER

  @property
  def is_baseline(self) -> bool:
    return self.kind is Kind.BASELINE


_WU = ("Wu et al. 2019, Pay Less Attention with Lightweight and Dynamic "
       "Convolutions")

# The paper's tables, as `jobs.experiments.TABLE_EXPERIMENTS` names them.
_ALL = ("Table 2-3", "Table 4", "Tables 5-6", "Table 7")
_T2_T6 = ("Table 2-3", "Table 4", "Tables 5-6")
_T23 = ("Table 2-3",)
_T23_T7 = ("Table 2-3", "Table 7")

ATTENTIONS = (
    # The paper's variants (Table 1; mixtures: eq. 8). V is the paper's
    # Transformer, reported in every table.
    Attention("vanilla", "V", components=("dot_product",),
              paper_tables=_ALL),
    Attention("random", "R", components=("random",), equation="4",
              paper_tables=_T2_T6),
    Attention("fixed_random", "Fix", components=("fixed_random",),
              equation="4", paper_tables=_T23),
    Attention("factorized_random", "FR", components=("factorized_random",),
              equation="7", paper_tables=_T23_T7),
    Attention("dense", "D", components=("dense",), equation="1-3",
              paper_tables=_T2_T6),
    Attention("factorized_dense", "FD", components=("factorized_dense",),
              equation="5-6", paper_tables=_T23),
    Attention("random_dense", "R+D", components=("random", "dense"),
              equation="8", paper_tables=_T23),
    Attention("dense_vanilla", "D+V", components=("dense", "dot_product"),
              equation="8", paper_tables=_T2_T6),
    Attention("random_vanilla", "R+V", components=("random", "dot_product"),
              equation="8", paper_tables=_T2_T6),
    Attention("factorized_random_vanilla", "FR+V",
              components=("factorized_random", "dot_product"), equation="8",
              paper_tables=_T23_T7),
    # The baselines.
    Attention("lightweight_conv", "LightConv", Kind.BASELINE, reference=_WU,
              paper_tables=("Table 4",), layer="DecodableLocalConvAttnBlock"),
    Attention("dynamic_conv", "DyConv", Kind.BASELINE, reference=_WU,
              paper_tables=("Table 4", "Tables 5-6"),
              layer="DecodableLocalConvAttnBlock"),
    Attention("local_attention", "Local", Kind.BASELINE,
              reference="mesh's LocalSelfAttention window (not in the "
              "paper)", layer="WindowedSelfAttention"),
    Attention("linformer", "Linformer", Kind.BASELINE,
              reference="Wang et al. 2020, Linformer: Self-Attention with "
              "Linear Complexity", paper_tables=("Table 7",), causal=False,
              layer="LinformerAttention"),
    # Mesh's own SelfAttention, as in T5's model files.
    Attention("t5_attention", "V (mesh)", Kind.MESH, layer="SelfAttention"),
)

VARIANTS = tuple(a for a in ATTENTIONS if a.kind is Kind.SYNTHESIZER)
BASELINES = tuple(a for a in ATTENTIONS if a.kind is Kind.BASELINE)
(MESH_SELF_ATTENTION,) = (a for a in ATTENTIONS if a.kind is Kind.MESH)
VARIANT_NAMES = tuple(a.name for a in VARIANTS)
BASELINE_NAMES = tuple(a.name for a in BASELINES)
BY_NAME = {a.name: a for a in ATTENTIONS}
_BY_KEY = {key: a for a in ATTENTIONS for key in (a.name, a.label)}

# Gin files in `gin/synthesizer/` that are not variants: shared includes
# (leading underscore) and composable extras.
EXTRA_GIN_FILES = ("init_from_t5", "keep_decoder_self_attention",
                   "keep_encoder_self_attention", "lean_adafactor")


def get(name: str, *kinds: Kind) -> Attention:
  """The attention called `name` (its name or its paper label).

  Args:
    name: e.g. "random_vanilla", "R+V", "linformer", "t5_attention".
    *kinds: the kinds accepted (default: any).

  Returns:
    The Attention.

  Raises:
    ValueError: for an unknown name (or one of another kind), listing the
      known ones.
  """
  attention = _BY_KEY.get(name)
  if attention is None or (kinds and attention.kind not in kinds):
    known = [a.name for a in ATTENTIONS if not kinds or a.kind in kinds]
    raise ValueError("Unknown %s %r; known: %s." % (
        " or ".join(k.value for k in kinds) if kinds else "attention", name,
        ", ".join(known)))
  return attention
