//! What a scenario needs to know about each real harness: its wire, binary and scripted replies.

use std::path::Path;

use spaces_testkit::{Reply, Wire};

/// A harness under test.
#[derive(Debug, Clone, Copy)]
pub struct H {
    pub id: &'static str,
    pub wire: Wire,
    /// The directory of its pinned install under the tools dir: its id, or the id of the
    /// harness whose package it shares (`spacesd`'s `install_id`).
    pub tools: &'static str,
    /// Pinned binary relative to `<tools dir>/<tools>`.
    pub binary: &'static str,
    /// The pinned version (the harness crate's install spec), as `installed_version` reports it.
    pub pinned: &'static str,
}

pub const CLAUDE: H = H {
    id: "claude-code",
    wire: Wire::AnthropicMessages,
    tools: "claude-code",
    binary: "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    pinned: "2.1.197",
};

/// Codex on `codex exec --json` (`openai-codex-exec`, the fallback wire: one process per turn).
pub const CODEX: H = H {
    id: "openai-codex-exec",
    wire: Wire::OpenAiResponses,
    tools: "openai-codex",
    binary: "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    pinned: "0.171.0",
};

/// Codex on `codex app-server` (`openai-codex`, issue 31): the same CLI and install as
/// [`CODEX`], one long-lived process per run speaking JSON-RPC.
pub const CODEX_APP_SERVER: H = H { id: "openai-codex", ..CODEX };

/// opencode over the Agent Client Protocol (issue 31), its model on the Chat Completions wire.
pub const OPENCODE: H = H {
    id: "opencode",
    wire: Wire::OpenAiChatCompletions,
    tools: "opencode",
    binary: "node_modules/opencode-linux-x64/bin/opencode",
    pinned: "1.18.33",
};

/// Gemini CLI over the Agent Client Protocol (issue 31), its model on Gemini's
/// `streamGenerateContent` wire.
pub const GEMINI: H = H {
    id: "gemini-cli",
    wire: Wire::GeminiStreamGenerateContent,
    tools: "gemini-cli",
    binary: "node_modules/@google/gemini-cli/bundle/gemini.js",
    pinned: "0.61.0",
};

impl H {
    /// The CLI's shell tool running `command` (the ACP CLIs: opencode's `bash`, Gemini CLI's
    /// `run_shell_command`).
    fn shell(&self, command: &str) -> Reply {
        let name = if self.wire == Wire::OpenAiChatCompletions { "bash" } else { "run_shell_command" };
        Reply::ToolCall { name: name.into(), input: serde_json::json!({"command": command, "description": "a command"}) }
    }

    /// A tool call that creates `name` with `content` in the Space at `root`.
    pub fn create_file(&self, root: &Path, name: &str, content: &str) -> Reply {
        match self.wire {
            Wire::AnthropicMessages => Reply::ToolCall {
                name: "Write".into(),
                input: serde_json::json!({"file_path": root.join(name).display().to_string(), "content": content}),
            },
            Wire::OpenAiResponses => Reply::CustomToolCall {
                name: "apply_patch".into(),
                input: format!("*** Begin Patch\n*** Add File: {name}\n+{}\n*** End Patch\n", content.trim_end()),
            },
            Wire::OpenAiChatCompletions | Wire::GeminiStreamGenerateContent => {
                self.shell(&format!("printf '%s\\n' '{}' > '{}'", content.trim_end(), root.join(name).display()))
            }
        }
    }

    /// A tool call running a shell command that ends by itself, in the Space's folder.
    pub fn command(&self, command: &str) -> Reply {
        match self.wire {
            Wire::AnthropicMessages => {
                Reply::ToolCall { name: "Bash".into(), input: serde_json::json!({"command": command, "description": "a command"}) }
            }
            Wire::OpenAiResponses => {
                Reply::ToolCall { name: "exec_command".into(), input: serde_json::json!({"cmd": command, "yield_time_ms": 30000}) }
            }
            Wire::OpenAiChatCompletions | Wire::GeminiStreamGenerateContent => self.shell(command),
        }
    }

    /// A tool call running a shell command that does not end by itself.
    pub fn long_command(&self, command: &str) -> Reply {
        match self.wire {
            Wire::AnthropicMessages => Reply::ToolCall {
                name: "Bash".into(),
                input: serde_json::json!({"command": command, "description": "long command", "timeout": 600000}),
            },
            Wire::OpenAiResponses => {
                Reply::ToolCall { name: "exec_command".into(), input: serde_json::json!({"cmd": command, "yield_time_ms": 600000}) }
            }
            Wire::OpenAiChatCompletions | Wire::GeminiStreamGenerateContent => self.shell(command),
        }
    }
}
