"""Fixtures of the CLI tests."""

from __future__ import annotations

import pytest

from arrayio.cli import main
from arrayio.cli._common import run


@pytest.fixture
def invoke(capsys):
    """Run an ``arrayio`` command line in this process, through the console script's wrapper:
    ``invoke("info", path)`` -> (exit code, stdout, stderr)."""

    def command_line(*args) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            run(main, [str(arg) for arg in args])
        captured = capsys.readouterr()
        return done.value.code, captured.out, captured.err

    return command_line
