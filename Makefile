# kernel-factory: `make demo` runs the main job on the bundled example kernels; `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CONFIG ?= factory.toml
PORT   ?= 8000

.PHONY: demo index build serve test test-stacks test-min unit integration lint bench mutants fixtures system-deps clean gpu-e2e install

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q '.[test]'
	touch $@

# The tests run against what users get: the wheel built from this tree, installed (not editable).
WHEEL := $(VENV)/.wheel
$(WHEEL): $(STAMP) pyproject.toml $(shell find factory index_templates -type f ! -name '*.pyc' 2>/dev/null)
	rm -rf dist build  # setuptools reuses build/lib: modules since moved or deleted would ship again
	$(BIN)/python -m pip wheel -q --no-deps -w dist .
	$(BIN)/python -m pip install -q --no-deps --force-reinstall dist/kernel_factory-*.whl
	touch $@

install: $(WHEEL)

# Example kernel repositories (git repositories with tags and branches) from the committed prebuilt binaries.
examples/repos/.built: $(STAMP) scripts/build_fixtures.py $(shell find examples/prebuilt examples/src -type f 2>/dev/null)
	$(BIN)/python scripts/build_fixtures.py --from-prebuilt --out examples/repos
	touch $@

fixtures: examples/repos/.built

build: $(WHEEL) fixtures
	$(BIN)/kernel-factory build --config $(CONFIG)

index: build
	$(BIN)/kernel-factory index --config $(CONFIG)

demo: index
	@echo
	@echo "Index written to ./public. Serve it and install a kernel:"
	@echo "  $(BIN)/kernel-factory serve --out public --port $(PORT) &"
	@echo "  pip install 'img2grey==1.1.2+torch213cpucxx11' --index-url http://127.0.0.1:$(PORT)/simple"
	@echo "  pip install img2grey --index-url http://127.0.0.1:$(PORT)/variants/torch213cpucxx11/simple"
	@echo "(the kernels need torch 2.13: install it first, or add your usual index with --extra-index-url)"
	@echo "Browse the kernels: open public/index.html, or http://127.0.0.1:$(PORT)/ while serving."

serve: $(WHEEL)
	$(BIN)/kernel-factory serve --out public --port $(PORT)

# Debian packages the integration tests use (headless Chromium, the aarch64 cross compiler, nginx): the missing ones
# are named before apt-get installs them. APT_GET, CHROMIUM, CROSS_CXX and NGINX are for the test of this message.
APT_GET   ?= apt-get
CHROMIUM  ?= chromium
CROSS_CXX ?= aarch64-linux-gnu-g++
NGINX     ?= nginx
system-deps:
	@missing=""; \
	command -v $(CHROMIUM) >/dev/null || missing="$$missing chromium"; \
	command -v $(CROSS_CXX) >/dev/null || missing="$$missing g++-aarch64-linux-gnu"; \
	command -v $(NGINX) >/dev/null || [ -x /usr/sbin/$(NGINX) ] || missing="$$missing nginx"; \
	if [ -n "$$missing" ]; then \
	  echo "system-deps: installing Debian packages for the integration tests with $(APT_GET) (root needed):$$missing"; \
	  echo "system-deps: (chromium renders the index pages headless; g++-aarch64-linux-gnu builds the aarch64 test kernels;" \
	       "nginx runs docs/hub.md's recipe)"; \
	  $(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq $$missing >/dev/null; \
	fi

# torch 2.13 CPU: the fixtures are built against its headers, and mypy reads its types.
TORCH := $(VENV)/.torch
$(TORCH): $(STAMP)
	$(BIN)/python -m pip install -q torch==2.13.0
	touch $@

# With a coverage report of the installed package and its floor (pyproject.toml [tool.coverage]; docs/testing.md).
# The consumer matrix runs the oldest and the newest kernels stacks here (KF_TEST_STACKS, kernels versions);
# `make test-stacks` runs all three (docs/testing.md).
KF_TEST_STACKS ?= 0.17.2,0.19.1
test: $(WHEEL) $(TORCH) system-deps lint
	KF_TEST_STACKS=$(KF_TEST_STACKS) $(BIN)/python -m pytest -n 3 -q --durations=15 --cov --cov-report=term tests

test-stacks: $(WHEEL) $(TORCH)
	KF_TEST_STACKS= $(BIN)/python -m pytest -n 2 -q tests/integration/test_stack_matrix.py
	$(BIN)/python scripts/stack_table.py

# The minimum-versions job alone: the built wheel with every Requires-Dist at its lower bound, end to end.
# (`make test` runs it too.)
test-min: $(WHEEL)
	$(BIN)/python -m pytest -q tests/integration/test_installed.py -k TestLowest

unit: $(WHEEL)
	$(BIN)/python -m pytest -q tests/unit

lint: $(WHEEL) $(TORCH)
	$(BIN)/ruff check factory tests scripts
	$(BIN)/mypy factory scripts tests/index_synth.py tests/unit tests/integration
	$(BIN)/lint-imports
	$(BIN)/zizmor --offline --no-progress .github/workflows
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(BIN)/check-jsonschema --builtin-schema vendor.gitlab-ci examples/ci/gitlab-ci.yml
	$(BIN)/deptry factory

bench: $(WHEEL)
	$(BIN)/python -m pip install -q '.[test,bench]'
	$(BIN)/python scripts/bench_convert.py
	$(BIN)/python scripts/bench_rerun.py
	$(BIN)/python scripts/bench_index.py
	$(BIN)/python scripts/bench_prune.py
	$(BIN)/python scripts/bench_pipeline.py --s3-store
	$(BIN)/python scripts/bench_hub.py

# A mutation run (cosmic-ray) over store/check.py, index/pages.py, verify/digest.py, store/adopt.py against
# their unit tests; hours of CPU, not in CI (docs/testing.md). MUTANTS='--module verify/digest.py' for one.
mutants: $(WHEEL)
	$(BIN)/python -m pip install -q '.[mutants]'
	$(BIN)/python scripts/mutants.py $(MUTANTS)

clean:
	rm -rf public examples/repos tests/.cache

# On a machine with an NVIDIA GPU, nvcc and a CUDA torch (see docs/gpu.md).
gpu-e2e:
	bash scripts/gpu_e2e.sh
