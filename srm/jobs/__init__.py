"""The Spark jobs, as spark-submit runs them (srm.spark.submit.job_script): replicate.py and
checkpoints.py, inside the package so that an installed wheel runs them without a checkout. The
checkout's spark/replicate.py and spark/checkpoints.py call the same ``main``."""
