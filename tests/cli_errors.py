"""Test helper: the one-line error (exit 2) that a GPU-only tool's ``main`` gives bad input before any GPU work."""

from __future__ import annotations

from typing import Callable, Sequence

import pytest


def refusal(main: Callable[[list[str]], int], argv: Sequence[str], capsys) -> str:
    """``main(argv)`` must exit 2: its error, the last line of stderr."""
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    assert e.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]
