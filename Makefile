# The two commands of a fresh machine:
#   make plan STACK=dev   set up .venv and write the offline plan of a stack to build/<stack>
#   make test             set up .venv and the Debian packages the tests need, lint, type-check, run every test
PYTHON ?= python3
VENV := .venv
STACK ?= dev
BIN := $(VENV)/bin

.PHONY: plan project-file policy-config bench go-tools test test-quick test-cloud test-tempest system-packages openstack-venv image-check lint clean

# What planning needs (requirements-plan.txt), and what the tests and linters need besides (requirements-dev.txt).
$(BIN)/.plan-installed: requirements.txt requirements-plan.txt policies/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-plan.txt
	touch $@

$(BIN)/.installed: $(BIN)/.plan-installed requirements-dev.txt
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

plan: $(BIN)/.plan-installed
	$(BIN)/python -m tools.plan --stack $(STACK) --out build/$(STACK)

# Pulumi.yaml from the settings model (tools/project_file.py): every key with its default; commit it.
project-file: $(BIN)/.installed
	$(BIN)/python -m tools.project_file --write

# policies/config/<stack>.json of every stack file, from its settings (tools/policy_config.py); commit them.
policy-config: $(BIN)/.installed
	$(BIN)/python -m tools.policy_config --write

# How long the plan takes: prod, and prod with 1/10/100/500 compute node groups (tools/bench.py).
bench: $(BIN)/.installed
	$(BIN)/python -m tools.bench

# As root it installs what is missing; otherwise it prints the one command to run, and stops.
system-packages:
	tests/lab/realenv/install_system_packages.sh

# The Go programs a user runs beside Python (the Pulumi CLI, its Kubernetes provider, kube-apiserver),
# built from the Go module proxy once per machine into ~/.cache/openstack-on-k8s/go-tools
# (tests/engine/build_go_tools.sh prints each tool's build seconds; later runs take a second).
go-tools:
	tests/engine/build_go_tools.sh

# The mock tests run on TEST_WORKERS processes (pytest-xdist; CI's machine has two cores); the
# tests against real servers and the running cloud then run in one, since they use fixed ports and
# the lab's network namespaces. Both always run, so one failing does not hide the other's report.
TEST_WORKERS ?= 2
MOCK_TESTS := -m "not real and not cloud" -n $(TEST_WORKERS)

test: system-packages go-tools $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest $(MOCK_TESTS); mock=$$?; \
	$(BIN)/python -m pytest -m "real or cloud"; real=$$?; \
	test $$mock -eq 0 && test $$real -eq 0

# Everything but the tests against real OpenStack code, servers and the running cloud.
test-quick: $(BIN)/.installed
	$(BIN)/python -m pytest $(MOCK_TESTS)

# The running cloud of the prod and staging plans (tests/lab/cloud): every pod, a VM, Horizon, VM safety.
test-cloud: system-packages $(BIN)/.installed
	$(BIN)/python -m pytest -m cloud

# Tempest's API tests of every service the stack deploys, against its running cloud (tests/lab/cloud/tempest_run.py):
# build/cloud/<stack>/tempest.json. prod unless STACK=staging; TEMPEST_WORKERS test workers (2: both cores).
# The stack's own release, deployed and tested by Tempest alone: make test-cloud runs the lab's scenarios.
test-tempest: STACK = prod
test-tempest: TEMPEST_WORKERS = 2
test-tempest: system-packages $(BIN)/.installed
	$(BIN)/python -m tests.lab.cloud --stack $(STACK) --tempest full --tempest-workers $(TEMPEST_WORKERS) --tempest-only

# Build (or reuse) the cached OpenStack virtualenvs of tests/real and tests/lab/cloud ahead of the tests:
# one per release the program deploys (components/settings/releases.py), about 2 min each the first time.
openstack-venv: $(BIN)/.installed
	$(BIN)/python -m tests.lab.realenv.openstack_venv --all

# Every container of every stack against its Kolla image as kolla builds it (tools/imagecheck;
# tests/real/test_image_contents.py runs the same check in `make test`). The first run fetches
# kolla, Ubuntu noble's indexes and PyPI metadata into .cache (a few minutes), later runs take seconds.
image-check: $(BIN)/.installed
	$(BIN)/python -m tools.imagecheck

# ruff, mypy (its files and settings: [tool.mypy] in pyproject.toml), then how the modules import
# each other (lint-imports: its contracts are [tool.importlinter] in pyproject.toml).
lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf build $(VENV)
