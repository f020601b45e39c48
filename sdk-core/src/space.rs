//! [`Space`]: the agent operations of one Space with the seed's signatures
//! (`Space.agent_start(agent, prompt, show=None, options=None)`, API reference "Agent runs"),
//! over the typed [`Client`]. The Python and Node SDKs mirror these names.

use crate::client::{Client, ClientError};
use crate::event::EventsPage;
use crate::run::{
    ActionReport, AgentEventsRequest, AgentListRequest, AgentMessageRequest, AgentRunRequest, AgentStartReport, AgentStartRequest,
    AgentStatusRequest, RunStatus, SpaceAgentOptions,
};

/// One Space of a daemon, by name. Cheap to clone; no call is made until a method runs.
#[derive(Debug, Clone)]
pub struct Space {
    client: Client,
    name: String,
}

impl Client {
    /// The Space `name` of this daemon (it is not checked until a call: an unknown Space is
    /// `WORKSPACE_NOT_FOUND` then).
    pub fn space(&self, name: &str) -> Space {
        Space { client: self.clone(), name: name.to_owned() }
    }
}

impl Space {
    /// The Space's name (its `workspace_id`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `agent_start`: returns as soon as the run is launched. Errors: `WORKSPACE_NOT_FOUND`,
    /// `HARNESS_UNAVAILABLE`, `INVALID_ARGUMENT`.
    pub async fn agent_start(
        &self,
        agent: &str,
        prompt: &str,
        show: Option<bool>,
        options: Option<SpaceAgentOptions>,
    ) -> Result<AgentStartReport, ClientError> {
        let req = AgentStartRequest {
            space: self.name.clone(),
            agent: agent.to_owned(),
            prompt: prompt.to_owned(),
            show,
            options,
            request_id: None,
            traceparent: None,
        };
        self.client.agent_start(&req).await
    }

    /// `agent_status` with the last `tail` lines of output (default 40). Errors: `RUN_NOT_FOUND`.
    pub async fn agent_status(&self, run_id: &str, tail: Option<u32>) -> Result<RunStatus, ClientError> {
        self.client.agent_status(&AgentStatusRequest { space: self.name.clone(), run_id: run_id.to_owned(), tail }).await
    }

    /// `agent_events` after `cursor` (default 0), at most `max` (default 100). For a long-poll
    /// or raw lines, use [`Client::agent_events`] with an [`AgentEventsRequest`].
    pub async fn agent_events(&self, run_id: &str, cursor: Option<u64>, max: Option<u32>) -> Result<EventsPage, ClientError> {
        let req = AgentEventsRequest { space: self.name.clone(), run_id: run_id.to_owned(), cursor, max, ..Default::default() };
        self.client.agent_events(&req).await
    }

    /// `agent_message`: the next turn (queued mid-turn; `force` interrupts first).
    pub async fn agent_message(&self, run_id: &str, text: &str, force: Option<bool>) -> Result<ActionReport, ClientError> {
        let req = AgentMessageRequest {
            space: self.name.clone(),
            run_id: run_id.to_owned(),
            text: text.to_owned(),
            force,
            message_id: None,
            traceparent: None,
        };
        self.client.agent_message(&req).await
    }

    /// `agent_interrupt`: cancels the turn in flight.
    pub async fn agent_interrupt(&self, run_id: &str) -> Result<ActionReport, ClientError> {
        self.client.agent_interrupt(&self.run(run_id)).await
    }

    /// `agent_stop`: every process of the run ends; `ok` is false if anything is left.
    pub async fn agent_stop(&self, run_id: &str) -> Result<ActionReport, ClientError> {
        self.client.agent_stop(&self.run(run_id)).await
    }

    /// `agent_list`: every run of this Space, newest first.
    pub async fn agent_list(&self) -> Result<Vec<RunStatus>, ClientError> {
        self.client.agent_list(&AgentListRequest { space: self.name.clone() }).await
    }

    fn run(&self, run_id: &str) -> AgentRunRequest {
        AgentRunRequest { space: self.name.clone(), run_id: run_id.to_owned() }
    }
}
