"""The refusal a spec gets, for the spec tests (test_tracepoint_spec,
test_user_spec): one SpecError, on one line (the dashboard shows it under
the field with a caret; a second line would be cut)."""

from __future__ import annotations

import pytest

from ktui.lang.model import SpecError
from ktui.lang.spec import parse_probe_text


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_probe_text(text)
    assert "\n" not in str(info.value)
    return info.value
