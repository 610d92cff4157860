"""The cloud tests' marker and their one-screen summaries at the end of the session."""

import pytest

HERE = __import__("pathlib").Path(__file__).parent
SUMMARIES: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE) and item.path.name == "test_cloud.py":
            item.add_marker(pytest.mark.cloud)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for summary in SUMMARIES:
        for line in summary.splitlines():
            terminalreporter.write_line(line)
