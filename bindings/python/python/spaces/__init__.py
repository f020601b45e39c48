"""Spaces: run coding-agent CLIs as detached runs in a Space and work its files and commands.

    from spaces import Spaces
    spaces = Spaces()                       # the local daemon, started if none runs
    await spaces.add_space("demo", "/path/to/project")
    space = spaces.space("demo")
    run = await space.agent_start("claude-code", "Say hello")
    async for event in space.agent_follow(run.run_id): ...

Every method is async and raises ``SpacesError`` (``.code``, ``.message``, ``.field``,
``.operation_id``, ``.approval_id``); ``CuaError``, the source documents' name, is the same class."""

from ._client import CATALOGUE, AgentFollow, Space, Spaces
from ._native import ConflictError, CuaError, InvalidError, NotFoundError, SpacesError, UnavailableError
from ._records import AgentActionReport, AgentRunStatus, AgentStartReport, SpaceAgentOptions

__all__ = [
    "CATALOGUE",
    "AgentActionReport",
    "AgentFollow",
    "AgentRunStatus",
    "AgentStartReport",
    "ConflictError",
    "CuaError",
    "InvalidError",
    "NotFoundError",
    "Space",
    "SpaceAgentOptions",
    "Spaces",
    "SpacesError",
    "UnavailableError",
]
