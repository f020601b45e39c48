//! What the SDKs build their methods from: every operation with its request fields and
//! whether it sits on a `Space` handle, decided once here from the catalogue ([`crate::op`]).
//!
//! The rule (API reference, "Agent runs" and "CodeSpace execution layer": `Space.agent_start`,
//! `Space.read`, ...): an operation sits on `Space` when it is for tool callers
//! ([`Audience::Tool`]) and is either a CodeSpace tool (route under `/v1/tools/`) or names a
//! `space`. Such a handle fills one field with its own name, [`Method::space_field`]: `space`
//! for agent operations, `workspace_id` for the CodeSpace tools that take one. Everything else
//! sits on the client (`Spaces`). The Python and Node bindings and the daemon's scoped MCP
//! server read this instead of keeping their own copies of the rule.

use crate::op::{request_schemas, Audience, OperationInfo};

/// The request fields that name a Space, in the order a handle looks for them.
pub const SPACE_FIELDS: [&str; 2] = ["space", "workspace_id"];

/// One operation as an SDK method.
#[derive(Debug, Clone)]
pub struct Method {
    /// Name, route, audience, hints.
    pub info: OperationInfo,
    /// The request's JSON Schema ([`crate::op::request_schemas`]).
    pub request: serde_json::Value,
    /// The request's top-level fields (snake_case), path parameters included, sorted.
    pub fields: Vec<String>,
    /// The fields the request requires.
    pub required: Vec<String>,
    /// True when the method sits on a `Space` handle (see the module doc).
    pub on_space: bool,
    /// The field a `Space` handle fills with its name (`space` or `workspace_id`); `None` off
    /// `Space`, and for a Space tool that takes no Space (`process_status` names a process).
    pub space_field: Option<&'static str>,
}

/// Every operation as a method, in catalogue order (made once per process).
pub fn methods() -> &'static [Method] {
    static METHODS: std::sync::OnceLock<Vec<Method>> = std::sync::OnceLock::new();
    METHODS.get_or_init(|| request_schemas().into_iter().map(|(info, schema)| method(info, schema.to_value())).collect())
}

/// The method of operation `name`, if the catalogue has one.
pub fn method_of(name: &str) -> Option<&'static Method> {
    methods().iter().find(|m| m.info.name == name)
}

fn method(info: OperationInfo, request: serde_json::Value) -> Method {
    let mut fields: Vec<String> =
        request.get("properties").and_then(|p| p.as_object()).map(|p| p.keys().cloned().collect()).unwrap_or_default();
    fields.sort();
    let required = request
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let on_space = info.audience == Audience::Tool && (info.path.starts_with("/v1/tools/") || fields.iter().any(|f| f == "space"));
    let space_field = if on_space { SPACE_FIELDS.into_iter().find(|f| fields.iter().any(|g| g == f)) } else { None };
    Method { info, request, fields, required, on_space, space_field }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn agent_operations_and_codespace_tools_sit_on_space_with_their_field() {
        let m = |name: &str| method_of(name).unwrap();
        assert_eq!((m("agent_start").on_space, m("agent_start").space_field), (true, Some("space")));
        assert_eq!((m("read").on_space, m("read").space_field), (true, Some("workspace_id")));
        assert_eq!((m("process_status").on_space, m("process_status").space_field), (true, None));
        for off in ["space_list", "space_add", "agent_capabilities"] {
            assert!(!m(off).on_space, "{off}");
        }
        // Operator operations never sit on a Space, whatever they name.
        for op in methods().iter().filter(|o| o.info.audience != Audience::Tool) {
            assert!(!op.on_space && op.space_field.is_none(), "{}", op.info.name);
        }
        assert!(m("agent_start").required.contains(&"prompt".to_owned()));
        assert!(method_of("nope").is_none());
    }
}
