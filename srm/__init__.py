"""srm: the library shared by every entry point (CLI, Spark jobs, DAGs, REST plugin)."""

__version__ = "0.1.0"
