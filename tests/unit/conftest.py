"""Fixtures of the tests that need no broker."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def no_jvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Build Kafka command lines without Java or the jars (``make test-unit`` installs neither)."""
    monkeypatch.setattr("srm.devenv.jvm.java_binary", lambda: "java")
    monkeypatch.setattr("srm.devenv.jvm.kafka_jars", lambda: tmp_path / "jars")
