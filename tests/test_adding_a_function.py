# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""docs/architecture.md's "How to add a synthesizing function" is complete.

The section's heading gives the files and sites a new function takes, and
each numbered step names its file and sites. Here the counts are the
steps', and each registry, table and oracle that a function of the package
is in (its declaration, mesh's `BY_NAME`, the reference's logits, Table 1's
counts, PyTorch's `FUNCTIONS`; the configuration's `FUNCTION_SETTINGS` and
the reference's variables follow from the declaration) and each that a
variant is in (the attention table, its gin file, the route table of
docs/pytorch.md) lives in a file a step names, for every function and
every variant: a list the steps do not name fails here. The PyTorch model
code, the export and the benchmark's model files name no function outside
those files; a second function with columns, added for one test and
removed after, needs no other list.
"""

import ast
import glob
import inspect
import os
import re
import sys
import tokenize

import pytest

import conftest
from mtf_synthesizer import attentions
from mtf_synthesizer import synthesizers
from mtf_synthesizer import synthesizing_functions as declarations
from mtf_synthesizer.core import reference

torch = pytest.importorskip("torch")

# pylint: disable=g-import-not-at-top,wrong-import-position
from mtf_synthesizer.hf_model import configuration_mtf_synthesizer
from mtf_synthesizer.hf_model import functions_mtf_synthesizer
# pylint: enable=g-import-not-at-top,wrong-import-position

DOC = os.path.join(conftest.REPO, "docs", "architecture.md")
HEADING = re.compile(
    r"^## How to add a synthesizing function \((\w+) files, (\w+) sites; "
    r"a variant of its own: (\w+) files, (\w+) sites more\)$", re.M)
STEP = re.compile(r"^\d+\. `([^`]+)` \((\d+) sites?\)", re.M)
VARIANT_PART = "A variant of its own"
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10}
# Where a file that names functions may not name one outside the steps'
# files: the PyTorch model code, the export, the benchmark's models.
NO_LISTS = ("mtf_synthesizer/hf_model/*.py", "mtf_synthesizer/hf_tools/*.py",
            "mtf_synthesizer/export/*.py") + tuple(
                "workbench/pytorch/%s.py" % name for name in (
                    "benchmark", "models", "measure", "flops", "profiling",
                    "report"))


def _section():
  with open(DOC) as f:
    text = f.read()
  heading = HEADING.search(text)
  assert heading, "docs/architecture.md: the section's heading changed"
  end = text.index("\n### ", heading.end())
  return heading, text[heading.end():end]


def _steps():
  """({file: sites} of a function's steps, {file: sites} of a variant's)."""
  _, body = _section()
  function_part, variant_part = body.split(VARIANT_PART, 1)
  return ({p: int(n) for p, n in STEP.findall(function_part)},
          {p: int(n) for p, n in STEP.findall(variant_part)})


def _relative(path):
  return os.path.relpath(os.path.realpath(path), conftest.REPO)


def test_the_heading_counts_the_steps():
  heading, _ = _section()
  counts = [NUMBERS[word] for word in heading.groups()]
  function_steps, variant_steps = _steps()
  assert counts == [len(function_steps), sum(function_steps.values()),
                    len(variant_steps), sum(variant_steps.values())]


def test_the_steps_name_existing_files():
  function_steps, variant_steps = _steps()
  for path in list(function_steps) + list(variant_steps):
    pattern = os.path.join(conftest.REPO, re.sub(r"<\w+>", "*", path))
    assert glob.glob(pattern), path


@pytest.mark.parametrize("name", sorted(synthesizers.BY_NAME))
def test_every_registry_of_a_function_is_a_step(name):
  steps, _ = _steps()
  # Its declaration, a site; mesh's class (BY_NAME) and PyTorch's
  # (FUNCTIONS), each a site.
  assert name in declarations.PACKAGE_FUNCTIONS
  assert steps[_relative(declarations.__file__)] == 1
  assert _relative(inspect.getsourcefile(synthesizers.BY_NAME[name])) in (
      steps)
  torch_class = functions_mtf_synthesizer.FUNCTIONS[name]
  assert _relative(inspect.getsourcefile(torch_class)) in steps
  # The Flax module (read as text: JAX is another environment), a site; the
  # dot product is the Flax attention's own projections.
  flax_file = os.path.join("mtf_synthesizer", "flax_model", "functions.py")
  assert flax_file in steps
  if name != declarations.VANILLA:
    with open(os.path.join(conftest.REPO, flax_file)) as f:
      assert re.search(r'^  name_declared = "%s"$' % name, f.read(),
                       re.M), name
  # Its configuration row and the reference's variables: the declaration's,
  # no site of their own.
  configuration = configuration_mtf_synthesizer
  assert configuration.FUNCTION_SETTINGS[name] == (
      configuration.function_settings(declarations.FUNCTIONS[name]))
  assert _relative(configuration.__file__) not in steps
  assert '"%s"' % name not in inspect.getsource(reference.variable_shapes)
  # The reference's logits, a site.
  if name != synthesizers.DotProduct.name:  # the layer's own q and k
    assert '"%s"' % name in inspect.getsource(reference.synthesized_logits)
  assert steps[_relative(reference.__file__)] == 1
  # Table 1's count, the tests' oracle.
  oracle = os.path.join("tests", "test_synthesizers.py")
  with open(os.path.join(conftest.REPO, oracle)) as f:
    assert re.search(r'^\s+"%s": \(' % name, f.read(), re.M), name
  assert oracle in steps


@pytest.mark.parametrize("variant", attentions.VARIANTS,
                         ids=lambda v: v.label)
def test_every_list_of_a_variant_is_a_step(variant):
  _, steps = _steps()
  assert _relative(attentions.__file__) in steps
  gin_step = [p for p in steps if p.startswith("gin/")]
  assert sorted(gin_step) == [os.path.join("gin", folder, "<variant>.gin")
                              for folder in ("flax", "synthesizer")]
  assert variant.gin_file == "synthesizer/%s.gin" % variant.name
  assert os.path.exists(os.path.join(conftest.REPO, "gin",
                                     variant.gin_file))
  # The Flax model's file binds the variant by its name.
  with open(os.path.join(conftest.REPO, "gin", "flax",
                         variant.name + ".gin")) as f:
    assert 'T5Config.variant = "%s"' % variant.name in f.read()
  routes = os.path.join("docs", "pytorch.md")
  assert routes in steps
  with open(os.path.join(conftest.REPO, routes)) as f:
    assert re.search(r"^\| %s \| " % re.escape(variant.label), f.read(),
                     re.M), variant.label


def _named_functions(path):
  """The lines of path whose string literals name a function."""
  names = set(synthesizers.BY_NAME)
  found = []
  with open(path) as f:
    for token in tokenize.generate_tokens(f.readline):
      if token.type != tokenize.STRING:
        continue
      try:
        value = ast.literal_eval(token.string)
      except (ValueError, SyntaxError):
        continue
      if isinstance(value, str) and value in names:
        found.append((token.start[0], value))
  return found


def test_no_other_file_lists_functions():
  """The model code, the export and the benchmark's models read the
  functions' declarations; only the steps' files name them."""
  steps, _ = _steps()
  named = {}
  for pattern in NO_LISTS:
    for path in glob.glob(os.path.join(conftest.REPO, pattern)):
      if _relative(path) not in steps:
        found = _named_functions(path)
        if found:
          named[_relative(path)] = found
  assert not named, named


def test_the_scan_can_fail(tmp_path):
  listing = tmp_path / "listing.py"
  listing.write_text("KNOWN = (%r,)\n" % sorted(synthesizers.BY_NAME)[0])
  assert _named_functions(str(listing))


TOY = "toy_factorized_random"
TOY_MODULE = '''"""A toy function: FR under a name of its own."""
# pylint: disable=relative-beyond-top-level
from .configuration_mtf_synthesizer import DECLARED
from .configuration_mtf_synthesizer import register_function
from .functions_mtf_synthesizer import MtfSynthesizerFactorizedRandom

register_function(DECLARED[MtfSynthesizerFactorizedRandom.name].renamed(
    %(name)r))


class Toy(MtfSynthesizerFactorizedRandom):
  name = %(name)r
''' % {"name": TOY}


@pytest.fixture
def toy(tmp_path):
  """A second function with columns, in the tests' copy of the model code
  and the benchmark's, registered for one test and removed after."""
  # pylint: disable=g-import-not-at-top
  import model_code
  from mtf_synthesizer.hf_tools import extensions
  from workbench.pytorch import benchmark
  # pylint: enable=g-import-not-at-top
  path = tmp_path / ("%s_mtf_synthesizer.py" % TOY)
  path.write_text(TOY_MODULE)
  copies = [model_code.load("configuration"),
            benchmark.load_model_code("configuration")]
  modules = [extensions.load_extension(str(path), c.__package__)
             for c in copies]
  try:
    yield copies
  finally:
    for configuration, module in zip(copies, modules):
      package = module.__name__.rpartition(".")[0]
      sys.modules.pop(module.__name__, None)
      configuration.FUNCTION_SETTINGS.pop(TOY, None)
      configuration.DECLARED.pop(TOY, None)
      extensions.EXTENSION_FILES.pop(TOY, None)
      sys.modules[package + ".functions_mtf_synthesizer"].FUNCTIONS.pop(
          TOY, None)


def test_a_new_function_needs_no_other_list(toy):
  """The plan, the layer (fused against eager, loss and gradients), the
  initializers and the FLOP count take a new function with columns, alone
  and beside the dot product, from its declarations alone: FR's."""
  del toy
  # pylint: disable=g-import-not-at-top
  import model_code
  import test_attention_plan
  import tiny_models
  from workbench.pytorch import benchmark
  from workbench.pytorch import flops
  # pylint: enable=g-import-not-at-top
  fr = synthesizers.FactorizedRandom.name
  dot = synthesizers.DotProduct.name
  dims = benchmark.Dims(
      d_model=32, num_heads=2, d_kv=8, d_ff=64, num_layers=1,
      num_decoder_layers=1, vocab_size=64, batch=2, input_length=16,
      target_length=8, new_tokens=4)
  flops_config = benchmark.load_model_code(
      "configuration").MtfSynthesizerConfig
  for toy_components, fr_components in (((TOY,), (fr,)),
                                        ((TOY, dot), (fr, dot))):
    route = test_attention_plan._route  # pylint: disable=protected-access
    for situation in test_attention_plan.SITUATIONS:
      assert (route(toy_components, *situation[1:]) ==
              route(fr_components, *situation[1:]))
    counts = [flops.training_flops(dims, c, flops_config(
        d_model=32, d_kv=8, num_heads=2, synthesizer_max_length=16,
        encoder_synthesizers=c, decoder_synthesizers=c))
              for c in (toy_components, fr_components)]
    counts[0][fr] = counts[0].pop(TOY)  # its term under its own name
    assert counts[0] == counts[1]
    model = tiny_models.perturb(tiny_models.seq2seq(
        toy_components, num_layers=2, relative_attention_type=None))
    model.train()
    inputs, mask, labels = tiny_models.padded_inputs()
    results = {}
    for implementation in ("eager", "sdpa"):
      model.set_attn_implementation(implementation)
      results[implementation] = tiny_models.loss_and_gradients(
          model, input_ids=inputs, attention_mask=mask, labels=labels)
    assert abs(results["sdpa"][0] - results["eager"][0]) < 1e-5
    tiny_models.assert_close_gradients(results["sdpa"][1],
                                       results["eager"][1])
    layer = model.model.encoder.block[0].layer[0].SelfAttention
    assert TOY in layer.function_names
    assert model_code.load("functions").FUNCTIONS[TOY]
