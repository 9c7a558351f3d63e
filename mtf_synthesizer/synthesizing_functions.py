# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The synthesizing functions declared once, for every side that runs them.

One `Function` per synthesizing function of Tay et al. (sec. 3, Table 1):
its name, the paper's label and equation, its settings (each a `Setting`
with its default, its kind and the PyTorch configuration field it fills),
what it reads (the layer's queries and keys, a table of `max_length`
positions, the input), whether it is trained, and its variables (Table 1,
in mesh's layouts) with their initializers. `FUNCTIONS` holds them by name,
in the order of the paper's table as the package defines its classes.

Every side reads these declarations instead of writing the facts again:
mesh's classes (`core/synthesizers.py`: their settings' defaults and checks,
their properties), the PyTorch model (`hf_model/`: the configuration's
fields and their defaults, `FUNCTION_SETTINGS`, the modules' properties and
initializers), the NumPy reference (`core/reference.py`: the settings of
the logits, `variable_shapes`), the JAX model (`flax_model/`) and the tests
(every setting at a value other than its default, on every side).

The module imports nothing but the standard library, so that each side's
environment (TensorFlow and mesh; torch and transformers; JAX) imports it.
The PyTorch model's folder, which an export writes beside the weights and
transformers loads with `trust_remote_code` where this package is not
installed, holds it as `hf_model/synthesizing_functions_mtf_synthesizer.py`:
a symbolic link to this file, imported relatively there. One file thus
serves both: transformers' closure of relative imports, the export and
`save_pretrained` copy it (they follow the link), and no second copy can
drift from this one. Python imports the two paths as two modules; each
side reads its own (mesh and JAX this one, PyTorch the folder's).

A function defined outside the package declares itself with `register`
(mesh's side, the JAX side) and, in the PyTorch model's folder, with the
configuration's `register_function`, which registers in that folder's
copy.
"""

import dataclasses
import math
import numbers
from typing import Any, Dict, Mapping, Optional, Tuple

# The kinds of settings, each with its check (`check`).
POSITIVE_INT = "positive_int"
OPTIONAL_POSITIVE_INT = "optional_positive_int"
BOOL = "bool"
NUMBER = "number"
_WANTED = {
    POSITIVE_INT: "positive: an integer >= 1",
    OPTIONAL_POSITIVE_INT: "positive: an integer >= 1, or None",
    BOOL: "True or False",
    NUMBER: "a number > 0",
}

# The initializers of variables (`Variable.initializer`).
UNIFORM = "uniform"
NORMAL = "normal"
ZEROS = "zeros"
ONES = "ones"
LAYER = "layer"  # the layer's own projection, drawn by the layer


def check(kind: str, value: Any, owner: str = "setting") -> Any:
  """A setting's value, checked against its kind.

  Args:
    kind: POSITIVE_INT, OPTIONAL_POSITIVE_INT (None: the default), BOOL or
      NUMBER (a real number > 0).
    value: the value.
    owner: what the message names, e.g. "FactorizedRandom.k".

  Returns:
    value.

  Raises:
    ValueError: naming the owner, the value and what would be valid.
  """
  if kind not in _WANTED:
    raise ValueError("unknown kind of setting %r (%s)" % (kind,
                                                        ", ".join(_WANTED)))
  integer = isinstance(value, numbers.Integral) and not isinstance(value, bool)
  if kind == BOOL:
    valid = isinstance(value, bool)
  elif kind == NUMBER:
    valid = (isinstance(value, numbers.Real) and
             not isinstance(value, bool) and value > 0)
  else:
    valid = (integer and value >= 1) or (
        kind == OPTIONAL_POSITIVE_INT and value is None)
  if not valid:
    raise ValueError("%s must be %s, got %r" % (owner, _WANTED[kind], value))
  return value


@dataclasses.dataclass(frozen=True)
class Setting:
  """A setting of a synthesizing function.

  Attributes:
    name: its name: the keyword of mesh's class (a gin parameter, e.g.
      `synthesizers.FactorizedRandom.k`) and of mesh's `export_settings()`.
    default: its value when none is given.
    kind: POSITIVE_INT, OPTIONAL_POSITIVE_INT, BOOL or NUMBER.
    doc: what it is, in a line.
    field: the PyTorch configuration field it fills (`MtfSynthesizerConfig`;
      settings of two functions with one meaning share one), or None: a
      setting of mesh's initializer, which the exported weights carry.
    item: the item of `field` it is (FD's a and b: items 0 and 1 of
      `factorized_dense_factors`), or None: the whole field.
  """
  name: str
  default: Any
  kind: str
  doc: str
  field: Optional[str] = None
  item: Optional[int] = None

  def check(self, value: Any, owner: str = "") -> Any:
    """value, checked against the setting's kind (see `check`)."""
    return check(self.kind, value,
                 "%s.%s" % (owner, self.name) if owner else self.name)


@dataclasses.dataclass(frozen=True)
class Variable:
  """A variable a function adds to its layer (Table 1), in mesh's layout.

  Attributes:
    name: its name local to the attention layer, e.g. "random/R" (the
      dot product's are the layer's own "q" and "k").
    shape: its dimensions, each a size's name: "heads", "d_model", "d_kv",
      "max_length", "heads*d_kv", or a setting resolved by
      `Function.sizes` (e.g. "k", "hidden_size", "a", "b").
    initializer: UNIFORM (limit `scale * sqrt(6 / (fan_in + fan_out))`,
      the original release's glorot), NORMAL (standard deviation
      `fan_in ** -0.5`), ZEROS, ONES, or LAYER (the layer's own projection,
      which the layer draws: the dot product's q and k).
    fan_in: the sizes whose product is the initializer's fan-in.
    fan_out: the sizes whose product is its fan-out (UNIFORM only).
    scale: the setting that multiplies a UNIFORM limit, or None.
    when: a BOOL setting that must be True for the variable to exist.
    unless: a BOOL setting that must be False for it to exist.
  """
  name: str
  shape: Tuple[str, ...]
  initializer: str = ZEROS
  fan_in: Tuple[str, ...] = ()
  fan_out: Tuple[str, ...] = ()
  scale: Optional[str] = None
  when: Optional[str] = None
  unless: Optional[str] = None

  @property
  def leaf(self) -> str:
    """Its name under the function's scope: "R" of "random/R"."""
    return self.name.rpartition("/")[2]


@dataclasses.dataclass(frozen=True)
class Sizes:
  """The sizes of one attention layer that a function's variables take.

  Attributes:
    d_model: the model width d.
    num_heads: h.
    d_kv: the per-head width of queries, keys and values.
    max_length: N, the positions of the tables.
  """
  d_model: int
  num_heads: int
  d_kv: int
  max_length: int


def glorot_limit(fan_in: int, fan_out: int) -> float:
  """A glorot-uniform initializer's limit: sqrt(6 / (fan_in + fan_out))."""
  return math.sqrt(6.0 / (fan_in + fan_out))


def default_factors(n: int) -> Tuple[int, int]:
  """FD's default (a, b): a the largest divisor of n with a <= sqrt(n).

  Args:
    n: N, the layer's max_length.

  Returns:
    (a, n // a); a == 1 where n is prime or 1.
  """
  a = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
  return a, n // a


@dataclasses.dataclass(frozen=True)
class Function:
  """A synthesizing function: what every side needs to know of it.

  Attributes:
    name: mesh's name (its variable scope, its key in `FUNCTIONS`, the
      PyTorch configuration's name for it).
    label: the paper's label, e.g. "FR".
    equation: where the paper defines it, e.g. "eq. 7".
    settings: its settings, in the order of mesh's keywords.
    reads_max_length: it holds a table of `max_length` positions.
    input_independent: its logits do not read the input ("nothing
      (global)" in Table 1).
    trainable: its variables are trained.
    needs_queries: it reads the layer's queries F_Q(X).
    queries_setting: a BOOL setting that, True, makes it read the queries
      (D's share_query_projection), or None.
    needs_keys: it reads the layer's keys F_K(X).
    indexes_positions: its logits read weights indexed by position, which
      packed examples index by the position inside their segment.
    marker_variable: its first variable under its scope ("" for none).
    variables: its variables (Table 1), in mesh's layouts.
  """
  name: str
  label: str
  equation: str
  settings: Tuple[Setting, ...] = ()
  reads_max_length: bool = True
  input_independent: bool = False
  trainable: bool = True
  needs_queries: bool = False
  queries_setting: Optional[str] = None
  needs_keys: bool = False
  indexes_positions: bool = True
  marker_variable: str = ""
  variables: Tuple[Variable, ...] = ()

  def renamed(self, name: str, **changes: Any) -> "Function":
    """This declaration under another name (a function built on this one).

    Args:
      name: the new function's name; its variables move under its scope.
      **changes: other attributes to replace (e.g. `label`, `variables`:
        given variables are kept as they are).

    Returns:
      A new Function.
    """
    variables = tuple(
        dataclasses.replace(v, name=name + "/" + v.leaf) if "/" in v.name
        else v for v in self.variables)
    return dataclasses.replace(
        self, **dict(dict(name=name, variables=variables), **changes))

  def setting(self, name: str) -> Setting:
    """Its setting of that name (a KeyError names the settings there are)."""
    for setting in self.settings:
      if setting.name == name:
        return setting
    raise KeyError("%s has no setting %r (its settings: %s)" % (
        self.name, name, ", ".join(s.name for s in self.settings) or "none"))

  def defaults(self) -> Dict[str, Any]:
    """Each setting's default, by name."""
    return {s.name: s.default for s in self.settings}

  def resolve(self, settings: Optional[Mapping[str, Any]] = None,
              owner: str = "") -> Dict[str, Any]:
    """Every setting: those given, checked, and the defaults of the rest.

    Args:
      settings: setting name -> value; None: all defaults.
      owner: what a message names (default the function's name).

    Returns:
      Setting name -> value, for every setting.

    Raises:
      ValueError: a value fails its check.
      KeyError: a name is not one of its settings.
    """
    out = self.defaults()
    for name, value in (settings or {}).items():
      out[name] = self.setting(name).check(value, owner or self.name)
    return out

  def reads_queries(self, settings: Optional[Mapping[str, Any]] = None
                    ) -> bool:
    """Whether it reads the layer's queries with these settings."""
    if self.needs_queries:
      return True
    return bool(self.queries_setting and
                self.resolve(settings)[self.queries_setting])

  def sizes(self, sizes: Sizes,
            settings: Optional[Mapping[str, Any]] = None) -> Dict[str, int]:
    """Each size a variable's shape names, for one layer.

    A setting that is None takes its function's rule: `hidden_size` d_kv
    (d_kv too where the queries stand for the first layer), FD's `a` and
    `b` the default split of max_length (`default_factors`; one of them
    given: the other is max_length divided by it).

    Args:
      sizes: the layer's sizes.
      settings: the function's settings (defaults for those not given).

    Returns:
      Size name -> size.
    """
    values = self.resolve(settings)
    out = {"heads": sizes.num_heads, "d_model": sizes.d_model,
           "d_kv": sizes.d_kv, "max_length": sizes.max_length,
           "heads*d_kv": sizes.num_heads * sizes.d_kv}
    for name, value in values.items():
      if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        out[name] = value
    if "hidden_size" in values:
      out["hidden_size"] = values["hidden_size"] or sizes.d_kv
      if self.queries_setting and values[self.queries_setting]:
        out["hidden_size"] = sizes.d_kv
    if "a" in values and "b" in values:
      a, b = values["a"], values["b"]
      n = sizes.max_length
      if a is None and b is None:
        a, b = default_factors(n)
      out["a"], out["b"] = (a or n // b), (b or n // a)
    return out

  def variables_of(self, settings: Optional[Mapping[str, Any]] = None
                   ) -> Tuple[Variable, ...]:
    """The variables it holds with these settings."""
    values = self.resolve(settings)
    return tuple(v for v in self.variables
                 if (v.when is None or values[v.when]) and
                 (v.unless is None or not values[v.unless]))

  def variable_shapes(self, sizes: Sizes,
                      settings: Optional[Mapping[str, Any]] = None
                      ) -> Dict[str, Tuple[int, ...]]:
    """Table 1: its variables' shapes in mesh's layouts, by local name.

    Args:
      sizes: the layer's sizes.
      settings: the function's settings (defaults for those not given).

    Returns:
      Local variable name -> shape.
    """
    known = self.sizes(sizes, settings)
    return {v.name: tuple(known[d] for d in v.shape)
            for v in self.variables_of(settings)}

  def initializer(self, variable: str, sizes: Sizes,
                  settings: Optional[Mapping[str, Any]] = None
                  ) -> Tuple[str, float]:
    """A variable's initializer, as mesh draws it.

    Args:
      variable: its local name (e.g. "random/R") or its leaf ("R").
      sizes: the layer's sizes.
      settings: the function's settings (defaults for those not given).

    Returns:
      (UNIFORM, limit), (NORMAL, standard deviation), (ZEROS, 0.0),
      (ONES, 1.0) or (LAYER, 0.0).

    Raises:
      KeyError: not one of its variables.
    """
    found = [v for v in self.variables if variable in (v.name, v.leaf)]
    if not found:
      raise KeyError("%s has no variable %r" % (self.name, variable))
    v = found[0]
    known = self.sizes(sizes, settings)
    fan_in = math.prod(known[d] for d in v.fan_in)
    if v.initializer == NORMAL:
      return NORMAL, fan_in ** -0.5
    if v.initializer == UNIFORM:
      scale = self.resolve(settings)[v.scale] if v.scale else 1.0
      return UNIFORM, scale * glorot_limit(
          fan_in, math.prod(known[d] for d in v.fan_out))
    return v.initializer, 1.0 if v.initializer == ONES else 0.0


def _random(name: str, label: str, trainable: bool) -> Function:
  """R or Fix: one [heads, N, N] table."""
  return Function(
      name=name, label=label, equation="eq. 4",
      settings=(Setting("initializer_scale", 1.0, NUMBER,
                        "multiplies the uniform initializer's limit"),),
      input_independent=True, trainable=trainable, marker_variable="R",
      # The original release's glorot scale on its [N, heads, N] variable.
      variables=(Variable(name + "/R", ("heads", "max_length", "max_length"),
                          UNIFORM, ("heads", "max_length"),
                          ("max_length", "max_length"),
                          scale="initializer_scale"),))


_HIDDEN_SIZE = Setting(
    "hidden_size", None, OPTIONAL_POSITIVE_INT,
    "per-head width of the hidden layer; None: d_kv", "dense_hidden_size")
_USE_BIAS = Setting("use_bias", True, BOOL, "add the biases",
                    "synthesizer_use_bias")


def _dense_layer(scope: str, out: str, **condition) -> Tuple[Variable, ...]:
  """A per-head layer from the hidden width to `out`, and its bias."""
  return (Variable("%s/w%s" % (scope, out[0]),
                   ("heads", "hidden_size", out), NORMAL, ("hidden_size",),
                   **condition),
          Variable("%s/b%s" % (scope, out[0]), ("heads", out), ZEROS,
                   when="use_bias", **condition))


def _first_layer(scope: str, **condition) -> Tuple[Variable, ...]:
  """relu(W1 X + b1) per head: D's and FD's first layer."""
  return (Variable(scope + "/w1", ("d_model", "heads", "hidden_size"), NORMAL,
                   ("d_model",), **condition),
          Variable(scope + "/b1", ("heads", "hidden_size"), ZEROS,
                   when="use_bias", **condition))


_DECLARED = (
    Function(
        name="dot_product", label="V", equation="Table 1",
        reads_max_length=False, needs_queries=True, needs_keys=True,
        indexes_positions=False,
        variables=(Variable("q", ("d_model", "heads*d_kv"), LAYER),
                   Variable("k", ("d_model", "heads*d_kv"), LAYER))),
    _random("random", "R", trainable=True),
    _random("fixed_random", "Fix", trainable=False),
    Function(
        name="factorized_random", label="FR", equation="eq. 7",
        settings=(Setting("k", 8, POSITIVE_INT,
                          "the rank of R1 R2^T (8 in the paper, 32 in "
                          "Table 7)", "factorized_random_k"),),
        input_independent=True, marker_variable="R1",
        # The glorot scale of the release's [k, heads, N] variables.
        variables=tuple(
            Variable("factorized_random/" + r, ("heads", "max_length", "k"),
                     UNIFORM, ("k", "heads"), ("k", "max_length"))
            for r in ("R1", "R2"))),
    Function(
        name="dense", label="D", equation="eq. 1-2",
        settings=(
            _HIDDEN_SIZE, _USE_BIAS,
            Setting("share_query_projection", False, BOOL,
                    "the layer's queries stand for W1 X (the original "
                    "release's dense modes); hidden_size and b1 then do not "
                    "apply", "dense_share_query_projection")),
        queries_setting="share_query_projection", marker_variable="w2",
        variables=_first_layer("dense", unless="share_query_projection") + (
            Variable("dense/w2", ("heads", "hidden_size", "max_length"),
                     NORMAL, ("hidden_size",)),
            Variable("dense/b2", ("heads", "max_length"), ZEROS,
                     when="use_bias"))),
    Function(
        name="factorized_dense", label="FD", equation="eq. 5-6",
        settings=(
            Setting("a", None, OPTIONAL_POSITIVE_INT,
                    "F_A's width; None: the largest divisor of max_length "
                    "<= its square root", "factorized_dense_factors", 0),
            Setting("b", None, OPTIONAL_POSITIVE_INT,
                    "F_B's width; None: max_length / a",
                    "factorized_dense_factors", 1),
            _HIDDEN_SIZE, _USE_BIAS),
        marker_variable="wa",
        variables=(_first_layer("factorized_dense") +
                   _dense_layer("factorized_dense", "a") +
                   _dense_layer("factorized_dense", "b"))),
)

# The package's synthesizing functions, by name, in the paper's order.
PACKAGE_FUNCTIONS = tuple(f.name for f in _DECLARED)

# The function of vanilla attention, Q K^T (the PyTorch configuration's
# default).
VANILLA = _DECLARED[0].name

# Every declared function by name: the package's, then those `register`ed.
FUNCTIONS: Dict[str, Function] = {f.name: f for f in _DECLARED}


def register(function: Function) -> Function:
  """Declares a synthesizing function defined outside the package.

  Its module calls this before it defines its classes (mesh's class named
  as the function reads it when it is defined).

  Args:
    function: its declaration.

  Returns:
    function.

  Raises:
    ValueError: its name is one of the package's functions, or is declared
      already with another declaration.
  """
  known = FUNCTIONS.get(function.name)
  if known is not None and (function.name in PACKAGE_FUNCTIONS or
                            known != function):
    raise ValueError(
        "synthesizing function %r is declared already: an extension needs "
        "a name of its own" % function.name)
  for setting in function.settings:
    setting.check(setting.default, function.name)
  FUNCTIONS[function.name] = function
  return function


def field_defaults(functions: Optional[Mapping[str, Function]] = None
                   ) -> Dict[str, Any]:
  """The default of each PyTorch configuration field a setting fills.

  A whole field's is its setting's default; a field of items (FD's
  `factorized_dense_factors`) is None where every item's default is None,
  else the tuple of the items' defaults.

  Args:
    functions: the declarations (default `FUNCTIONS`).

  Returns:
    Field name -> default.

  Raises:
    ValueError: two settings that fill one field declare different
      defaults.
  """
  items: Dict[str, Dict[int, Any]] = {}
  out: Dict[str, Any] = {}
  for function in (FUNCTIONS if functions is None else functions).values():
    for s in function.settings:
      if s.field is None:
        continue
      if s.item is not None:
        known = items.setdefault(s.field, {})
        if known.get(s.item, s.default) != s.default:
          raise ValueError("%s item %d: defaults differ" % (s.field, s.item))
        known[s.item] = s.default
      elif out.get(s.field, s.default) != s.default:
        raise ValueError("%s: %s.%s's default %r differs from another "
                         "setting's %r" % (s.field, function.name, s.name,
                                           s.default, out[s.field]))
      else:
        out[s.field] = s.default
  for field, known in items.items():
    values = tuple(known[i] for i in sorted(known))
    out[field] = None if all(v is None for v in values) else values
  return out
