"""The one table from library errors to the CLI, MCP and HTTP outcomes."""

from __future__ import annotations

import slm
from slm import errors


def test_every_error_class_has_an_outcome() -> None:
    classes = [getattr(slm, name) for name in slm.__all__]
    tree = [c for c in classes if isinstance(c, type) and issubclass(c, slm.SlmError)]
    assert set(tree) == set(errors.OUTCOMES)
    for kind, result in errors.OUTCOMES.items():
        assert errors.outcome(kind("x")) is result
        assert result.exit_code != 0 and result.tool_prefix
        assert 400 <= result.http_status < 600


def test_the_most_specific_class_decides() -> None:
    class Narrower(slm.NotFound):
        pass

    assert errors.outcome(Narrower("x")).http_status == 404
    assert errors.outcome(slm.InvalidInput("x")).kind == "invalid_input"
    assert errors.outcome(slm.StoreError("x")).http_status == 503
