# The two set-up commands of the README: `make run` and `make test`.
# Each creates .venv and installs the project (editable, with test extras) when needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-x11 bundle bundle-gpu

# -c: the versions CI tested (packaging/constraints.txt); a newer release comes in by changing that file.
CONSTRAINTS := packaging/constraints.txt
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check -q -c $(CONSTRAINTS)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/heatsearch $(ARGS)

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q $(PYTEST_ARGS)

# The GUI tests once more in a real X11 window (needs Debian's xvfb: apt-get install -y xvfb).
test-x11: $(STAMP)
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(PY) -m pytest -q tests/gui

# The CPU edition (no PyTorch: the built-in models run on OpenVINO), and the edition with PyTorch.
bundle: $(STAMP)
	$(PIP_INSTALL) -e '.[package]'
	HEATSEARCH_BUNDLE=cpu $(VENV)/bin/python packaging/build.py

bundle-gpu: $(STAMP)
	$(PIP_INSTALL) -e '.[package]'
	HEATSEARCH_BUNDLE=gpu $(VENV)/bin/python packaging/build.py
