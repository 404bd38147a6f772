# make test: local virtual environment, build, C++ tests (ctest) and Python tests (pytest).
# make demo: the same set-up, then the Lorenz ensemble demo (summary + plot).
# make examples: the worked applications in examples/ (each times shoal against diffrax).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JOBS ?= 2
# pytest workers (pytest-xdist): the suite is mostly compiling models, one compiler at a time
# per worker, so one worker per core.
TEST_JOBS ?= $(JOBS)

.PHONY: all venv build cpp-test py-test test demo bench examples lint clean

all: build

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.4" cmake ninja
	$(PY) -m pip install -q "jax>=0.5,<0.11" "jaxlib>=0.5,<0.11" numpy scipy cvxopt "tqdm>=4.60" pytest "pytest-xdist>=3.5" hypothesis diffrax matplotlib blackjax ruff
	touch $@

venv: $(VENV)/.installed

# The extension modules, written into shoal/ (SHOAL_INPLACE) so the checkout imports directly.
build: venv
	$(VENV)/bin/cmake -S . -B build/py -G Ninja -DSHOAL_BUILD_PYTHON=ON -DSHOAL_INPLACE=ON \
	  -DPython_EXECUTABLE=$(abspath $(PY)) >/dev/null
	$(VENV)/bin/cmake --build build/py -j $(JOBS)

cpp-test: venv
	$(VENV)/bin/cmake -S . -B build/cpp -G Ninja -DSHOAL_BUILD_TESTS=ON >/dev/null
	$(VENV)/bin/cmake --build build/cpp -j $(JOBS)
	cd build/cpp && ../../$(VENV)/bin/ctest --output-on-failure -j $(JOBS)

py-test: build
	$(PY) -m pytest -q -n $(TEST_JOBS) --durations=25 tests

test: cpp-test py-test

demo: build
	$(PY) -m shoal.demo

bench: build
	$(PY) benchmarks/lorenz_tsit5.py

# The worked applications at full size: each writes its plot next to its main.py.
EXAMPLES := bbn igm_21cm mukhanov_sasaki scf
examples: build
	for e in $(EXAMPLES); do $(PY) examples/$$e/main.py || exit 1; done

# ruff's linter only: the code is laid out by hand (100 columns, continuation lines aligned with
# their bracket), which `ruff format` would rewrite in 137 files.
lint: venv
	$(VENV)/bin/ruff check shoal tests benchmarks scripts examples

clean:
	rm -rf build shoal/ode/*.so shoal/linalg/*.so
