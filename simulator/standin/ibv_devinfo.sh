#!/bin/sh
# Stand-in for rdma-core's ibv_devinfo in the clusterval simulator image (SIMULATED: no HCA exists).
exec python3 /opt/clusterval/ibv_devinfo.py "$@"
