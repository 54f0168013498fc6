"""srm-control validate / import-mm2: output, exit codes, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from srm.control.cli import main

ROOT = Path(__file__).parents[2]
BROKEN = ROOT / "tests" / "fixtures" / "config" / "broken"


def test_validate_prints_summary_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--config", str(ROOT / "conf" / "srm.yaml")]) == 0
    out = capsys.readouterr().out
    assert "2 clusters, 2 flows (2 enabled)" in out
    assert "us-west->us-east" in out and "us-west      127.0.0.1:19092" in out
    assert out.rstrip().endswith("configuration is valid")


def test_validate_lists_every_problem_and_exits_one(capsys: pytest.CaptureFixture[str]) -> None:
    path = BROKEN / "wrong_types.yaml"
    assert main(["validate", "--config", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0] == "error: 6 problem(s) in the configuration:"
    assert f"  {path}:8: defaults.replication.factor: Input should be a valid integer" in captured.err
    assert "Traceback" not in captured.err


def test_validate_reads_srm_config_env(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SRM_CONFIG", str(BROKEN / "duplicate_flow.yaml"))
    assert main(["validate"]) == 1
    assert "duplicate flow us-west->us-east (first defined on line 9)" in capsys.readouterr().err


def test_validate_json_masks_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "srm.yaml"
    config.write_text(
        "clusters:\n  a: {bootstrap.servers: 'h:1', client: {sasl.username: u, sasl.password: topsecret}}\n"
        "  b: {bootstrap.servers: 'h:2'}\nflows:\n  - {source: a, target: b}\n"
    )
    assert main(["validate", "--json", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert data["clusters"][0]["client"] == {"sasl.username": "u", "sasl.password": "**********"}
    assert data["flows"][0]["replication.factor"] == 2
    assert "topsecret" not in out


def test_debug_shows_the_traceback() -> None:
    with pytest.raises(Exception, match="duplicate flow"):
        main(["validate", "--debug", "--config", str(BROKEN / "duplicate_flow.yaml")])


def test_import_mm2_of_a_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-mm2", "/nonexistent/mm2.properties"]) == 1
    assert capsys.readouterr().err == "error: cannot read /nonexistent/mm2.properties: No such file or directory\n"


def test_import_then_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-mm2", str(ROOT / "tests" / "fixtures" / "mm2" / "mm2.properties")]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("warning: ") == 7
    out = tmp_path / "imported.yaml"
    out.write_text(captured.out)
    assert main(["validate", "--config", str(out)]) == 0


def test_run_checkpoints_is_refused_for_a_flow_without_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "srm.yaml"
    config.write_text(
        "clusters:\n  a: {bootstrap.servers: '127.0.0.1:1'}\n  b: {bootstrap.servers: '127.0.0.1:2'}\n"
        "flows:\n  - {source: a, target: b, emit.checkpoints.enabled: false}\n"
    )
    assert main(["run", "checkpoints", "--source", "a", "--target", "b", "--config", str(config), "--dry-run"]) == 1
    assert "flow a->b has emit.checkpoints.enabled: false; it writes no checkpoints" in capsys.readouterr().err
    assert main(["run", "replicate", "--source", "a", "--target", "b", "--config", str(config), "--dry-run"]) == 0


def test_run_builds_the_spark_submit_call(capsys: pytest.CaptureFixture[str]) -> None:
    config = str(ROOT / "conf" / "srm.yaml")
    assert main(["run", "replicate", "--source", "us-west", "--target", "us-east", "--config", config, "--json"]) == 0
    command = json.loads(capsys.readouterr().out)["command"]
    assert command[0].endswith("pyspark/bin/spark-submit") and command[1:3] == ["--master", "local[*, 4]"]
    assert command[command.index(str(ROOT / "srm" / "jobs" / "replicate.py")) + 1 :] == [
        "--source",
        "us-west",
        "--target",
        "us-east",
        "--config",
        config,
        "--mode",
        "available-now",
    ]
    assert (
        main(["run", "checkpoints", "--source", "us-west", "--target", "us-east", "--config", config, "--dry-run"]) == 0
    )
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(f"srm/jobs/checkpoints.py --source us-west --target us-east --config {config}")
    )
    assert main(["run", "replicate", "--source", "us-west", "--target", "eu", "--config", config]) == 1
    assert "no flow us-west->eu" in capsys.readouterr().err


def test_console_script_usage_errors_exit_two() -> None:
    script = Path(sys.executable).parent / "srm-control"
    result = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "usage: srm-control" in result.stderr
    for command in ("validate", "import-mm2", "local"):
        helped = subprocess.run([str(script), command, "--help"], capture_output=True, text=True, check=False)
        assert helped.returncode == 0 and "--config" in helped.stdout and "--json" in helped.stdout


def test_common_options_before_the_command_are_honoured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(
        "clusters:\n  x: {bootstrap.servers: '127.0.0.1:1'}\n  y: {bootstrap.servers: '127.0.0.1:2'}\n"
        "flows:\n  - {source: x, target: y}\n"
    )
    assert main(["--config", str(other), "--json", "validate"]) == 0
    assert json.loads(capsys.readouterr().out)["file"] == str(other)
