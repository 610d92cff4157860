# The two commands of a fresh machine:
#   make plan STACK=dev   set up .venv and write the offline plan of a stack to build/<stack>
#   make test             set up .venv and run the whole test suite
PYTHON ?= python3
VENV := .venv
STACK ?= dev
BIN := $(VENV)/bin

.PHONY: plan test lint clean

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

lint: $(BIN)/.installed
	$(BIN)/ruff check .

clean:
	rm -rf build $(VENV)
