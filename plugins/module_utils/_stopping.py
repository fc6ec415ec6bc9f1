# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the controller says when a run stops abnormally: an interrupt, a failed teardown."""
from __future__ import annotations

import shlex
from typing import Mapping, Optional, Sequence


def interrupt_line(signal_name: str, run_id: Optional[str], inventories: Sequence[str],
                   lease_timeout: Optional[object]) -> str:
    """One line: the nodes stop their jobs within the lease timeout, and how to stop them now."""
    within = "train_lease_timeout, %ss" % lease_timeout if lease_timeout not in (None, "") else "train_lease_timeout"
    inventory = " ".join("-i %s" % shlex.quote(str(path)) for path in inventories) or "-i <inventory>"
    which = "-e training_run_id=%s" % shlex.quote(run_id) if run_id else "(every run of the collection)"
    return ("clusterval: %s: the controller stops here; the nodes stop the job%s themselves within the lease timeout "
            "(%s). To stop them now: ansible-playbook %s clusterval.training.teardown %s"
            % (signal_name, " of run %s" % run_id if run_id else "", within, inventory, which))


def final_verdict(headline: str, failed_hosts: Sequence[str], teardown_failures: Mapping[str, str]) -> str:
    """The VERDICT line's text: never PASS when a host failed (the playbook's rc is then non-zero)."""
    if teardown_failures:
        causes = "; ".join(teardown_failures[host] for host in sorted(teardown_failures))
        if headline.startswith("PASS"):
            return "FAIL: teardown failed: %s" % causes
        return "%s; teardown failed: %s" % (headline, causes)
    if headline.startswith("PASS") and failed_hosts:
        return "FAIL: the run failed after the verdict on %s (see above)" % ", ".join(sorted(failed_hosts))
    return headline
