# Two commands for a newcomer: `make run` and `make test`. Everything else is a helper target.
SHELL := /bin/bash
PORT ?= 8000
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test test-fast install images serve clean-venv

$(VENV)/.installed: pyproject.toml uv.lock scripts/bootstrap
	scripts/bootstrap
	@touch $@

install: $(VENV)/.installed

# Local defaults for every `manage.py` command typed by hand (DEBUG=1: SQLite, SQLite
# broker, development key). Written once, never overwritten; production sets real variables.
.env:
	cp .env.example .env

run: install .env
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py load_demo
	DEBUG=1 $(PY) manage.py sync_tasks || echo "make run: some task packages were not registered (see above); serving the rest"
	DEBUG=1 PORT=$(PORT) $(PY) scripts/run-dev

test: install
	scripts/run-tests

# Everything that needs neither Docker nor a browser (pytest -m "not docker and not browser").
test-fast: install
	scripts/run-tests --fast

images: install
	scripts/build-images
