"""Bad input raises the typed error of its family with the right code."""

from __future__ import annotations

from pathlib import Path

import pytest

from spaces import CuaError, InvalidError, NotFoundError, Space, Spaces, SpacesError, UnavailableError


async def test_unknown_run(space: Space) -> None:
    with pytest.raises(NotFoundError) as e:
        await space.agent_status("no-such-run")
    assert e.value.code == "RUN_NOT_FOUND" and "no-such-run" in e.value.message
    assert isinstance(e.value, CuaError) and e.value.field is None


async def test_following_an_unknown_run_or_with_a_bad_until(space: Space) -> None:
    with pytest.raises(NotFoundError) as e:
        async for _ in space.agent_follow("run-000000000000"):
            pass
    assert e.value.code == "RUN_NOT_FOUND"
    with pytest.raises(InvalidError) as e:
        space.agent_follow("run-000000000000", until="forever")
    assert e.value.code == "INVALID_ARGUMENT" and "forever" in e.value.message


async def test_unknown_space(spaces: Spaces, space: Space) -> None:
    with pytest.raises(NotFoundError) as e:
        await spaces.space("nowhere").agent_list()
    assert e.value.code == "WORKSPACE_NOT_FOUND"
    with pytest.raises(NotFoundError) as e:
        await spaces.space("nowhere").read(path="x")
    assert e.value.code == "WORKSPACE_NOT_FOUND"


async def test_unknown_option_key_is_named(space: Space) -> None:
    with pytest.raises(InvalidError) as e:
        await space.agent_start("claude-code", "hi", options={"baseUrl": "http://127.0.0.1:9"})
    assert e.value.code == "INVALID_ARGUMENT"
    assert e.value.field == "options.baseUrl" and "base_url" in e.value.message


async def test_unknown_keyword_of_a_generated_method(space: Space) -> None:
    with pytest.raises(InvalidError) as e:
        await space.read(path="notes.txt", bogus=1)
    assert e.value.code == "INVALID_ARGUMENT" and "bogus" in e.value.message


async def test_wrong_type(space: Space) -> None:
    with pytest.raises(InvalidError) as e:
        await space.read(path=5)
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(InvalidError) as e:
        await space.agent_status("some-run", tail="many")
    assert e.value.code == "INVALID_ARGUMENT"


async def test_daemon_unreachable_over_tcp() -> None:
    with pytest.raises(UnavailableError) as e:
        await Spaces(url="http://127.0.0.1:9", token="t").list_spaces()
    assert e.value.code == "DAEMON_UNREACHABLE"
    # The fix for a remote daemon, not the local one's (no client starts a remote daemon).
    assert "serve --tcp" in e.value.message and "python -m spaces._daemon" not in e.value.message, e.value


async def test_a_malformed_idempotency_key_is_refused_naming_it(space: Space) -> None:
    with pytest.raises(InvalidError) as e:
        await space.agent_start("claude-code", "hi", request_id="not a key")
    assert e.value.code == "INVALID_ARGUMENT" and e.value.field == "request_id", e.value


async def test_a_held_change_names_its_approval_as_an_attribute(spaces: Spaces, root: Path) -> None:
    """``approval_id`` and ``operation_id`` are attributes of the error, as in the Node SDK
    (``approvalId``), not hidden in ``details``; every error has both (``None`` when absent)."""
    held = root / "held-space"
    held.mkdir(exist_ok=True)
    await spaces.space_add(name="held", root=str(held), approvals="confirm")
    with pytest.raises(SpacesError) as e:
        await spaces.space("held").apply_patch(patch="*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n")
    assert e.value.code == "APPROVAL_REQUIRED", e.value
    assert isinstance(e.value.approval_id, str) and e.value.approval_id in e.value.details
    assert e.value.operation_id is None or isinstance(e.value.operation_id, str)
    with pytest.raises(NotFoundError) as e:
        await spaces.space("held").agent_status("no-such-run")
    assert e.value.approval_id is None and e.value.operation_id is None
    assert CuaError is SpacesError
