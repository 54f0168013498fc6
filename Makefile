# One-command workflows. `make demo` and `make test` work on a fresh machine: they install what
# they need (Python venv, JVM jars) and are quick no-ops when everything is already in place.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
UV_VERSION := 0.13.8
VENV := .venv
BIN := $(VENV)/bin
# Spark's launcher scripts and `airflow standalone` find python/airflow on PATH.
export PATH := $(CURDIR)/$(BIN):$(PATH)
JVM_CACHE := .cache/jvm
MVN := mvn -B -q

.PHONY: help install browser prometheus jars kafka-up kafka-down kafka-status demo airflow test test-bench test-unit lint lock docs clean bench bench-quick \
	compose-cli docker-tools image compose-up compose-down test-compose

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

# --- installation -------------------------------------------------------------------------------
install: $(VENV)/.installed  ## create .venv and install the pinned dependencies and the project

$(VENV)/.installed: requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 needed, found " + sys.version'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv==$(UV_VERSION)
	@# --compile-bytecode on each install of packages: uv writes no bytecode otherwise, and where
	@# PYTHONDONTWRITEBYTECODE is set every process would compile its imports from source
	@# (bench/REPORT.md, 2026-11-28). It compiles what that step installed, not the editable project.
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -r requirements.lock
	@# pyspark after everything else: apache-airflow-providers-apache-spark pulls pyspark-client,
	@# which installs into the same pyspark/ folder. Reinstalling pyspark makes its files win;
	@# never uninstall pyspark-client afterwards (its file list would delete pyspark's files).
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python --no-deps --reinstall-package pyspark pyspark==4.3.0
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e .
	$(BIN)/python -c 'import pyspark, airflow, confluent_kafka; assert pyspark.__version__ == "4.3.0", pyspark.__version__'
	touch $@

# Headless Chromium for the test of the Replications page (Debian's packages; root or sudo).
browser:  ## install Debian's chromium and chromedriver if missing (tests of the Replications page)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium chromium-driver; }

prometheus:  ## install Debian's prometheus (the server and promtool) if missing (tests of the metrics, alert rules)
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || { \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends prometheus; }

lock:  ## re-resolve requirements.lock from pyproject.toml (needs the network)
	$(BIN)/uv pip compile pyproject.toml --extra dev --extra deploy --no-emit-package pyspark --python-version 3.11 -o requirements.lock

jars: $(JVM_CACHE)/kafka/.resolved  ## resolve Kafka broker/tools/MM2 jars with Maven into .cache/jvm

$(JVM_CACHE)/kafka/.resolved: conf/jvm/kafka/pom.xml
	rm -rf $(JVM_CACHE)/kafka && mkdir -p $(JVM_CACHE)/kafka
	$(MVN) -f conf/jvm/kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	    -DoutputDirectory=$(CURDIR)/$(JVM_CACHE)/kafka
	touch $@

# --- local clusters -----------------------------------------------------------------------------
kafka-up: install jars  ## start the clusters conf/srm.yaml marks as local (idempotent)
	$(BIN)/srm-control local up

kafka-down: install  ## stop the local clusters started by kafka-up
	$(BIN)/srm-control local down

kafka-status: install  ## show the local clusters
	$(BIN)/srm-control local status

# --- the two commands of the README --------------------------------------------------------------
demo: kafka-up  ## install, start the local clusters, run the first flow end to end through its Airflow DAGs
	$(BIN)/srm-control validate
	$(BIN)/python -m srm.devenv.demo

airflow: kafka-up  ## the Airflow UI with the flows' DAGs: airflow standalone on http://127.0.0.1:8080
	$(BIN)/python -m srm.devenv.airflow standalone

# --- the docker-compose stack (docker-compose.yaml; docs/deployment.md) ----------------------------
SRM_IMAGE ?= srm:latest
# COMPOSE_OFFLINE=1 (no image registry, as on this machine): PostgreSQL, Redis and Kafka from images built
# here (conf/compose/offline.yaml), on a base made from Debian's packages (debootstrap, as root or sudo);
# its volumes are a project of their own (srm-offline), never mixed with the online stack's.
BASE_IMAGE ?= $(if $(COMPOSE_OFFLINE),srm-base:bookworm,debian:bookworm-slim)
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
COMPOSE_CMD = $(COMPOSE) -p $(if $(COMPOSE_OFFLINE),srm-offline,srm) -f docker-compose.yaml $(if $(COMPOSE_OFFLINE),-f conf/compose/offline.yaml)
SUDO = $$( [ "$$(id -u)" = 0 ] || echo sudo )
APT_INSTALL = $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends

compose-cli:  ## install Debian's docker-compose if there is no compose command (make test validates docker-compose.yaml)
	@docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || { $(APT_INSTALL) docker-compose; }

docker-tools: compose-cli  ## Docker from Debian's docker.io when there is none, and dockerd started if it is not running
	@docker info >/dev/null 2>&1 || command -v dockerd >/dev/null || { $(APT_INSTALL) docker.io; }
	@docker info >/dev/null 2>&1 || { \
	    mkdir -p .local; echo "starting dockerd (log: .local/dockerd.log)"; $(SUDO) nohup dockerd >.local/dockerd.log 2>&1 & \
	    for i in $$(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done; docker info >/dev/null; }

image: docker-tools  ## build the project image (srm:latest) on BASE_IMAGE (and srm-services:local with COMPOSE_OFFLINE=1)
	@cp -f /usr/local/share/ca-certificates/*.crt conf/compose/ca-certificates/ 2>/dev/null || true
	@case "$(BASE_IMAGE)" in srm-base:*) command -v debootstrap >/dev/null || { $(APT_INSTALL) debootstrap; }; \
	    conf/compose/base-image.sh $(BASE_IMAGE);; esac
	docker build -q --network host --build-arg BASE_IMAGE=$(BASE_IMAGE) -t $(SRM_IMAGE) .
	$(if $(COMPOSE_OFFLINE),docker build -q --network host --build-arg BASE_IMAGE=$(BASE_IMAGE) -f conf/compose/services.Dockerfile -t srm-services:local .)

compose-up: install image  ## the stack up (writes .env with fresh secrets if missing), healthy, UI address and login printed
	$(BIN)/python -m srm.devenv.compose env
	$(BIN)/python -m srm.devenv.compose check --env-file .env
	$(COMPOSE_CMD) up -d
	$(BIN)/python -m srm.devenv.compose wait -- $(COMPOSE_CMD)

compose-down:  ## stop and remove the stack's containers and network (volumes kept: add -v by hand to drop them)
	$(COMPOSE_CMD) down --remove-orphans

test-compose: COMPOSE_OFFLINE = 1
test-compose: install image  ## the compose stack end to end on images built here: up, demo flow through the DAG, down
	$(BIN)/pytest -s -m compose tests/compose

# --- benchmarks (never part of a test's verdict; bench/REPORT.md) -------------------------------
BENCH_OUT ?= bench
BENCH_QUICK_OUT ?= .local/bench-quick

bench: kafka-up  ## every benchmark vs MirrorMaker 2 and the brokers' limit (~50 min): bench/REPORT.md + results.json
	$(BIN)/python -m bench.run --preset full --out $(BENCH_OUT)

bench-quick: kafka-up  ## every benchmark on small inputs (~8 min), to check they run: .local/bench-quick/REPORT.md
	$(BIN)/python -m bench.run --preset quick --out $(BENCH_QUICK_OUT)

# The tests with brokers mostly wait on brokers, Spark and Airflow (a run of them used 0.8 of the 2
# cores): they run in two processes, a file's tests in one, each process with clusters, Spark and
# Airflow of its own; the tests marked alone (a capture of all loopback traffic, response-time bounds)
# then run by themselves. The tests that need no broker (tests/unit, a minute of CPU) run beside the
# first ones; their output follows, whole if one failed.
test: install jars browser prometheus compose-cli lint  ## install and run the whole test suite (lint, types, unit, integration)
	@mkdir -p .local
	@$(BIN)/pytest -q -p no:cacheprovider --basetemp=.local/unit-tests -m "not bench and not compose" tests/unit \
	    > .local/unit-tests.log 2>&1 & unit=$$!; \
	$(BIN)/pytest -n 2 --dist loadfile -m "not bench and not compose and not alone" --ignore=tests/unit; status=$$?; \
	$(BIN)/pytest -m "alone and not bench and not compose" --ignore=tests/unit; alone=$$?; \
	wait $$unit; unit_status=$$?; \
	if [ $$unit_status -eq 0 ]; then tail -n 3 .local/unit-tests.log; else cat .local/unit-tests.log; fi; \
	[ $$status -eq 0 ] && [ $$alone -eq 0 ] && [ $$unit_status -eq 0 ]

test-bench: install jars  ## smoke runs of make bench-quick, bench.eos_floor, bench.broker_load --profile and a 4-minute bench.soak (~15 min) checked by tests; CI runs it after make test
	$(BIN)/pytest -m bench tests/bench

test-unit: install  ## only the tests that need no broker
	$(BIN)/pytest tests/unit

lint: install  ## ruff (lint + format check), mypy --strict and the import layers
	$(BIN)/ruff check srm include tests spark bench dags plugins
	$(BIN)/ruff format --check srm include tests spark bench dags plugins
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache  # srm/'s layers (pyproject.toml [tool.importlinter])

docs: install  ## the documentation site (MkDocs) into .local/site
	$(BIN)/mkdocs build --strict

clean:  ## remove the venv, jar cache and local cluster data (stops nothing: run kafka-down first)
	rm -rf $(VENV) .cache .local
