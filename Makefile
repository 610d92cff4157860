# The two commands of a fresh machine:
#   make plan STACK=dev   set up .venv and write the offline plan of a stack to build/<stack>
#   make test             set up .venv and run the whole test suite
PYTHON ?= python3
VENV := .venv
STACK ?= dev
BIN := $(VENV)/bin

.PHONY: plan test test-quick openstack-venv lint clean

$(BIN)/.installed: requirements.txt requirements-dev.txt policies/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

plan: $(BIN)/.installed
	$(BIN)/python -m tools.plan --stack $(STACK) --out build/$(STACK)

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

# Everything but the tests against real OpenStack code and servers.
test-quick: $(BIN)/.installed
	$(BIN)/python -m pytest -m "not real"

# Build (or reuse) the cached OpenStack virtualenv of tests/real ahead of the tests.
openstack-venv: $(BIN)/.installed
	$(BIN)/python -m tools.realenv.openstack_venv

lint: $(BIN)/.installed
	$(BIN)/ruff check .

clean:
	rm -rf build $(VENV)
