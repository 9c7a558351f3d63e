# Two commands: `make demo` and `make test`. Each builds .venv from the pinned
# files when it is missing or older than them.
PYTHON ?= python3.11
# CPython 3.10, the TPU VM image's (`make test-tpu-vm`): pyenv's, if any.
PYTHON310 ?= $(or $(shell pyenv prefix 3.10 2>/dev/null | head -n1 | sed 's|$$|/bin/python3.10|'),python3.10)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.pinned
DEMO_DIR ?= runs/demo
# The ONNX test's packages, which TensorFlow's pins exclude from the
# environment itself (requirements-onnx.lock).
ONNX_SITE := $(VENV)/onnx-site
# transformers' own common tests, unpacked from its pinned source
# distribution (requirements-transformers-tests.lock).
UPSTREAM_TESTS := $(VENV)/transformers-tests
UPSTREAM_STAMP := $(UPSTREAM_TESTS)/.pinned
PYTEST_ARGS ?=
# Test modules run in parallel processes (pytest-xdist), one module per
# process at a time: `auto` is one per core, at most 4.
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS) --maxprocesses=4 --dist loadfile --no-loadscope-reorder

.PHONY: demo test test-fast test-tpu-vm tpu-vm-env test-jax jax-env install check-python clean

check-python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "error: $(PYTHON) not found. mtf_synthesizer needs CPython 3.11" \
	       "(TensorFlow 2.15, the last with tf.estimator that mesh-tensorflow" \
	       "needs, has no wheels for 3.12+). Install 3.11 or run" \
	       "'make PYTHON=/path/to/python3.11 ...'." >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { \
	  echo "error: $(PYTHON) is Python `$(PYTHON) -c 'import sys;print(sys.version.split()[0])'`;" \
	       "mtf_synthesizer needs CPython 3.11." >&2; exit 1; }

$(STAMP): requirements.lock requirements-test.lock requirements-onnx.lock
	@$(MAKE) --no-print-directory check-python
	@echo "==> creating $(VENV) from requirements.lock (about 3 GB, a few minutes)"
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q 'pip==26.3' 'setuptools==80.10.2' 'wheel==0.48.0'
	$(VPY) -m pip install -q --no-deps -r requirements.lock -r requirements-test.lock
	$(VPY) -m pip install -q --no-deps --target $(ONNX_SITE) -r requirements-onnx.lock
	touch $(STAMP)

$(UPSTREAM_STAMP): requirements-transformers-tests.lock $(STAMP)
	@echo "==> unpacking transformers' common tests into $(UPSTREAM_TESTS)"
	rm -rf $(UPSTREAM_TESTS)
	$(VPY) -m pip download -q --no-deps --no-binary transformers \
	  --require-hashes -r requirements-transformers-tests.lock \
	  -d $(UPSTREAM_TESTS)/dist
	$(VPY) -m pip install -q --no-deps --no-index $(UPSTREAM_TESTS)/dist/*.whl
	tar -xzf $(UPSTREAM_TESTS)/dist/transformers-*.tar.gz \
	  -C $(UPSTREAM_TESTS) --strip-components=2 --wildcards \
	  'transformers-*/tests/test_modeling_common.py' \
	  'transformers-*/tests/test_configuration_common.py'
	rm -rf $(UPSTREAM_TESTS)/dist
	# transformers' tests/__init__.py (empty), which the distribution lacks.
	touch $(UPSTREAM_TESTS)/__init__.py $@

# The package is installed (not editable) so that its start-up hook file
# lands in site-packages; reinstalling takes about a second.
# One build of the checkout at a time: `make tpu-vm-env` may be installing
# it into .venv-tpu beside this (both build in build/; .ci/tpu_vm_leg.py).
BUILD_LOCK := .checkout-build.lock
LOCKED := $(if $(shell command -v flock 2>/dev/null),flock $(BUILD_LOCK))
install: $(STAMP) $(UPSTREAM_STAMP)
	@$(LOCKED) sh -c '$(VPY) -m pip install -q --no-deps --no-build-isolation --force-reinstall . 2>&1 | grep -v "^WARNING: Location"; rm -rf build *.egg-info' || true

# The test modules of the TPU VM user's path, which the TPU VM leg runs on
# CPython 3.10 (`make test-tpu-vm`, .ci/tpu_vm_leg.py): the preflight and
# README's tool command, recipes 1 and 2 read from the README, every
# variant's and baseline's gin file through the stock CLI, every gin file's
# layers, the TPU tool's commands, its processes (it holds no TPU) and the
# data its jobs read, the TPU programs compiled by XLA,
# lowered on SimdMeshImpl meshes and through mesh's TPU model function.
# `make test` leaves them to that leg, so that CI (both legs) runs each
# module once; `make test TPU_VM_LEG=` runs them on CPython 3.11 too.
TPU_VM_LEG := test_tpu_preflight.py test_recipes.py test_variants_cli.py \
  test_baselines_cli.py test_gin_files.py test_tpu_job.py test_xla.py \
  test_tpu_mesh.py test_tpu_model_fn.py test_tpu_job_process.py \
  test_tpu_data.py

test: install
	cd tests && ../$(VPY) -m pytest -q -rfEs -p no:cacheprovider $(XDIST) \
	  --ignore=jax $(addprefix --ignore=,$(TPU_VM_LEG)) $(PYTEST_ARGS) .

# The JAX side (mtf_synthesizer.flax_model) in its own environment, .venv-jax
# (requirements-jax.lock: jax 0.10.2 needs numpy 2, TensorFlow 2.15 numpy
# 1.26; a CPU TensorFlow 2.21 with seqio and t5 feeds the JAX trainer), and
# its tests, tests/jax/ (their own pytest.ini: tests/conftest.py imports the
# mesh side).
JAX_VENV := .venv-jax
JAX_VPY := $(JAX_VENV)/bin/python
JAX_STAMP := $(JAX_VENV)/.pinned

$(JAX_STAMP): requirements-jax.lock
	@$(MAKE) --no-print-directory check-python
	@echo "==> creating $(JAX_VENV) from requirements-jax.lock (about 3 GB)"
	rm -rf $(JAX_VENV)
	$(PYTHON) -m venv $(JAX_VENV)
	$(JAX_VPY) -m pip install -q 'pip==26.3' 'setuptools==80.10.2' 'wheel==0.48.0'
	$(JAX_VPY) -m pip install -q --no-deps --require-hashes -r requirements-jax.lock
	touch $(JAX_STAMP)

jax-env: $(JAX_STAMP)
	@$(LOCKED) sh -c '$(JAX_VPY) -m pip install -q --no-deps --no-build-isolation --force-reinstall . 2>&1 | grep -v "^WARNING: Location"; rm -rf build *.egg-info' || true

test-jax: jax-env
	cd tests/jax && ../../$(JAX_VPY) -m pytest -q -rfEs -p no:cacheprovider \
	  $(XDIST) $(PYTEST_ARGS) .

# README's TPU VM installation on CPython 3.10 over PyPI's tensorflow==2.15.0
# (the image's stand-in, in .tpu-vm/), and the mesh side's tests in it
# (.ci/tpu_vm_leg.py; docs/development.md).
test-tpu-vm:
	@command -v $(PYTHON310) >/dev/null 2>&1 || { \
	  echo "error: $(PYTHON310) not found: the TPU VM leg needs CPython 3.10" \
	       "(the TPU VM image's). Run 'make test-tpu-vm" \
	       "PYTHON310=/path/to/python3.10'." >&2; exit 1; }
	$(PYTHON310) .ci/tpu_vm_leg.py $(TPU_VM_LEG) $(PYTEST_ARGS)

# The TPU VM leg's environment alone (.tpu-vm/, .venv-tpu): `.ci/run`
# builds it while `make test` runs.
tpu-vm-env:
	@command -v $(PYTHON310) >/dev/null 2>&1 || { \
	  echo "error: $(PYTHON310) not found: the TPU VM leg needs CPython 3.10." >&2; \
	  exit 1; }
	$(PYTHON310) .ci/tpu_vm_leg.py --environment-only

# The test modules that neither run the stock CLI nor build many models (a
# few minutes): `pytest -m "not slow"`.
test-fast: install
	cd tests && ../$(VPY) -m pytest -q -p no:cacheprovider $(XDIST) -m "not slow" $(PYTEST_ARGS) .

demo: install
	$(VPY) tools/demo.py --output_dir=$(DEMO_DIR)

clean:
	rm -rf $(VENV) .venv-tpu .venv-jax .tpu-vm build *.egg-info runs $(BUILD_LOCK)
