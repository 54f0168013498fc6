"""spark-submit spark/replicate.py ...: the job of srm/jobs/replicate.py (where spark-submit finds it in an
installed package), from a checkout."""

from __future__ import annotations

import sys

from srm.jobs.replicate import main

if __name__ == "__main__":
    sys.exit(main())
