"""The CodeSpace loop through `Space`: read, apply_patch, exec_command, read_process."""

from __future__ import annotations

import pytest

from spaces import ConflictError, Space


async def test_read_patch_exec_read_process(space: Space) -> None:
    got = await space.read(path="notes.txt")
    assert got["content"] == "one\ntwo\n" and got["version"].startswith("sha256:")

    patch = "*** Begin Patch\n*** Update File: notes.txt\n@@\n one\n-two\n+2\n*** End Patch\n"
    applied = await space.apply_patch(patch=patch, expected_versions={"notes.txt": got["version"]})
    assert applied, applied
    assert (await space.read(path="notes.txt"))["content"] == "one\n2\n"

    # The same expectation again is stale now: a typed conflict.
    with pytest.raises(ConflictError) as e:
        await space.apply_patch(patch=patch, expected_versions={"notes.txt": got["version"]})
    assert e.value.code == "VERSION_CONFLICT"

    found = await space.find(glob="*.txt")
    assert "notes.txt" in str(found)

    proc = await space.exec_command(command=["sh", "-c", "cat notes.txt; echo done"])
    pid = proc["process_id"]
    out, cursor, eof = "", 0, False
    for _ in range(100):
        page = await space.read_process(process_id=pid, cursor=cursor, wait_ms=1000)
        assert page["process_id"] == pid
        out += page["chunk"]
        cursor, eof = page["cursor"], page["eof"]
        if eof:
            break
    assert eof and "one\n2\ndone" in out.replace("\r\n", "\n"), out
