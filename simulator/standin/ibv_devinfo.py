"""Stand-in for rdma-core's ibv_devinfo in the clusterval simulator image (SIMULATED: no HCA exists).

The simulated node has the HCAs the job names in NCCL_IB_HCA (or CLUSTERVAL_SIM_HCAS), less
CLUSTERVAL_SIM_MISSING_HCA on the rank CLUSTERVAL_SIM_MISSING_HCA_RANK (default: every rank).
Prints what the real tool prints for ``-l`` and, without options, one ``hca_id:`` block per HCA.
"""
import os
import sys


def simulated_hcas():
    names = os.environ.get("CLUSTERVAL_SIM_HCAS") or os.environ.get("NCCL_IB_HCA", "")
    hcas = [item.split(":")[0] for item in names.lstrip("=^").split(",") if item.strip()]
    missing = os.environ.get("CLUSTERVAL_SIM_MISSING_HCA", "")
    rank = os.environ.get("CLUSTERVAL_SIM_MISSING_HCA_RANK", "")
    if missing and rank in ("", os.environ.get("NODE_RANK", "0")):
        hcas = [hca for hca in hcas if hca != missing]
    return hcas


def main(argv):
    hcas = simulated_hcas()
    if not hcas:
        print("No IB devices found.")
        return 255
    if "-l" in argv or "--list" in argv:
        print("%d HCA%s found:" % (len(hcas), "" if len(hcas) == 1 else "s"))
        for hca in hcas:
            print("\t%s" % hca)
        return 0
    for hca in hcas:
        print("hca_id:\t%s\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n" % hca)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
