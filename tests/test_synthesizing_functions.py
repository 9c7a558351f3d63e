# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Every side reads the functions' declarations, and every setting matters.

`mtf_synthesizer.synthesizing_functions` declares each function once. Here:

  * the module imports the standard library only, and the PyTorch model's
    folder holds it (a link), so that every side's environment imports it;
  * the defaults each side uses are the declared ones: mesh's keywords
    (which gin reads), the PyTorch configuration's fields, the NumPy
    reference's; the checks can fail (a declaration with another default
    is caught);
  * the properties and the initializers each side gives are the declared
    ones;
  * for every declared setting of every function, a value other than its
    default, where it changes the result: mesh's layer and the PyTorch
    layer both against the NumPy reference at that value (a setting of
    mesh's initializer: its draw against the declared limit).
"""

import ast
import dataclasses
import inspect
import os
import sys

import numpy as np
import pytest

import conftest
import layer_harness
import mtf_synthesizer as ms
from mtf_synthesizer import synthesizing_functions as declarations
from mtf_synthesizer.core import reference as ref

HEADS, DK, D_MODEL, MAX_LEN = 2, 4, 8, 8
BATCH, LENGTH = 2, 6
SIZES = declarations.Sizes(D_MODEL, HEADS, DK, MAX_LEN)
PACKAGE = {name: declarations.FUNCTIONS[name]
           for name in declarations.PACKAGE_FUNCTIONS}


def other_value(function: declarations.Function,
                setting: declarations.Setting):
  """A value of the setting other than its default, that changes the result.

  A size: the largest proper divisor of MAX_LEN other than the size the
  default gives (so that FD's a and b still split MAX_LEN); a flag: its
  negation; a number: a quarter of the default.

  Args:
    function: the declaration.
    setting: one of its settings.

  Returns:
    The value.
  """
  if setting.kind == declarations.BOOL:
    return not setting.default
  if setting.kind == declarations.NUMBER:
    return setting.default / 4
  default = function.sizes(SIZES)[setting.name]
  return max(d for d in range(1, MAX_LEN)
             if MAX_LEN % d == 0 and d != default)


CASES = [(name, s.name, other_value(f, s))
         for name, f in PACKAGE.items() for s in f.settings]


def _ids(case):
  return "%s.%s=%r" % case


def test_every_setting_has_a_case():
  """Each function with settings has them all here (a new one included)."""
  assert {(n, s) for n, s, _ in CASES} == {
      (n, s.name) for n, f in PACKAGE.items() for s in f.settings}
  assert CASES, "no function declares a setting"


def test_the_module_imports_the_standard_library_only():
  path = declarations.__file__
  with open(path) as f:
    tree = ast.parse(f.read())
  imported = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      imported.update(a.name.split(".")[0] for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      assert not node.level, "a relative import"
      imported.add(node.module.split(".")[0])
  assert imported <= set(sys.stdlib_module_names), imported


def test_the_model_folder_holds_the_module():
  """The PyTorch model's folder links to it: one file, which an export and
  save_pretrained copy (they follow the link)."""
  copy = os.path.join(conftest.REPO, "mtf_synthesizer", "hf_model",
                      "synthesizing_functions_mtf_synthesizer.py")
  assert os.path.realpath(copy) == os.path.realpath(declarations.__file__)


# ---------------------------------------------------------------------------
# The defaults each side uses.


def mesh_default_mismatches(functions):
  """(function, setting, mesh's default, the declared) where they differ."""
  out = []
  for name, function in functions.items():
    parameters = inspect.signature(
        ms.synthesizers.BY_NAME[name].__init__).parameters
    for s in function.settings:
      given = parameters[s.name].default if s.name in parameters else (
          "no keyword")
      if given != s.default or type(given) is not type(s.default):
        out.append((name, s.name, given, s.default))
    keywords = {n for n, p in parameters.items()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    extra = keywords - {"self"} - {s.name for s in function.settings}
    out += [(name, e, "undeclared", None) for e in sorted(extra)]
  return out


def config_default_mismatches(configuration, functions):
  """(field, the configuration's default, the declared) where they differ."""
  fields = configuration.MtfSynthesizerConfig.__dataclass_fields__
  return [(field, fields[field].default, default)
          for field, default in declarations.field_defaults(
              functions).items()
          if fields[field].default != default]


def reference_default_mismatches(functions):
  """(function, variable, the reference's shape, the declared) that differ."""
  out = []
  for name, function in functions.items():
    declared = {k: list(v) for k, v in function.variable_shapes(
        SIZES).items()}
    given = ref.variable_shapes(name, D_MODEL, HEADS, DK, MAX_LEN)
    out += [(name, k, given.get(k), declared.get(k))
            for k in sorted(set(declared) | set(given))
            if given.get(k) != declared.get(k)]
  return out


def _configuration():
  torch = pytest.importorskip("torch")
  del torch
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.hf_model import configuration_mtf_synthesizer
  return configuration_mtf_synthesizer


def test_mesh_uses_the_declared_defaults():
  assert not mesh_default_mismatches(PACKAGE)
  for name in PACKAGE:
    assert ms.synthesizers.BY_NAME[name]().settings() == (
        PACKAGE[name].defaults())


def test_the_configuration_uses_the_declared_defaults():
  configuration = _configuration()
  assert not config_default_mismatches(configuration, PACKAGE)
  assert configuration.FUNCTION_SETTINGS == {
      name: configuration.function_settings(f) for name, f in PACKAGE.items()}


def test_the_reference_uses_the_declared_defaults():
  assert not reference_default_mismatches(PACKAGE)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_the_default_checks_can_fail(case):
  """A declaration whose default differs from a side's is caught there."""
  name, setting, value = case
  function = PACKAGE[name]
  changed = dict(PACKAGE)
  changed[name] = dataclasses.replace(function, settings=tuple(
      dataclasses.replace(s, default=value) if s.name == setting else s
      for s in function.settings))
  assert mesh_default_mismatches(changed)
  if function.setting(setting).field is not None:
    try:
      found = config_default_mismatches(_configuration(), changed)
    except ValueError:  # the settings that fill one field now disagree
      found = True
    assert found
  if function.variable_shapes(SIZES, {setting: value}) != (
      function.variable_shapes(SIZES)):
    assert reference_default_mismatches(changed)


def test_the_properties_are_declared():
  """mesh's classes and the PyTorch modules state what the declarations
  say (D reads the queries exactly when it shares their projection)."""
  facts = ("input_independent", "trainable", "needs_keys")
  for name, function in PACKAGE.items():
    cls = ms.synthesizers.BY_NAME[name]
    assert cls.declaration is function
    for fact in facts + ("indexes_positions", "marker_variable"):
      assert getattr(cls, fact) == getattr(function, fact), (name, fact)
    assert cls().needs_queries == function.reads_queries()
  assert ms.synthesizers.Dense(share_query_projection=True).needs_queries
  configuration = _configuration()
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.hf_model import functions_mtf_synthesizer as functions
  config = configuration.MtfSynthesizerConfig(
      d_model=D_MODEL, d_kv=DK, num_heads=HEADS,
      synthesizer_max_length=MAX_LEN)
  for name, function in PACKAGE.items():
    module = functions.FUNCTIONS[name](config)
    for fact in facts + ("needs_queries",):
      assert getattr(module, fact) == getattr(function, fact), (name, fact)


def test_the_pytorch_initializers_are_declared():
  """Each weight a PyTorch module holds starts as its declaration says."""
  configuration = _configuration()
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.hf_model import functions_mtf_synthesizer as functions
  config = configuration.MtfSynthesizerConfig(
      d_model=D_MODEL, d_kv=DK, num_heads=HEADS,
      synthesizer_max_length=MAX_LEN)
  for name, function in PACKAGE.items():
    module = functions.FUNCTIONS[name](config)
    given = module.initializers(config)
    for v in function.variables_of():
      if v.initializer == declarations.LAYER:
        continue
      expected = function.initializer(v.name, SIZES)
      if v.leaf in given:
        assert given[v.leaf] == pytest.approx(expected), (name, v.name)
      elif v.leaf == "w1":  # an nn.Linear, which carries its initializer
        assert module.w1.mesh_initializer == pytest.approx(expected)
      else:  # b1, the nn.Linear's bias: zeros
        assert v.leaf == "b1" and v.initializer == declarations.ZEROS


# ---------------------------------------------------------------------------
# Every setting at a value other than its default.


def _x(seed=0):
  return np.random.RandomState(seed).randn(BATCH, LENGTH, D_MODEL).astype(
      np.float32)


def _mesh_run(name, settings, **variable_values):
  layer = ms.SynthesizerAttention(
      synthesizers=[ms.synthesizers.BY_NAME[name](**settings)],
      num_heads=HEADS, key_value_size=DK, max_length=MAX_LEN)
  return layer_harness.run_layer(layer, _x(), causal=True,
                                 variable_values=variable_values or None)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_mesh_follows_the_reference_at_other_values(case):
  name, setting, value = case
  settings = {setting: value}
  function = PACKAGE[name]
  first = _mesh_run(name, settings)
  variables = layer_harness.local_variables(first.variables)
  own = {k: list(v.shape) for k, v in variables.items()
         if k.startswith(name + "/")}
  expected_shapes = ref.variable_shapes(name, D_MODEL, HEADS, DK, MAX_LEN,
                                        settings)
  assert own == {k: v for k, v in expected_shapes.items()
                 if k.startswith(name + "/")}
  s = function.setting(setting)
  if s.field is None:  # a setting of the initializer: the draw
    for v in function.variables_of(settings):
      kind, limit = function.initializer(v.name, SIZES, settings)
      assert kind == declarations.UNIFORM
      drawn = np.abs(variables[v.name])
      assert drawn.max() <= limit * (1 + 1e-6)
      assert drawn.max() > 0.9 * limit
      # The default's limit is four times as large: the setting counts.
      assert limit < function.initializer(v.name, SIZES)[1] / 2
    return
  rng = np.random.RandomState(3)
  values = {n: rng.randn(*v.shape).astype(np.float32)
            for n, v in first.variables.items() if not np.any(v)}
  run = _mesh_run(name, settings, **values)
  v = layer_harness.local_variables(run.variables)
  expected = ref.layer_output([name], v, _x(), HEADS, DK, causal=True,
                              settings={name: settings})
  np.testing.assert_allclose(run.output, expected, rtol=2e-4, atol=2e-5)
  default = ref.layer_output([name], v, _x(), HEADS, DK, causal=True) if (
      s.kind == declarations.BOOL and set(own) == set(
          ref.variable_shapes(name, D_MODEL, HEADS, DK, MAX_LEN))) else None
  if default is not None:  # the same weights, the default's logits differ
    assert np.abs(default - expected).max() > 1e-3


def _config_fields(function, settings):
  """The PyTorch configuration's fields of a function's settings."""
  resolved = function.resolve(settings)
  sizes = function.sizes(SIZES, settings)
  fields, items = {}, {}
  for s in function.settings:
    if s.field is None:
      continue
    if s.item is None:
      fields[s.field] = resolved[s.name]
    else:
      items.setdefault(s.field, {})[s.item] = sizes[s.name]
  for field, known in items.items():
    fields[field] = tuple(known[i] for i in sorted(known))
  return fields


@pytest.mark.parametrize("case", [c for c in CASES
                                  if PACKAGE[c[0]].setting(c[1]).field],
                         ids=_ids)
def test_pytorch_follows_the_reference_at_other_values(case):
  """The PyTorch layer, the setting given as its configuration field."""
  torch = pytest.importorskip("torch")
  import hf_reference_side  # pylint: disable=g-import-not-at-top
  import model_code  # pylint: disable=g-import-not-at-top
  name, setting, value = case
  function = PACKAGE[name]
  settings = {setting: value}
  modeling = model_code.load()
  config = modeling.MtfSynthesizerConfig(
      vocab_size=16, d_model=D_MODEL, d_kv=DK, d_ff=16, num_layers=1,
      num_heads=HEADS, dropout_rate=0.0, encoder_synthesizers=(name,),
      decoder_synthesizers=(name,), synthesizer_max_length=MAX_LEN,
      **_config_fields(function, settings))
  attention = modeling.MtfSynthesizerAttention(config, (name,))
  hf_reference_side._randomize(attention, 0)  # pylint: disable=protected-access
  variables = {k: v for k, v in hf_reference_side.mesh_variables(
      attention).items()}
  own = {k: list(v.shape) for k, v in variables.items()
         if k.startswith(name + "/")}
  assert own == {k: v for k, v in ref.variable_shapes(
      name, D_MODEL, HEADS, DK, MAX_LEN, settings).items()
                 if k.startswith(name + "/")}
  x = torch.randn(BATCH, LENGTH, D_MODEL,
                  generator=torch.Generator().manual_seed(1))
  positions = modeling.Positions(0, LENGTH, LENGTH)
  mask = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril()[None, None]
  with torch.no_grad():
    ours = attention(x, None, positions, mask=mask)[0].double().numpy()
  expected = ref.layer_output([name], variables, x.double().numpy(), HEADS,
                              DK, causal=True, settings={name: settings})
  np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)
