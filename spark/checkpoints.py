"""spark-submit spark/checkpoints.py ...: the job of srm/jobs/checkpoints.py (where spark-submit finds it in an
installed package), from a checkout."""

from __future__ import annotations

import sys

from srm.jobs.checkpoints import main

if __name__ == "__main__":
    sys.exit(main())
