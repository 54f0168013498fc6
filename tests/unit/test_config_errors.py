"""Every broken YAML under tests/fixtures/config/broken is rejected with exactly the expected issues.

Each fixture lists what it must produce in ``# expect: LINE KEY | MESSAGE`` comments: the issue's
line, its key path, and a prefix of its message. No other issue may appear.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from srm.config import load_config, parse_config
from srm.errors import ConfigError, ConfigIssue

BROKEN = Path(__file__).parents[1] / "fixtures" / "config" / "broken"
EXPECT = re.compile(r"^# expect: (?P<line>\d+) (?P<key>\S*) *\| (?P<message>.+)$")


def expectations(path: Path) -> list[tuple[int, str, str]]:
    found = [EXPECT.match(line) for line in path.read_text().splitlines()]
    return [(int(m["line"]), m["key"], m["message"]) for m in found if m]


def matches(issue: ConfigIssue, line: int, key: str, message: str) -> bool:
    return issue.line == line and issue.key == key and issue.message.startswith(message)


@pytest.mark.parametrize("path", sorted(BROKEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_broken_config_is_rejected_with_file_line_and_key(path: Path) -> None:
    expected = expectations(path)
    assert expected, f"{path.name} has no '# expect:' lines"
    with pytest.raises(ConfigError) as err:
        load_config(path, strict=True)
    issues = err.value.issues
    for line, key, message in expected:
        assert any(matches(i, line, key, message) for i in issues), (
            f"missing: {line} {key} | {message}\nissues:\n" + "\n".join(map(str, issues))
        )
    assert len(issues) == len(expected), "unexpected extra issues:\n" + "\n".join(map(str, issues))
    assert all(i.file == str(path) for i in issues)


def test_there_are_at_least_eight_broken_fixtures() -> None:
    assert len(list(BROKEN.glob("*.yaml"))) >= 8


def test_issue_text_names_file_line_and_key() -> None:
    _, issues = parse_config(
        "clusters:\n  a: {bootstrap.servers: 'h:1'}\nflows:\n  - {source: a, target: b}\n", "x.yaml"
    )
    assert str(issues[0]) == "x.yaml:4: flows[0].target: unknown cluster alias 'b' (known: a)"


def test_missing_file_is_one_clear_issue(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read configuration file: No such file or directory"):
        load_config(tmp_path / "nope.yaml")


def test_lenient_mode_leaves_out_only_the_broken_flow(tmp_path: Path) -> None:
    path = tmp_path / "srm.yaml"
    path.write_text(
        "clusters:\n  a: {bootstrap.servers: 'h:1'}\n  b: {bootstrap.servers: 'h:2'}\n  c: {bootstrap.servers: 'h:3'}\n"
        "flows:\n  - {source: a, target: b, replication.factr: 2}\n  - {source: a, target: c}\n"
    )
    config = load_config(path, strict=False)
    assert [f.name for f in config.flows] == ["a->c"]
    with pytest.raises(ConfigError, match=r"unknown option 'replication\.factr'"):
        load_config(path, strict=True)


def test_lenient_mode_still_fails_on_file_wide_problems(tmp_path: Path) -> None:
    path = tmp_path / "srm.yaml"
    path.write_text("clusters:\n  a: {}\nflows: []\n")
    with pytest.raises(ConfigError, match="missing bootstrap servers"):
        load_config(path, strict=False)
