# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The interface of a synthesizing function, apart from the functions.

  * `SynthesisInputs`: what a function may condition on in one attention
    call (the input X, the query and key projections, the positions);
  * `SynthesizingFunction`: the base class, whose `logits` is the function
    and whose properties say what it is (`synthesizers.py` holds the
    paper's functions; `layer.py` calls them);
  * `BY_NAME`: every function by name, filled as the classes are defined
    (each reads its declaration, `mtf_synthesizer.synthesizing_functions`);
  * `float32`: how every factor of the logits enters their product.
"""

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Type

import mesh_tensorflow as mtf
import tensorflow.compat.v1 as tf

from mtf_synthesizer import synthesizing_functions as declarations
from mtf_synthesizer.ops import positions as positions_lib
from mtf_synthesizer.ops import products

# Names of the max_length-sized dimensions of the position-indexed tables.
QUERY_POSITIONS = "synth_query_positions"
MEMORY_POSITIONS = "synth_memory_positions"


@dataclasses.dataclass(frozen=True)
class SynthesisInputs:
  """What a synthesizing function may condition on, for one attention call.

  Attributes:
    x: the layer input X: batch dims, the length dim (absent in incremental
      decoding) and the model dim.
    model_dim: the model (channel) dimension of x.
    heads_dims: the query heads dimensions ([] when num_heads == 1).
    length_dim: the query length dimension; None in incremental decoding,
      where x holds one position per example.
    memory_length_dim: the key/value length dimension.
    query_positions: None when the queries sit at positions 0..length-1;
      otherwise an int tensor (batch dims [+ length]) giving each query's
      position inside its own segment.
    memory_positions: None when memory positions are 0..memory_length-1;
      otherwise an int tensor (batch dims + memory_length).
    max_length: N, the size of the position-indexed parameters.
    key_dim: the per-head width of queries and keys (d_kv).
    variable_dtype: a mtf.VariableDType.
    queries: F_Q(X), per head, when the layer computes it (else None).
    keys: F_K(X) over memory, when the layer computes it (else None).
    write_summaries: add scalar summaries (training only); see
      `Mixture.weights`.
  """
  x: mtf.Tensor
  model_dim: mtf.Dimension
  heads_dims: List[mtf.Dimension]
  length_dim: Optional[mtf.Dimension]
  memory_length_dim: mtf.Dimension
  query_positions: Optional[mtf.Tensor]
  memory_positions: Optional[mtf.Tensor]
  max_length: int
  key_dim: mtf.Dimension
  variable_dtype: mtf.VariableDType
  queries: Optional[mtf.Tensor] = None
  keys: Optional[mtf.Tensor] = None
  write_summaries: bool = False

  @property
  def mesh(self) -> mtf.Mesh:
    return self.x.mesh

  @property
  def num_heads(self) -> int:
    return mtf.Shape(self.heads_dims).size

  @property
  def batch_dims(self) -> List[mtf.Dimension]:
    """The dims of x other than the length and model dims."""
    return [d for d in self.x.shape.dims
            if d not in (self.length_dim, self.model_dim)]

  def at_query_positions(self, table: mtf.Tensor) -> mtf.Tensor:
    """A table's QUERY_POSITIONS dim read at the queries' positions.

    Args:
      table: a Tensor with the QUERY_POSITIONS dim (size max_length).

    Returns:
      The table truncated to the length dim, or gathered at
      `query_positions`.
    """
    return positions_lib.select_positions(
        table, table.shape.get_dim_by_name(QUERY_POSITIONS),
        self.query_positions, self.length_dim, self.batch_dims)

  def at_memory_positions(self, table: mtf.Tensor) -> mtf.Tensor:
    """A table's MEMORY_POSITIONS dim read at the memory's positions.

    Args:
      table: a Tensor with the MEMORY_POSITIONS dim (size max_length).

    Returns:
      The table truncated to the memory length dim, or gathered at
      `memory_positions`.
    """
    return positions_lib.select_positions(
        table, table.shape.get_dim_by_name(MEMORY_POSITIONS),
        self.memory_positions, self.memory_length_dim, self.batch_dims)

  def logits_shape(self, tensors: Sequence[mtf.Tensor],
                   reduced_dims: Sequence[mtf.Dimension] = ()) -> mtf.Shape:
    """The layout of logits: batch dims, heads dims, length, memory_length.

    The dims of `tensors` other than `reduced_dims`, ordered so that batch
    and heads lead and the two length dims come last: TF's einsum then runs
    the products with the values as matmuls batched over batch and heads,
    without transposing a [length, memory_length] tensor, and the softmax
    reduces the innermost dim.

    Args:
      tensors: the tensors whose dims the logits carry.
      reduced_dims: dims to leave out (those an einsum contracts).

    Returns:
      A mtf.Shape.
    """
    dims = []
    for t in tensors:
      dims += [d for d in t.shape.dims
               if d not in dims and d not in reduced_dims]

    def rank(d):
      if d in self.batch_dims:
        return 0
      if d == self.length_dim:
        return 2
      return 3 if d == self.memory_length_dim else 1

    return mtf.Shape(sorted(dims, key=rank))  # stable: keeps ties in order


def uniform(limit: float) -> tf.keras.initializers.Initializer:
  return tf.random_uniform_initializer(-limit, limit)


def fan_in_normal(fan_in: int) -> tf.keras.initializers.Initializer:
  return tf.random_normal_initializer(stddev=fan_in ** -0.5)


# Every synthesizing function by its name, in the order of definition;
# filled in as the classes are defined (SynthesizingFunction.__init_subclass__).
BY_NAME: Dict[str, Type["SynthesizingFunction"]] = {}


class SynthesizingFunction:
  """Base class: computes attention logits per head.

  Subclasses set `name` (their variable scope); their properties are their
  declaration's (`synthesizing_functions.FUNCTIONS[name]`, set on the class
  when it is defined), which the tests and tools select functions by (never
  by lists of names):

    * `needs_queries`, `needs_keys`: they read the layer's query and key
      projections (D's queries with `share_query_projection`: its
      declaration's `reads_queries` of the instance's settings);
    * `indexes_positions`: their logits read weights indexed by token
      position (a table over positions, or a projection onto them), which
      packed examples index by the position inside each segment;
    * `input_independent`: their logits are a table of positions that does
      not read the input (R, Fix, FR: "nothing (global)" in Table 1);
    * `trainable`: their variables are trained (False: no gradient and no
      optimizer slot, as Fix's table);
    * `marker_variable`: their first variable, under their scope; its
      presence in a checkpoint shows that a layer uses them (`marker()`);
    * `export_ranks`: for a function outside the paper's (whose variables
      Table 1's reference gives, `core/reference.variable_shapes`), the
      rank of each per-head variable with its heads axis, by its local
      name (a one-head model's checkpoint leaves that axis out; the
      PyTorch export puts it back).

  A subclass with its own `name` is registered in `BY_NAME` when it is
  defined (Mixture is not: it composes the others); its name must be
  declared first (a function from outside the package:
  `synthesizing_functions.register`). Its settings are attributes of the
  same names, checked by `declared_setting`.
  """
  name = "synthesizer"
  declaration: Optional[declarations.Function] = None
  needs_keys = False
  indexes_positions = True
  input_independent = False
  trainable = True
  marker_variable = ""
  export_ranks: Dict[str, int] = {}
  # The facts of a function that its declaration gives.
  _DECLARED = ("needs_keys", "indexes_positions", "input_independent",
               "trainable", "marker_variable")

  def __init_subclass__(cls, register: bool = True, **kwargs):
    super().__init_subclass__(**kwargs)
    if register and "name" in cls.__dict__:
      declaration = declarations.FUNCTIONS.get(cls.name)
      if declaration is None:
        raise ValueError(
            "synthesizing function %r is not declared (%s): declare it in "
            "mtf_synthesizer/synthesizing_functions.py, or, outside the "
            "package, with synthesizing_functions.register" % (
                cls.name, ", ".join(declarations.FUNCTIONS)))
      cls.declaration = declaration
      for fact in cls._DECLARED:
        setattr(cls, fact, getattr(declaration, fact))
      BY_NAME[cls.name] = cls

  @classmethod
  def declared_setting(cls, name: str, value: Any) -> Any:
    """A setting's value, checked as its declaration says.

    Args:
      name: the setting.
      value: its value.

    Returns:
      value.

    Raises:
      ValueError: naming the class, the setting, the value and what would
        be valid.
    """
    return cls.declaration.setting(name).check(value, cls.__name__)

  def settings(self) -> Dict[str, Any]:
    """Each declared setting's value in this instance, by name."""
    if self.declaration is None:
      return {}
    return {s.name: getattr(self, s.name)
            for s in self.declaration.settings}

  @property
  def needs_queries(self) -> bool:
    """It reads the layer's queries F_Q(X), with its settings."""
    return self.declaration is not None and self.declaration.reads_queries(
        self.settings())

  @classmethod
  def marker(cls) -> str:
    """The variable (local to the attention layer) that shows the function.

    Returns:
      E.g. "random/R".
    """
    return "%s/%s" % (cls.name, cls.marker_variable)

  def export_settings(self, max_length: int) -> Dict[str, Any]:
    """The settings the PyTorch export needs to rebuild the function.

    Written into the exported config beside the function's name; the
    PyTorch model's function of the same name reads them.

    Args:
      max_length: N, the layer's max_length.

    Returns:
      A JSON-serializable dict (empty when the weights' shapes say all).
    """
    del max_length
    return {}

  def logits(self, inputs: SynthesisInputs,
             scale: Optional[mtf.Tensor] = None) -> mtf.Tensor:
    """Returns float32 logits, times `scale` if given.

    Args:
      inputs: a SynthesisInputs.
      scale: an optional float32 factor per head (a mixture weight). Each
        function applies it to its cheapest factor (a table without batch
        dimension, the queries, ...), never to the full logits.

    Returns:
      A float32 Tensor whose dims are a subset of batch dims + heads dims +
      [length_dim] + [memory_length_dim]; it always has memory_length_dim.
    """
    raise NotImplementedError

  def __call__(self, inputs: SynthesisInputs,
               scale: Optional[mtf.Tensor] = None) -> mtf.Tensor:
    with tf.variable_scope(self.name):
      return mtf.cast(self.logits(inputs, scale), tf.float32)


def float32(x: mtf.Tensor,
             scale: Optional[mtf.Tensor] = None) -> mtf.Tensor:
  """x cast to float32, times the float32 `scale` when one is given.

  Every factor of the logits goes through here before its product, so that
  the logits and the mixture weights are computed in float32 whatever the
  activation dtype (bfloat16 on TPU). mtf.cast adds no op when x is already
  float32.

  Args:
    x: a Tensor.
    scale: an optional float32 Tensor (a mixture weight per head).

  Returns:
    A float32 Tensor.
  """
  x = mtf.cast(x, tf.float32)
  if scale is None:
    return x
  return products.scaled(x, mtf.cast(scale, tf.float32))


