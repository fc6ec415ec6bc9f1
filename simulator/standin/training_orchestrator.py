"""SIMULATED: NxDT's examples/training_orchestrator.py in the clusterval simulator image. torchrun's stand-in
runs the simulated NxDT (/opt/clusterval/nxdt_train.py) when it is given this file, as the real torchrun runs
the real one; run by itself, it does what the real one needs torchrun for."""
import sys

sys.exit("[clusterval simulator] training_orchestrator.py runs under torchrun (see NxDT's examples/train.sh)")
