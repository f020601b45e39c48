//! A caller's trace context from the transport (issue 33): the HTTP header `traceparent` and
//! MCP's `_meta.traceparent` become the `traceparent` argument of the operations that take
//! one (`agent_start`, `agent_message`), unless the arguments name one themselves.

use serde_json::Value;

/// `args` of operation `name` with `traceparent` set from the transport's `from`, when the
/// operation takes one and `args` has none.
pub fn with_traceparent(name: &str, mut args: Value, from: Option<&str>) -> Value {
    let Some(tp) = from.map(str::trim).filter(|t| !t.is_empty()) else { return args };
    let takes = spaces_sdk::methods::methods().iter().any(|m| m.info.name == name && m.fields.iter().any(|f| f == "traceparent"));
    if let (true, Some(obj)) = (takes, args.as_object_mut()) {
        obj.entry("traceparent").or_insert_with(|| Value::String(tp.to_owned()));
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_operations_that_take_one_get_it_and_an_argument_wins() {
        let tp = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(with_traceparent("agent_start", json!({"prompt": "p"}), tp)["traceparent"], json!(tp));
        assert_eq!(with_traceparent("agent_start", json!({"traceparent": "mine"}), tp)["traceparent"], json!("mine"));
        assert_eq!(with_traceparent("read", json!({"path": "a"}), tp), json!({"path": "a"}));
    }
}
