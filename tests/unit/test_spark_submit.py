"""How a job is submitted: which master is local, which settings ship the project off this machine."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from pydantic import SecretStr

from srm.config.model import Cluster
from srm.errors import SrmError
from srm.spark import job_archive
from srm.spark.session import (
    AUTH_SECRET_ENV,
    DEFAULT_MASTER,
    check_master,
    is_local,
    job_conf,
    secrets_conf,
    session_conf,
    shipped_config,
)
from srm.spark.submit import DRIVER_HEAP_FLOOR, spark_submit_command, submit_environment


@pytest.mark.parametrize("master", [None, "local", "local[*]", "local[2]", "local[*, 4]", "local[4,2]"])
def test_local_masters_run_this_interpreter_with_no_archive(master: str | None) -> None:
    assert is_local(master)
    if master:
        check_master(master, "--master")
    conf = job_conf(master)
    assert conf["spark.pyspark.python"] == sys.executable
    assert "spark.archives" not in conf


def test_a_job_run_directly_gets_its_name_the_default_master_and_this_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    conf = session_conf("srm replicate a->b", None, {"spark.ui.enabled": "false"}, ())
    assert conf["spark.app.name"] == "srm replicate a->b"
    assert conf["spark.master"] == DEFAULT_MASTER
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.ui.retainedJobs"] == "50" and conf["spark.ui.enabled"] == "false"
    assert session_conf("x", "local[2]", None, ())["spark.master"] == "local[2]"


def test_under_spark_submit_its_master_and_settings_stand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")  # spark-submit's JVM runs already
    conf = session_conf("srm replicate a->b", None, None, ())
    assert "spark.master" not in conf and "spark.pyspark.python" not in conf
    assert conf["spark.app.name"] == "srm replicate a->b"
    assert session_conf("x", "spark://h:7077", None, ())["spark.master"] == "spark://h:7077"  # --master given


@pytest.mark.parametrize(
    ("master", "message"),
    [
        ("lokal[2]", "--master: Spark master 'lokal[2]' is not one Spark knows"),
        ("local[two]", "--master: Spark master 'local[two]' is not a valid local master"),
        ("spark://127.0.0.1", "--master: Spark master 'spark://127.0.0.1': '127.0.0.1' is not HOST:PORT"),
        ("yarn", "--master: Spark master 'yarn' needs HADOOP_CONF_DIR or YARN_CONF_DIR"),
    ],
)
def test_a_master_spark_cannot_use_is_refused_naming_where_it_came_from(
    master: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    with pytest.raises(SrmError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_master(master, "--master")


def test_a_standalone_master_that_does_not_answer_is_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SrmError, match=rf"does not answer at 127\.0\.0\.1:{port}"):
        check_master(f"spark://127.0.0.1:{port}", "Airflow connection 'spark_default'")


def test_a_cluster_job_ships_the_archive_and_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)  # no operator's spark-defaults.conf
    command = spark_submit_command(
        "replicate.py", ["--config", "/etc/srm.yaml"], "spark://10.0.0.5:7077", files=("/etc/srm.yaml",)
    )
    conf = dict(arg.split("=", 1) for arg in command if "=" in arg and arg.startswith("spark."))
    assert conf["spark.pyspark.python"] == f"python{sys.version_info[0]}.{sys.version_info[1]}"
    assert conf["spark.pyspark.driver.python"] == sys.executable
    assert conf["spark.archives"].endswith(f"#{job_archive.ALIAS}")
    assert conf["spark.executorEnv.PYTHONPATH"] == job_archive.ALIAS
    assert command[command.index("--files") + 1] == "/etc/srm.yaml"
    assert "spark.cores.max" not in conf
    assert conf["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"  # executors run Python tasks only


def test_a_jobs_own_executor_java_options_replace_the_default() -> None:
    options = "-XX:+UseZGC -Downer=ops"
    command = spark_submit_command(
        "replicate.py", [], "spark://10.0.0.5:7077", conf={"spark.executor.extraJavaOptions": options}
    )
    assert f"spark.executor.extraJavaOptions={options}" in command
    assert "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1" not in command
    assert "spark.executor.extraJavaOptions" not in job_conf("local[2]")  # the driver's JVM runs the tasks


def test_the_operators_executor_java_options_are_kept_before_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --conf replaces what spark-defaults.conf sets: the operator's options must travel with ours."""
    (tmp_path / "spark-defaults.conf").write_text(
        "spark.eventLog.enabled true\nspark.executor.extraJavaOptions  -Dsite=dc1 -XX:+UseG1GC\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    conf = job_conf("spark://10.0.0.5:7077")
    assert conf["spark.executor.extraJavaOptions"] == "-Dsite=dc1 -XX:+UseG1GC -XX:TieredStopAtLevel=1"
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))  # no file there: ours alone
    assert job_conf("spark://10.0.0.5:7077")["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"


@pytest.mark.parametrize(("master", "capped"), [("spark://10.0.0.5:7077", True), ("yarn", False), ("local[2]", False)])
def test_a_flow_takes_its_slots_of_a_standalone_cluster_not_every_core(master: str, capped: bool) -> None:
    command = spark_submit_command("replicate.py", [], master, cores=3)
    conf = dict(arg.split("=", 1) for arg in command if "=" in arg and arg.startswith("spark."))
    assert conf.get("spark.cores.max") == ("3" if capped else None)


def test_only_a_local_job_is_held_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    assert "SPARK_LOCAL_IP" not in submit_environment("spark://10.0.0.5:7077")
    assert submit_environment("local[2]")["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert submit_environment("local[2]")["PYSPARK_PYTHON"] == sys.executable
    assert submit_environment("local[2]")["MALLOC_ARENA_MAX"] == "2"  # fewer arenas keeping freed buffers
    assert job_conf("spark://10.0.0.5:7077")["spark.executorEnv.MALLOC_ARENA_MAX"] == "2"  # and remote ones


def test_the_executors_python_is_a_setting() -> None:
    conf = job_conf("k8s://https://api:6443", "/opt/python/bin/python3.11")
    assert conf["spark.pyspark.python"] == "/opt/python/bin/python3.11"


def test_the_archive_holds_the_project_and_the_copy_dependencies_but_not_spark_or_airflow(tmp_path: Path) -> None:
    archive = job_archive.build(tmp_path)
    assert job_archive.build(tmp_path) == archive  # built once per content
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"srm/replication/copier.py", "include/policies/__init__.py", "confluent_kafka/__init__.py"} <= names
    assert any(n.startswith("pydantic_core/_pydantic_core") for n in names)
    assert not [n for n in names if n.split("/")[0] in ("pyspark", "airflow", "deltalake", "pyarrow")]


def test_what_the_executors_import_comes_from_the_archive_alone(tmp_path: Path) -> None:
    """An executor off this machine has its Python and the archive, not this environment: the copy
    tasks' modules import with site-packages switched off (python -S) and only the archive on the path."""
    with tarfile.open(job_archive.build(tmp_path)) as tar:
        tar.extractall(tmp_path / "env", filter="data")
    modules = ("srm.replication.copier", "srm.replication.writer", "srm.replication.lease")
    code = "; ".join(f"import {m}" for m in modules)
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": str(tmp_path / "env")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_executors_python_workers_import_the_archives_bytecode_without_compiling(tmp_path: Path) -> None:
    """An executor's folder is new for each application: the archive's bytecode must be used as it
    is, whatever the unpacked files' times (unchecked-hash .pyc, PEP 552). Shown by a source that
    no longer compiles: its module still imports, from the bytecode."""
    with tarfile.open(job_archive.build(tmp_path)) as tar:
        names = set(tar.getnames())
        tar.extractall(tmp_path / "env", filter="data")
    sources = {n for n in names if n.endswith(".py")}
    assert len(sources) > 300
    assert all(importlib.util.cache_from_source(n) in names for n in sources)
    pyc = tmp_path / "env" / importlib.util.cache_from_source("srm/errors.py")
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01  # hash-based, not checked against the source
    (tmp_path / "env" / "srm" / "errors.py").write_text("this is not Python\n")
    done = subprocess.run(
        [sys.executable, "-S", "-c", "import srm.errors; print(srm.errors.SrmError.__name__)"],
        env={"PYTHONPATH": str(tmp_path / "env"), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "SrmError"), done.stderr[-2000:]


def test_a_driver_in_the_cluster_reads_the_shipped_copy_of_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert shipped_config("/nowhere/srm.yaml") == "/nowhere/srm.yaml"  # no copy: the error names the path given
    (tmp_path / "srm.yaml").write_text("clusters: {}\n")
    assert shipped_config("/nowhere/srm.yaml") == "srm.yaml"
    assert shipped_config(None) is None


def cluster_with(**client: str) -> Cluster:
    return Cluster(alias="west", bootstrap_servers="b:9092", client={k: SecretStr(v) for k, v in client.items()})


def test_secret_references_travel_as_they_are_and_need_nothing_more() -> None:
    referenced = cluster_with(**{"sasl.password": "${env:WEST_PASSWORD}", "sasl.username": "srm"})
    assert secrets_conf("spark://10.0.0.5:7077", (referenced,)) == {}


def test_a_secret_value_needs_spark_authentication_and_encryption(monkeypatch: pytest.MonkeyPatch) -> None:
    clear = cluster_with(**{"sasl.password": "hunter2"})
    monkeypatch.delenv(AUTH_SECRET_ENV, raising=False)
    with pytest.raises(SrmError, match=r"cluster west: sasl.password hold secret values .* set the standalone") as exc:
        secrets_conf("spark://10.0.0.5:7077", (clear,))
    assert "hunter2" not in str(exc.value)
    conf = secrets_conf("yarn", (clear,))  # YARN makes a secret per application
    assert conf["spark.authenticate"] == conf["spark.network.crypto.enabled"] == "true"
    monkeypatch.setenv(AUTH_SECRET_ENV, "shared-by-the-cluster")
    assert secrets_conf("spark://10.0.0.5:7077", (clear,))["spark.authenticate"] == "true"


def test_settings_in_an_airflow_connection_cannot_reach_remote_executors() -> None:
    from_airflow = Cluster(alias="east", connection_id="kafka_east")
    with pytest.raises(SrmError, match="cluster east: its settings are in Airflow connection 'kafka_east'"):
        secrets_conf("spark://10.0.0.5:7077", (from_airflow,))
    assert job_conf("local[2]", clusters=(from_airflow,))["spark.pyspark.python"] == sys.executable  # local: fine


@pytest.mark.parametrize("master", ["local[2]", "spark://10.0.0.5:7077"])
def test_a_continuous_replication_driver_starts_with_the_heap_floor_c1_and_the_project_logging(master: str) -> None:
    command = spark_submit_command("replicate.py", ["--mode", "continuous"], master)
    options = command[command.index("--driver-java-options") + 1].split()
    assert f"-Xms{DRIVER_HEAP_FLOOR}" in options and "-XX:+AlwaysPreTouch" in options  # resident from the start
    assert "-XX:TieredStopAtLevel=1" in options
    log4j = next(o.split("=", 1)[1] for o in options if o.startswith("-Dlog4j2.configurationFile="))
    assert Path(log4j).is_file()


@pytest.mark.parametrize(
    ("script", "args", "floor"),
    [
        ("replicate.py", ["--source", "a", "--target", "b"], True),  # continuous unless told otherwise
        ("replicate.py", ["--mode=continuous"], True),
        ("replicate.py", ["--mode", "available-now", "--config", "srm.yaml"], False),
        ("replicate.py", ["--mode=available-now"], False),
        ("checkpoints.py", ["--source", "a", "--target", "b"], False),
    ],
)
def test_only_a_continuous_replication_job_holds_its_driver_heap(script: str, args: list[str], floor: bool) -> None:
    command = spark_submit_command(script, args, "local[2]")
    options = command[command.index("--driver-java-options") + 1].split()
    assert (f"-Xms{DRIVER_HEAP_FLOOR}" in options) is floor
    assert ("-XX:TieredStopAtLevel=1" in options) is floor  # available-now's JVM keeps C2
    assert any(o.startswith("-Dlog4j2.configurationFile=") for o in options)


@pytest.mark.parametrize(("mode", "floor"), [("continuous", True), ("available-now", False)])
def test_an_airflow_run_gives_the_driver_its_floor_by_the_mode_it_was_started_with(mode: str, floor: bool) -> None:
    from srm.airflow.spark import FlowSparkSubmitOperator

    task = FlowSparkSubmitOperator(
        source="a",
        target="b",
        config_file="srm.yaml",
        task_id="replicate",
        application="/srm/spark/replicate.py",
        application_args=["--source", "a", "--target", "b", "--mode", mode],  # as rendered for the run
    )
    options = task.driver_java_options().split()
    assert (f"-Xms{DRIVER_HEAP_FLOOR}" in options) is floor
    assert ("-XX:TieredStopAtLevel=1" in options) is floor
