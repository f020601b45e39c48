//! A server scoped to one Space (`spacesd mcp --space NAME`, what `space_tools` gives an agent):
//! every call must act on that Space, and may leave its name out.
//!
//! - **Tools offered**: every tool of [`crate::backend::tools`] except `space_list` and `space_add` (a
//!   scoped agent neither sees nor registers other Spaces) and `approval_resolve` (an agent does
//!   not grant or deny its own holds; the user does, over HTTP, the CLI or an unscoped client).
//! - **Named Space** (the catalogue's [`spaces_sdk::methods::Method::space_field`], the field a
//!   `Space` of either SDK fills): `workspace_id` of the CodeSpace tools, `space` of the agent
//!   operations, and `arguments.workspace_id` of `approval_create`. Left out (or `null`), it
//!   is filled in with the scope; naming another Space is refused. In the offered input schemas
//!   the field is therefore not `required`, and its description says so.
//! - **Ids**: the daemon is asked what an id belongs to before the call runs: a `process_id`
//!   through `process_status` (its `workspace_id`), a `work_id` (every tool that takes one,
//!   optional or not) through `inbox_work`. `operation_status` answers only for an operation of the
//!   scope (checked on its result, which names the workspace; it changes nothing). Runs need no
//!   lookup: every agent operation names its `space`, and the daemon refuses a run of another
//!   Space (`RUN_NOT_FOUND`). The daemon cannot say which Space an approval hold belongs to, so
//!   `operation_resume` takes only holds this server saw opened for its Space: the `approval_id`
//!   of an `approval_create` result, or of an `APPROVAL_REQUIRED` refusal of its own
//!   `apply_patch`/`exec_command`.
//! - The same checks serve a tool caller's token ([`Scope::for_token`], [`crate::access`]),
//!   whose refusals are `FORBIDDEN` and say the token is scoped.
//! - **Refusal**: `UNAUTHORIZED` with a message saying the server is scoped (and `field` naming
//!   the argument, when one named another Space); a lookup that fails answers its own error
//!   (`PROCESS_NOT_FOUND`, `WORK_NOT_FOUND`). The refused call never reaches the daemon.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde_json::{json, Map, Value};
use spaces_sdk::{bounded, ApiError, ErrorCode};

use crate::backend::tools::{self, ToolEntry};
use crate::backend::Backend;

/// Tools a scoped server does not offer (see the module doc).
pub const NOT_OFFERED: [&str; 4] = ["space_list", "space_add", "approval_resolve", "persistent_agent_send"];

/// Holds whose tool arguments name a workspace.
const HOLDING_TOOLS: [&str; 3] = ["apply_patch", "exec_command", "approval_create"];

/// The scope of one server (or one tool caller's token): its Space, its tool list, the holds
/// it saw opened, and how it refuses.
#[derive(Debug)]
pub struct Scope {
    space: String,
    /// Made on first use and shared by every scope of the Space ([`scoped_tools`]): a run's
    /// scope is made with its socket, and most runs never list their tools.
    tools: OnceLock<Arc<Vec<ToolEntry>>>,
    holds: Mutex<HashSet<String>>,
    /// Who is scoped, in refusals ("this MCP server", "this token").
    holder: &'static str,
    /// The code of a refusal.
    refusal: ErrorCode,
}

impl Scope {
    /// The scope of an MCP server for Space `space`: refusals are `UNAUTHORIZED`.
    pub fn new(space: impl Into<String>) -> Arc<Scope> {
        Self::build(space.into(), "this MCP server", ErrorCode::Unauthorized)
    }

    /// The scope of a tool caller's token for Space `space` ([`crate::access`]): the same
    /// checks, refused `FORBIDDEN` (the credential is valid but lacks the right).
    pub fn for_token(space: impl Into<String>) -> Arc<Scope> {
        Self::build(space.into(), "this token", ErrorCode::Forbidden)
    }

    /// The scope of a run's own processes, on the run's own socket ([`crate::access::Access::for_run`]):
    /// the same checks, refused `FORBIDDEN`.
    pub fn for_tree(space: impl Into<String>) -> Arc<Scope> {
        Self::build(space.into(), "this run's process", ErrorCode::Forbidden)
    }

    fn build(space: String, holder: &'static str, refusal: ErrorCode) -> Arc<Scope> {
        Arc::new(Scope { space, tools: OnceLock::new(), holds: Mutex::new(HashSet::new()), holder, refusal })
    }

    /// The Space.
    pub fn space(&self) -> &str {
        &self.space
    }

    /// The tools offered, with their scoped input schemas.
    pub fn tools(&self) -> &[ToolEntry] {
        self.tools.get_or_init(|| scoped_tools(&self.space))
    }

    /// The offered tool `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.tools().iter().find(|t| t.tool.name == name)
    }

    /// Runs `name` with `args` on `backend` within the scope: fill in or check the Space, look
    /// up the ids, run, check the result of `operation_status`, remember the holds opened.
    pub async fn call<B: Backend>(&self, backend: &B, name: &str, args: Value) -> Result<Value, ApiError> {
        let Value::Object(mut args) = args else {
            // Not an object: the operation's own decoding refuses it.
            return backend.call(name, args).await;
        };
        if let Some(field) = spaces_sdk::methods::method_of(name).and_then(|m| m.space_field) {
            self.fill_or_check(&mut args, field, field)?;
        }
        if name == "approval_create" {
            if let Some(Value::Object(held)) = args.get_mut("arguments") {
                self.fill_or_check(held, "workspace_id", "arguments.workspace_id")?;
            }
        }
        if let Some(Value::String(process_id)) = args.get("process_id") {
            let status = backend.call("process_status", json!({ "process_id": process_id })).await?;
            self.owned(&status, "workspace_id", &format!("process {process_id:?}"))?;
        }
        if let Some(Value::String(work_id)) = args.get("work_id") {
            let work = backend.call("inbox_work", json!({ "work_id": work_id })).await?;
            self.owned(&work["work"], "workspace_id", &format!("work {:?}", bounded(work_id)))?;
        }
        if name == "operation_resume" {
            if let Some(Value::String(approval_id)) = args.get("approval_id") {
                if !self.saw_hold(approval_id) {
                    return Err(self.refuse(format!(
                        "{}: {} cannot tell which Space the hold {:?} belongs to; it resumes only holds it saw opened for Space {:?} (the approval_id of its own approval_create, apply_patch or exec_command)",
                        self.scoped(),
                        self.holder,
                        bounded(approval_id),
                        self.space
                    )));
                }
            }
        }
        let result = backend.call(name, Value::Object(args)).await;
        if HOLDING_TOOLS.contains(&name) {
            let opened = match &result {
                Ok(v) => v.get("approval_id").and_then(Value::as_str).map(str::to_owned),
                Err(e) => e.approval_id.clone(),
            };
            if let Some(id) = opened {
                self.holds.lock().unwrap_or_else(|p| p.into_inner()).insert(id);
            }
        }
        let value = result?;
        if name == "operation_status" {
            let id = value.get("operation_id").and_then(Value::as_str).unwrap_or("?");
            self.owned(&value, "workspace_id", &format!("operation {:?}", bounded(id)))?;
        }
        Ok(value)
    }

    fn saw_hold(&self, approval_id: &str) -> bool {
        self.holds.lock().unwrap_or_else(|p| p.into_inner()).contains(approval_id)
    }

    /// `obj[field]` left out or `null`: set to the scope; the scope: fine; anything else a
    /// string: refused, naming `path`. A non-string is left for the operation to refuse.
    fn fill_or_check(&self, obj: &mut Map<String, Value>, field: &str, path: &str) -> Result<(), ApiError> {
        match obj.get(field) {
            None | Some(Value::Null) => {
                obj.insert(field.to_owned(), Value::String(self.space.clone()));
                Ok(())
            }
            Some(Value::String(s)) if *s == self.space => Ok(()),
            Some(Value::String(other)) => {
                let mut e = self.refuse(format!(
                    "{}: {path} {:?} names another Space; leave it out or name {:?}",
                    self.scoped(),
                    bounded(other),
                    self.space
                ));
                e.field = Some(path.to_owned());
                Err(e)
            }
            Some(_) => Ok(()),
        }
    }

    /// Refuses unless `record[field]` is the scope (`what` names the record).
    fn owned(&self, record: &Value, field: &str, what: &str) -> Result<(), ApiError> {
        match record.get(field).and_then(Value::as_str) {
            Some(s) if s == self.space => Ok(()),
            _ => Err(self.refuse(format!("{}: {what} belongs to another Space", self.scoped()))),
        }
    }

    fn scoped(&self) -> String {
        format!("{} is scoped to Space {:?}", self.holder, self.space)
    }

    fn refuse(&self, message: String) -> ApiError {
        ApiError::new(self.refusal, message)
    }
}

/// The tools a scope of `space` offers, with their scoped input schemas: made once while any
/// scope of the Space holds them (issue 30: made for every run, they were about 120 KB of each
/// run's memory in the daemon, kept after the run stopped).
fn scoped_tools(space: &str) -> Arc<Vec<ToolEntry>> {
    static MADE: OnceLock<Mutex<HashMap<String, Weak<Vec<ToolEntry>>>>> = OnceLock::new();
    let mut made = MADE.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tools) = made.get(space).and_then(Weak::upgrade) {
        return tools;
    }
    let tools: Arc<Vec<ToolEntry>> =
        Arc::new(tools::tools().iter().filter(|t| !NOT_OFFERED.contains(&t.tool.name.as_ref())).map(|t| scoped_entry(t, space)).collect());
    // Spaces whose lists no scope holds any more go with this one's entry.
    made.retain(|_, tools| tools.strong_count() > 0);
    made.insert(space.to_owned(), Arc::downgrade(&tools));
    tools
}

/// `entry` as a scoped server offers it: a Space field is no longer `required`, and its
/// description (and that of `approval_create`'s `arguments`) says the scope fills it in.
fn scoped_entry(entry: &ToolEntry, space: &str) -> ToolEntry {
    let mut entry = entry.clone();
    let mut schema = (*entry.tool.input_schema).clone();
    let note = format!("This server is scoped to Space {space:?}: leave it out (it is filled in) or name {space:?}; another Space is refused (UNAUTHORIZED).");
    let scoped_fields: Vec<&str> = spaces_sdk::methods::method_of(&entry.tool.name).and_then(|m| m.space_field).into_iter().collect();
    if entry.tool.name == "approval_create" {
        if let Some(p) = property_mut(&mut schema, "arguments") {
            describe(p, &format!("Its `workspace_id` may be left out. {note}"));
        }
    }
    for field in &scoped_fields {
        if let Some(p) = property_mut(&mut schema, field) {
            describe(p, &note);
        }
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| !r.as_str().is_some_and(|r| scoped_fields.contains(&r)));
        if required.is_empty() {
            schema.remove("required");
        }
    }
    entry.tool.input_schema = Arc::new(schema);
    entry
}

fn property_mut<'a>(schema: &'a mut Map<String, Value>, field: &str) -> Option<&'a mut Value> {
    schema.get_mut("properties").and_then(|p| p.get_mut(field))
}

/// Appends `note` to the `description` of a property schema.
fn describe(property: &mut Value, note: &str) {
    let Some(obj) = property.as_object_mut() else { return };
    let text = match obj.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{d}\n{note}"),
        _ => note.to_owned(),
    };
    obj.insert("description".into(), Value::String(text));
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A backend that answers from a table and records the calls it got.
    #[derive(Clone, Default)]
    struct Fake {
        answers: Arc<HashMap<String, Result<Value, ApiError>>>,
        calls: Arc<Mutex<Vec<(String, Value)>>>,
    }

    impl Fake {
        fn new(answers: Vec<(&str, Result<Value, ApiError>)>) -> Fake {
            Fake { answers: Arc::new(answers.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()), ..Default::default() }
        }
        fn calls(&self) -> Vec<(String, Value)> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl Backend for Fake {
        async fn call(&self, name: &str, args: Value) -> Result<Value, ApiError> {
            self.calls.lock().unwrap().push((name.to_owned(), args));
            self.answers.get(name).cloned().unwrap_or_else(|| Ok(json!({})))
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    #[test]
    fn the_tool_list_drops_other_spaces_and_self_approval_and_makes_the_space_optional() {
        let s = Scope::new("proj");
        let names: Vec<&str> = s.tools().iter().map(|t| t.tool.name.as_ref()).collect();
        for gone in NOT_OFFERED {
            assert!(!names.contains(&gone), "{gone} is not offered");
        }
        assert_eq!(names.len(), tools::tools().len() - NOT_OFFERED.len());
        assert!(names.contains(&"agent_capabilities") && names.contains(&"operation_resume"));
        for (tool, field) in [
            ("read", "workspace_id"),
            ("exec_command", "workspace_id"),
            ("work_open", "workspace_id"),
            ("agent_start", "space"),
            ("agent_events", "space"),
        ] {
            let schema = &s.tool(tool).unwrap().tool.input_schema;
            let required: Vec<&str> =
                schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            assert!(!required.contains(&field), "{tool}: {field} is optional when scoped: {required:?}");
            let desc = schema["properties"][field]["description"].as_str().unwrap();
            assert!(desc.contains("scoped to Space \"proj\""), "{tool}: {desc}");
        }
        let read = &s.tool("read").unwrap().tool.input_schema;
        assert!(read["required"].as_array().unwrap().contains(&json!("path")), "other required fields stay");
        let unscoped = tools::tool("read").unwrap();
        assert!(
            unscoped.tool.input_schema["required"].as_array().unwrap().contains(&json!("workspace_id")),
            "the unscoped list is unchanged"
        );
        let ac = &s.tool("approval_create").unwrap().tool.input_schema;
        assert!(ac["properties"]["arguments"]["description"].as_str().unwrap().contains("may be left out"));
    }

    #[test]
    fn the_space_is_filled_in_or_checked() {
        let s = Scope::new("proj");
        let b = Fake::default();
        block_on(s.call(&b, "read", json!({"path": "a.txt"}))).unwrap();
        block_on(s.call(&b, "read", json!({"workspace_id": "proj", "path": "b.txt"}))).unwrap();
        block_on(s.call(&b, "agent_list", json!({}))).unwrap();
        block_on(s.call(&b, "approval_create", json!({"tool": "exec_command", "arguments": {"command": ["true"]}}))).unwrap();
        let calls = b.calls();
        assert_eq!(calls[0], ("read".to_owned(), json!({"workspace_id": "proj", "path": "a.txt"})));
        assert_eq!(calls[1].1["workspace_id"], "proj");
        assert_eq!(calls[2], ("agent_list".to_owned(), json!({"space": "proj"})));
        assert_eq!(calls[3].1["arguments"], json!({"workspace_id": "proj", "command": ["true"]}));

        for (tool, args, field) in [
            ("read", json!({"workspace_id": "other", "path": "a"}), "workspace_id"),
            ("agent_start", json!({"space": "other", "agent": "claude-code", "prompt": "hi"}), "space"),
            (
                "approval_create",
                json!({"tool": "apply_patch", "arguments": {"workspace_id": "other", "patch": "x"}}),
                "arguments.workspace_id",
            ),
        ] {
            let e = block_on(s.call(&b, tool, args)).unwrap_err();
            assert_eq!(e.code, ErrorCode::Unauthorized, "{tool}");
            assert_eq!(e.field.as_deref(), Some(field));
            assert!(e.message.contains("scoped to Space \"proj\"") && e.message.contains("\"other\""), "{}", e.message);
        }
        assert_eq!(b.calls().len(), 4, "a refused call never reaches the daemon");
    }

    #[test]
    fn ids_are_looked_up_before_the_call() {
        let s = Scope::new("proj");
        let mine = Fake::new(vec![
            ("process_status", Ok(json!({"process_id": "proc-1", "workspace_id": "proj"}))),
            ("inbox_work", Ok(json!({"work": {"work_id": "work-1", "workspace_id": "proj"}, "intents": []}))),
        ]);
        block_on(s.call(&mine, "read_process", json!({"process_id": "proc-1", "work_id": "work-1"}))).unwrap();
        let names: Vec<String> = mine.calls().into_iter().map(|c| c.0).collect();
        assert_eq!(names, ["process_status", "inbox_work", "read_process"]);

        let theirs = Fake::new(vec![
            ("process_status", Ok(json!({"process_id": "proc-2", "workspace_id": "other"}))),
            ("inbox_work", Ok(json!({"work": {"work_id": "work-2", "workspace_id": "other"}, "intents": []}))),
            ("operation_status", Ok(json!({"operation_id": "op-2", "workspace_id": "other"}))),
        ]);
        for (tool, args) in [
            ("terminate_process", json!({"process_id": "proc-2"})),
            ("steer_claim_next", json!({"work_id": "work-2"})),
            ("read", json!({"path": "a", "work_id": "work-2"})),
            ("operation_status", json!({"operation_id": "op-2"})),
        ] {
            let e = block_on(s.call(&theirs, tool, args)).unwrap_err();
            assert_eq!(e.code, ErrorCode::Unauthorized, "{tool}");
            assert!(e.message.contains("belongs to another Space"), "{}", e.message);
        }
        let names: Vec<String> = theirs.calls().into_iter().map(|c| c.0).collect();
        assert!(!names.iter().any(|n| n == "terminate_process" || n == "steer_claim_next" || n == "read"), "{names:?}");

        let gone = Fake::new(vec![("process_status", Err(ApiError::new(ErrorCode::ProcessNotFound, "no such process")))]);
        let e = block_on(s.call(&gone, "write_stdin", json!({"process_id": "proc-x", "data": "y"}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::ProcessNotFound, "the lookup's own error");
    }

    #[test]
    fn operation_resume_takes_only_holds_seen_opened_here() {
        let s = Scope::new("proj");
        let mut held = ApiError::new(ErrorCode::ApprovalRequired, "held");
        held.approval_id = Some("appr-mine".into());
        let b = Fake::new(vec![
            ("apply_patch", Err(held)),
            ("approval_create", Ok(json!({"approval_id": "appr-created", "workspace_id": "proj"}))),
        ]);
        let e = block_on(s.call(&b, "operation_resume", json!({"approval_id": "appr-mine"}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthorized, "not seen yet");
        assert_eq!(block_on(s.call(&b, "apply_patch", json!({"patch": "p"}))).unwrap_err().code, ErrorCode::ApprovalRequired);
        block_on(s.call(&b, "operation_resume", json!({"approval_id": "appr-mine"}))).unwrap();
        block_on(s.call(&b, "approval_create", json!({"tool": "exec_command", "arguments": {"command": ["true"]}}))).unwrap();
        block_on(s.call(&b, "operation_resume", json!({"approval_id": "appr-created"}))).unwrap();
        let e = block_on(s.call(&b, "operation_resume", json!({"approval_id": "appr-elsewhere"}))).unwrap_err();
        assert!(e.message.contains("cannot tell which Space"), "{}", e.message);
    }
}
