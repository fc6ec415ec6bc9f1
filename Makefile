# make demo: set up, bring up a 2-node simulated cluster, run the JAX and
#            Megatron seed configs through the real playbooks, tear down.
# make test: set up, lint, build the collection, run ansible-test sanity, unit and integration tests.
SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: setup test unit integration lint build sanity demo clean

setup:
	scripts/setup.sh

test: setup lint build sanity unit integration

unit:
	pytest -q tests/unit

integration:
	CLUSTERVAL_REQUIRE_CLUSTER=1 pytest -q tests/integration

lint:
	ansible-lint --offline -q roles playbooks

sanity:
	scripts/sanity.sh

build:
	rm -f clusterval-training-*.tar.gz
	ansible-galaxy collection build --force --output-path $(CURDIR) .

demo: setup
	scripts/demo.sh

clean:
	-scripts/simcluster down
	rm -rf runs clusterval-training-*.tar.gz
