# kibitz: the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STOCKFISH ?= $(shell command -v stockfish 2>/dev/null || ls /usr/games/stockfish 2>/dev/null)

.PHONY: setup run test lint bench kafka kafka-stop clean stockfish gnugo katago browser

setup: $(STAMP) stockfish gnugo katago browser

$(PY):
	python3 -m venv $(VENV)

# reinstall only when the project metadata changes, so a second `make setup` takes seconds
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,rocksdb]'
	touch $(STAMP)

# an engine from Debian when it is missing: $(call engine,BINARY,ENV VARIABLE THAT OVERRIDES IT)
define engine
	@if command -v $(1) >/dev/null 2>&1 || [ -x /usr/games/$(1) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing $(1) from Debian"; \
	  (apt-get install -y -qq $(1) >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq $(1) >/dev/null)) \
	  || { echo "could not install $(1): run 'sudo apt-get install $(1)' or set $(2)=/path/to/$(1)"; exit 1; }; \
	else echo "$(1) is missing: run 'sudo apt-get install $(1)' (Debian/Ubuntu) or set $(2)=/path/to/$(1)"; exit 1; fi
endef

# chess games are analysed by Stockfish (UCI), Go games by GNU Go (GTP)
stockfish:
	$(call engine,stockfish,KIBITZ_ENGINE)

gnugo:
	$(call engine,gnugo,KIBITZ_GO_ENGINE)

# KataGo on the CPU for Go (OpenCL through PoCL, the katrain wheel's build; docs/go.md), once: its stamp is written by
# the script's last check
katago: .cache/katago/.ready

.cache/katago/.ready: deploy/katago/setup.sh deploy/katago/analysis.cfg | $(STAMP)
	bash deploy/katago/setup.sh

# the overlay's browser test and the Prometheus scrape test use Debian's chromium and prometheus
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium and prometheus from Debian (for the tests)"; \
	  (apt-get install -y -qq --no-install-recommends chromium prometheus >/dev/null 2>&1 \
	   || (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium prometheus >/dev/null)) \
	  || { echo "could not install chromium and prometheus: run 'sudo apt-get install chromium prometheus'"; exit 1; }; \
	else echo "chromium and prometheus are missing (the tests use them): run 'sudo apt-get install chromium prometheus'"; exit 1; fi

run: setup
	$(VENV)/bin/kibitz replay --demo --speed 60

# static checks first (seconds), then the tests (real Stockfish, real Kafka broker)
# the suite in parallel processes (pytest-xdist; each Kafka test process starts its own broker): much of its time is
# spent waiting on brokers, workers and paced streams; the tests marked solo run alone (tests/conftest.py)
TEST_PROCESSES ?= 2
test: setup lint
	$(PY) -m pytest -q --durations=10 -n $(TEST_PROCESSES) --dist worksteal

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy bench  # the benchmark scripts (not a package: they import each other as top-level modules)

# the quick benchmarks; bench/throughput.py, bench/accuracy.py and bench/fit_calibration.py run on their own
bench: setup
	$(PY) bench/rating_update.py
	$(PY) bench/engine_overhead.py

kafka:
	bash deploy/kafka/kafka.sh start

kafka-stop:
	bash deploy/kafka/kafka.sh stop

clean:
	rm -rf $(VENV) .cache build *.egg-info
