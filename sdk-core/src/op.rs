//! The operation catalogue: every operation of the contract (API reference, all sections) with
//! its name, one-line doc, request and result types, and HTTP route. It is data, listed once in
//! [`for_each_operation!`]; the daemon's operation table, the typed [`crate::client::Client`],
//! the HTTP routes, the OpenAPI document and the generated docs are all built from it.
//!
//! A new operation is one line here plus its handler in the daemon's `Service` (a test there
//! fails while an operation has no handler).

use serde::de::DeserializeOwned;
use serde::Serialize;

/// HTTP method of an operation's route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpMethod {
    Get,
    Post,
    Patch,
}

impl HttpMethod {
    /// `GET`, `POST`, `PATCH`.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Patch => "PATCH",
        }
    }
}

/// Who an operation is for, beyond HTTP (where every operation is served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Agent loops and SDK users: served as an MCP tool and an SDK method too.
    Tool,
    /// The user's side of steering (`/inbox`): HTTP and SDKs, not an agent's MCP tool.
    Inbox,
}

/// One operation of the contract. Implemented by the marker types in [`ops`].
pub trait Operation {
    /// Wire name (`agent_start`, `read`, ...): the MCP tool name and the SDK method name.
    const NAME: &'static str;
    /// One-line description.
    const DOC: &'static str;
    /// HTTP method of the route.
    const METHOD: HttpMethod;
    /// Route template; `{field}` segments are request fields (`/v1/spaces/{space}/agents`).
    const PATH: &'static str;
    /// True when the operation changes nothing (MCP `readOnlyHint`).
    const READ_ONLY: bool;
    /// Who it is for beyond HTTP.
    const AUDIENCE: Audience;
    /// The request (`#[serde(deny_unknown_fields)]`).
    type Request: Serialize + DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static;
    /// The result.
    type Result: Serialize + DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static;
}

/// The catalogue as plain data (no types): what docs and listings need.
#[derive(Debug, Clone, Copy)]
pub struct OperationInfo {
    pub name: &'static str,
    pub doc: &'static str,
    pub method: HttpMethod,
    pub path: &'static str,
    pub read_only: bool,
    pub audience: Audience,
}

impl OperationInfo {
    /// The info of `O`.
    pub fn of<O: Operation>() -> OperationInfo {
        OperationInfo {
            name: O::NAME,
            doc: O::DOC,
            method: O::METHOD,
            path: O::PATH,
            read_only: O::READ_ONLY,
            audience: O::AUDIENCE,
        }
    }

    /// The `{field}` names of the route template, in order.
    pub fn path_params(&self) -> Vec<&'static str> {
        path_params(self.path)
    }
}

/// The `{field}` names of a route template, in order.
pub fn path_params(path: &'static str) -> Vec<&'static str> {
    path.split('/').filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect()
}

/// Calls `$callback!` with the whole catalogue, one entry per operation:
/// `name: Marker, METHOD "/path", Request => Result, read_only, Audience, "doc";`.
#[macro_export]
macro_rules! for_each_operation {
    ($callback:ident) => {
        $callback! {
            // ----- Spaces and agent runs (API reference, "Agent runs") -----
            agent_capabilities: AgentCapabilities, Get "/v1/capabilities",
                $crate::Empty => $crate::Capabilities, true, Tool,
                "What this host's harnesses are and can do: readiness, auth, endpoint wires, follow-ups.";
            space_list: SpaceList, Get "/v1/spaces",
                $crate::Empty => Vec<$crate::SpaceRecord>, true, Tool,
                "Every Space registered on this host.";
            space_add: SpaceAdd, Post "/v1/spaces",
                $crate::SpaceAddRequest => $crate::SpaceRecord, false, Tool,
                "Register a Space (name, directory, policy); the same registration again is a no-op.";
            agent_start: AgentStart, Post "/v1/spaces/{space}/agents",
                $crate::AgentStartRequest => $crate::AgentStartReport, false, Tool,
                "Start an agent run with a prompt; answers as soon as the run is launched.";
            agent_list: AgentList, Get "/v1/spaces/{space}/agents",
                $crate::AgentListRequest => Vec<$crate::RunStatus>, true, Tool,
                "Every run of a Space, newest first, whoever started it.";
            agent_status: AgentStatus, Get "/v1/spaces/{space}/agents/{run_id}",
                $crate::AgentStatusRequest => $crate::RunStatus, true, Tool,
                "One run's status, phase, reason, last result and output tail.";
            agent_events: AgentEvents, Get "/v1/spaces/{space}/agents/{run_id}/events",
                $crate::AgentEventsRequest => $crate::EventsPage, true, Tool,
                "A page of the run's normalized events after a cursor, optionally long-polling.";
            agent_message: AgentMessage, Post "/v1/spaces/{space}/agents/{run_id}/message",
                $crate::AgentMessageRequest => $crate::ActionReport, false, Tool,
                "Send a follow-up: the next turn, queued mid-turn, or forced after an interrupt.";
            agent_interrupt: AgentInterrupt, Post "/v1/spaces/{space}/agents/{run_id}/interrupt",
                $crate::AgentRunRequest => $crate::ActionReport, false, Tool,
                "Cancel the turn in flight; the session stays open.";
            agent_stop: AgentStop, Post "/v1/spaces/{space}/agents/{run_id}/stop",
                $crate::AgentRunRequest => $crate::ActionReport, false, Tool,
                "Stop the run: signal, grace, then kill of every process it has.";
        }
    };
}

macro_rules! define_operations {
    ($( $name:ident: $marker:ident, $method:ident $path:literal,
        $req:ty => $res:ty, $ro:literal, $aud:ident, $doc:literal; )*) => {
        /// Marker types, one per operation (`ops::AgentStart`, `ops::Read`, ...).
        pub mod ops {
            $(
                #[doc = $doc]
                #[derive(Debug, Clone, Copy)]
                pub struct $marker;
                impl super::Operation for $marker {
                    const NAME: &'static str = stringify!($name);
                    const DOC: &'static str = $doc;
                    const METHOD: super::HttpMethod = super::HttpMethod::$method;
                    const PATH: &'static str = $path;
                    const READ_ONLY: bool = $ro;
                    const AUDIENCE: super::Audience = super::Audience::$aud;
                    type Request = $req;
                    type Result = $res;
                }
            )*
        }

        /// Every operation of the catalogue, in catalogue order.
        pub fn catalogue() -> Vec<OperationInfo> {
            vec![$(OperationInfo::of::<ops::$marker>()),*]
        }
    };
}

for_each_operation!(define_operations);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_routes_distinct() {
        let all = catalogue();
        let mut names: Vec<_> = all.iter().map(|o| o.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        let mut routes: Vec<_> = all.iter().map(|o| (o.method, o.path)).collect();
        routes.sort_unstable_by_key(|(m, p)| (m.as_str(), *p));
        routes.dedup();
        assert_eq!(routes.len(), all.len());
    }
}
