# mbfg_ros developer entry points. Everything runs from the project venv (.venv),
# which `make venv` builds from requirements.txt using only PyPI (ROS 2 Kilted wheels).
# `make test-jazzy` builds a second venv (.venv-jazzy) from requirements-jazzy.txt
# (the ROS 2 Jazzy LTS wheels) and runs the ROS tests (-m ros) against it.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON3 ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
VENV_JAZZY := .venv-jazzy
PY_JAZZY := $(VENV_JAZZY)/bin/python
STAMP_JAZZY := $(VENV_JAZZY)/.installed

# ROS 2 environment for the ros-* wheels (Kilted). Nothing here is strictly required:
# rclpy works with no variables set (the wheels' bootstrapper sets LD_LIBRARY_PATH and
# re-execs python). RMW_IMPLEMENTATION: rmw_fastrtps_cpp is the only RMW installed and
# the default; any other value makes rclpy.init() fail. Kilted's rcl no longer reads
# ROS_LOCALHOST_ONLY; ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST is its replacement.
# A private domain id keeps test traffic away from other ROS graphs on the host.
export RMW_IMPLEMENTATION ?= rmw_fastrtps_cpp
export ROS_DOMAIN_ID ?= 42
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST

.PHONY: all venv venv-jazzy test test-jazzy test-all demo bench lint mutants clean distclean

all: test

venv: $(STAMP)

$(PY):
	$(PYTHON3) -m venv $(VENV) || { \
	  echo "error: '$(PYTHON3) -m venv' failed (on Debian: apt-get install python3-venv)" >&2; \
	  rm -rf $(VENV); exit 1; }

$(STAMP): requirements.txt setup.py | $(PY)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt
	$(PY) -m pip install -e . --no-deps
	touch $@

# pytest without -q names each test file with its dots and a running percentage; the
# conftest adds one line per test folder (counts, summed time) before the closing 'N passed'.
test: venv
	$(PY) -m pytest -p no:cacheprovider test

venv-jazzy: $(STAMP_JAZZY)

$(PY_JAZZY):
	$(PYTHON3) -m venv $(VENV_JAZZY) || { \
	  echo "error: '$(PYTHON3) -m venv' failed (on Debian: apt-get install python3-venv)" >&2; \
	  rm -rf $(VENV_JAZZY); exit 1; }

$(STAMP_JAZZY): requirements-jazzy.txt setup.py | $(PY_JAZZY)
	$(PY_JAZZY) -m pip install --upgrade pip
	$(PY_JAZZY) -m pip install -r requirements-jazzy.txt
	$(PY_JAZZY) -m pip install -e . --no-deps
	touch $@

# The ROS tests (DDS nodes, services, parameters, executors) on ROS 2 Jazzy; the rest of
# the suite does not touch rclpy and runs once, on Kilted (make test).
test-jazzy: venv-jazzy
	$(PY_JAZZY) -m pytest -p no:cacheprovider -m ros test

test-all: test test-jazzy

demo: venv
	$(PY) -m mbfg_ros.cli.demo

bench: venv
	@shopt -s nullglob; for f in bench/*.py; do \
	  echo "== $$f"; $(PY) "$$f"; \
	done

lint: venv
	$(PY) -m ruff check mbfg_ros test bench scripts

# Mutation testing (issue 29; not in CI, not in `make test`: it takes tens of minutes).
# mutmut (requirements-dev.txt) mutates the files of setup.cfg [mutmut] one change at a time
# and runs the fast tests listed there on each; the score and the survivors are printed.
# MUTANTS selects by mutant name (fnmatch): the estimation core, the input path of the
# estimator and the driver, the ROS conversions and the bag I/O. A smaller run:
#   make mutants MUTANTS='mbfg_ros.estimation.gate.*'
# Results stay in mutants/ (a rerun skips what is unchanged). Report: docs/mutation-testing.md.
EST := mbfg_ros.estimation.estimator.xǁEstimatorǁ
DRV := mbfg_ros.ros.driver.xǁEstimatorDriverǁ
MUTANTS ?= 'mbfg_ros.estimation.gate.*' 'mbfg_ros.estimation.observations.*' \
  'mbfg_ros.estimation.start.*' \
  '$(EST)add__mutmut_*' '$(EST)_add__mutmut_*' '$(EST)_values__mutmut_*' \
  '$(EST)_sigma__mutmut_*' '$(EST)_joint_obs__mutmut_*' '$(EST)_imu_obs__mutmut_*' \
  '$(EST)_var__mutmut_*' '$(EST)_gate__mutmut_*' \
  'mbfg_ros.ros.conversions.*' \
  '$(DRV)joint_state__mutmut_*' '$(DRV)imu__mutmut_*' '$(DRV)_gated__mutmut_*' \
  '$(DRV)push__mutmut_*' \
  'mbfg_ros.core.bag.*'
MUTANT_JOBS ?= 2

mutants: venv
	$(PY) -m pip install -q -r requirements-dev.txt
	PATH="$(abspath $(VENV))/bin:$$PATH" nice -n 10 $(VENV)/bin/mutmut run \
	  --max-children $(MUTANT_JOBS) $(MUTANTS) > mutants.log 2>&1 || \
	  { tail -n 30 mutants.log; exit 1; }
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/mutmut results --all true \
	  | $(PY) scripts/mutation_score.py $(MUTANTS)

clean:
	rm -rf build install log out .pytest_cache .ruff_cache *.egg-info mutants mutants.log
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(VENV_JAZZY)
