# make demo: set up, bring up a 2-node simulated cluster, run the JAX and
#            Megatron seed configs through the real playbooks, tear down.
# make test: set up, lint, build the collection, run ansible-test sanity, unit and integration tests
#            (the integration tests include the Molecule scenarios of extensions/molecule).
# make real: only the real-framework tests (real MaxText and JAX on CPU in the simulated nodes).
# make molecule: only the Molecule scenarios, on a simulated cluster brought up and down for them.
# make ee:   build the collection, then the execution environment of execution-environment.yml
#            (ansible-builder; needs podman or docker that can pull the base image; docs/awx.md).
SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: setup test unit integration real molecule lint build sanity demo clean ee

setup:
	scripts/setup.sh

test: setup lint build sanity unit integration

unit:
	pytest -q tests/unit

# Facts are not injected as variables (a future ansible-core's default): every read of the plan goes
# through ansible_facts or a registered result.
# 4 simulated nodes: the silent-failure, fabric and node-health cases need them. Two pytest-xdist workers by
# default, each with a cluster of its own (tests/integration/conftest.py), a test file each at a time: on 2 cores
# 28 to 32 minutes instead of 54 on one. CLUSTERVAL_TEST_WORKERS=0: one session, one cluster.
integration:
	ANSIBLE_INJECT_FACT_VARS=False CLUSTERVAL_REQUIRE_CLUSTER=1 CLUSTERVAL_SIMCLUSTER_NODES=$${CLUSTERVAL_SIMCLUSTER_NODES:-4} \
	  pytest -q -n $${CLUSTERVAL_TEST_WORKERS:-2} --dist loadfile tests/integration

# Only the real-framework group: real MaxText, JAX and XLA on CPU in the simulated nodes.
real: setup
	ANSIBLE_INJECT_FACT_VARS=False CLUSTERVAL_REQUIRE_CLUSTER=1 pytest -q -m real tests/integration

molecule: setup
	CLUSTERVAL_REQUIRE_CLUSTER=1 pytest -q tests/integration/test_molecule.py

lint:
	ansible-lint --offline -q roles playbooks extensions/molecule

sanity:
	scripts/sanity.sh

build:
	rm -f clusterval-training-*.tar.gz
	ansible-galaxy collection build --force --output-path $(CURDIR) .

ee: build
	ansible-builder build -f execution-environment.yml --context context

demo: setup
	scripts/demo.sh

clean:
	-scripts/simcluster down
	rm -rf runs context clusterval-training-*.tar.gz
