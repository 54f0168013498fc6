"""The archive a Spark job ships to executors that do not run on this machine.

Executors of a Spark cluster see neither this checkout nor its virtual environment. The archive
holds what their Python workers import: the project's packages (``srm``, ``include``) and the
distributions the copy tasks use (:data:`EXECUTOR_DISTRIBUTIONS`) with everything they depend on,
copied file by file from this environment, so their versions are the lock's. spark-submit ships it
with ``spark.archives`` (Spark unpacks it as ``srm-env`` in each executor's working folder) and
puts it on the workers' path (``spark.executorEnv.PYTHONPATH``). pyspark itself comes from the
cluster's Spark, which must be the same version.

The executors' interpreter (``spark.pyspark.python``) must be a CPython of the driver's minor
version (pyspark refuses others; the archive holds compiled extensions for it). The archive also
holds every module's bytecode for that version, as unchecked-hash ``.pyc`` files (PEP 552) beside
the sources: an executor's folder is new for every application, so without them each Python worker
compiled everything it imports from source before its first task. The archive is built once per
content: its name carries a digest of the distributions and the project's files; one is kept per
content the checkout has had (not per run: a job in progress may still serve it to new executors),
until ``make clean`` removes ``.local``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import importlib.util
import logging
import os
import py_compile
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement

from srm.errors import SrmError
from srm.paths import local_dir, project_root

log = logging.getLogger(__name__)

EXECUTOR_DISTRIBUTIONS = (
    "confluent-kafka",
    "interegular",
    "javaproperties",
    "kafka-python",  # a copier ends transactions Kafka left open (srm.kafka.hanging)
    "pydantic",
    "PyYAML",
    "tenacity",
)
PROJECT_PACKAGES = ("srm", "include")
LAYOUT = "sources and unchecked-hash bytecode"  # in the digest: an archive of another layout is not reused
ALIAS = "srm-env"  # the folder Spark unpacks the archive into, in each executor's working folder


def distributions(roots: tuple[str, ...] = EXECUTOR_DISTRIBUTIONS) -> list[md.Distribution]:
    """``roots`` and their dependencies (markers evaluated for this interpreter, no extras)."""
    found: dict[str, md.Distribution] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        key = _normal(name)
        if key in found:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise SrmError(f"the executors' archive needs the distribution {name!r}, not installed here") from None
        found[key] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return sorted(found.values(), key=lambda d: _normal(d.metadata["Name"]))


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _members(dists: list[md.Distribution]) -> Iterator[tuple[Path, str]]:
    """(file on this machine, name in the archive) of everything the archive holds."""
    for dist in dists:
        for file in dist.files or []:
            if file.parts[0] == ".." or "__pycache__" in file.parts:  # scripts in bin/, caches
                continue
            yield Path(str(dist.locate_file(file))), file.as_posix()
    root = project_root()
    for package in PROJECT_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            yield path, path.relative_to(root).as_posix()


def build(directory: Path | None = None) -> Path:
    """The archive for this environment and checkout, built unless one of the same content exists."""
    dists = distributions()
    members = sorted(_members(dists), key=lambda m: m[1])
    digest = hashlib.sha256(f"{sys.version_info[:2]} {LAYOUT}".encode())
    for path, name in members:
        digest.update(name.encode())
        digest.update(path.read_bytes() if name.endswith(".py") else str(path.stat().st_size).encode())
    for dist in dists:
        digest.update(f"{dist.metadata['Name']}=={dist.version}".encode())
    folder = directory or local_dir() / "job-archives"
    archive = folder / f"srm-env-py{sys.version_info[0]}{sys.version_info[1]}-{digest.hexdigest()[:16]}.tar.gz"
    if archive.exists():
        return archive
    folder.mkdir(parents=True, exist_ok=True)
    log.info("building the executors' archive %s (%d files)", archive, len(members))
    fd, partial = tempfile.mkstemp(dir=folder, suffix=".partial")
    os.close(fd)
    try:
        with tarfile.open(partial, "w:gz", compresslevel=1) as tar, tempfile.TemporaryDirectory() as compiled:
            for path, name in members:
                tar.add(path, arcname=name, recursive=False)
                if name.endswith(".py"):
                    bytecode = _compile(path, name, Path(compiled) / "module.pyc")
                    if bytecode is not None:
                        tar.add(bytecode, arcname=importlib.util.cache_from_source(name), recursive=False)
        os.replace(partial, archive)  # whole or absent: jobs started at once may build it twice
    finally:
        Path(partial).unlink(missing_ok=True)
    return archive


def _compile(source: Path, name: str, pyc: Path) -> Path | None:
    """``source``'s bytecode for this interpreter in ``pyc``, valid whatever the file's time after
    unpacking; None for a file that is not valid Python here (a distribution's template, a
    module of another Python version): its importer, if any, compiles it as before."""
    try:
        unchecked = py_compile.PycInvalidationMode.UNCHECKED_HASH
        py_compile.compile(str(source), cfile=str(pyc), dfile=name, doraise=True, invalidation_mode=unchecked)
    except py_compile.PyCompileError:
        return None
    return pyc


def executor_python() -> str:
    """The default interpreter of executors off this machine: ``python3.<minor>`` of the driver's version."""
    return f"python{sys.version_info[0]}.{sys.version_info[1]}"


def spark_conf(archive: Path) -> dict[str, str]:
    """Spark settings that ship ``archive`` and put it on the executors' Python path."""
    return {
        "spark.archives": f"{archive.resolve().as_uri()}#{ALIAS}",
        "spark.executorEnv.PYTHONPATH": ALIAS,
    }
