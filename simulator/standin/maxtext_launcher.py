"""MaxText train.py of the clusterval simulator image: runs the stand-in in /opt/clusterval."""
import sys

sys.path.insert(0, "/opt/clusterval")
from maxtext_train import main  # noqa: E402

sys.exit(main(sys.argv, __file__))
