# The two commands of the README, and the developer loop (docs/contributing.md).
#   make demo   create .venv if missing, install, run the demo
#   make test   install, then every test: C++ (normal and ASan+UBSan, via CTest) and Python (pytest)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
JOBS ?= $(shell nproc)

.PHONY: demo test install cpp-test asan-test tsan-test py-test bench clean

demo: install
	$(PY) -m pyarrow_ops demo

test: install cpp-test asan-test tsan-test py-test

# An editable install whose C++ part lives in build/<wheel tag> and is rebuilt on import when a
# source changed (editable.rebuild), so the edit-build-test loop is: edit, run pytest.
install: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
# setuptools and wheel: with --no-build-isolation, sdists among the dependencies (PyPI serves pyspark as
# one) are built in this venv, so it needs their build backend.
	$(PY) -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.4" cmake ninja setuptools wheel
	$(PY) -m pip install -q --no-build-isolation -Ceditable.rebuild=true -Ceditable.verbose=false -Ccmake.define.PYARROW_OPS_TESTING=ON -e '.[test,bench,spark]'
	touch $@

cpp-test: install
	$(BIN)/cmake -S . -B build/cpp -G Ninja -DPYARROW_OPS_DEVELOPER=ON >/dev/null
	$(BIN)/cmake --build build/cpp -j $(JOBS)
	$(BIN)/ctest --test-dir build/cpp --output-on-failure

asan-test: install
	$(BIN)/cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPYARROW_OPS_DEVELOPER=ON \
		-DPYARROW_OPS_SANITIZE=address,undefined >/dev/null
	$(BIN)/cmake --build build/asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 $(BIN)/ctest --test-dir build/asan --output-on-failure

# The concurrent parts' stress tests under ThreadSanitizer: the T-Gate, the merge on several
# threads (its fork-join), and the multiway aggregate
# (queues, gate, pushers, producers, cancel), the reorder buffers and partition queues (sync), the
# ordered runtime (workers, ingress, finish), and the partitioned operators (partitions on
# threads); the other binaries add nothing there.
tsan-test: install
	$(BIN)/cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPYARROW_OPS_DEVELOPER=ON \
		-DPYARROW_OPS_SANITIZE=thread >/dev/null
	$(BIN)/cmake --build build/tsan -j $(JOBS) --target test_tgate test_gate test_whive test_multiway test_sync test_runtime test_keyed test_parametric
	TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/engine/test_tgate
	TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/engine/test_gate
	TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/engine/test_whive
	TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/engine/test_multiway
	TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/engine/test_sync
	TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/engine/test_runtime
	TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/engine/test_keyed
	TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/engine/test_parametric

py-test: install
	$(PY) -m pytest

bench: install
	$(PY) -m benchmarks.merge

clean:
	rm -rf build $(VENV) asv_bench/.asv
