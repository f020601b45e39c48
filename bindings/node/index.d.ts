// Types of index.js (@spaces/sdk). Written by gen-types.js from index.d.ts.in and the
// operation catalogue: edit index.d.ts.in, then `npm run build`.

/** The native module's catalogue entry of one operation. */
export type { OperationEntry } from './native'
import type { OperationEntry } from './native'

/** A failed call. `code` is the wire error code (`RUN_NOT_FOUND`, `INVALID_ARGUMENT`, ...), or
 * `DAEMON_UNREACHABLE` / `DAEMON_START_FAILED` / `CONNECTION_LOST` / `PROTOCOL`; `field` names the offending request field when known. */
export declare class SpacesError extends Error {
  code: string
  field?: string
  operationId?: string
  approvalId?: string
}

/** SpaceAgentOptions in camelCase. The contract's snake_case keys are accepted too
 * ({@link SpaceAgentOptionsWire}); a key of neither (`baseURL`) is a type error here and
 * `INVALID_ARGUMENT` naming it at run time. */
export interface SpaceAgentOptions {
  envFromHost?: string[]
  env?: Record<string, string>
  repo?: string
  branch?: string
  cwd?: string
  model?: string
  /** A custom model endpoint. */
  baseUrl?: string
  /** Stop (resumably) once the prompt is answered. */
  exitWhenIdle?: boolean
  home?: string
  mcpServers?: unknown[]
  spaceTools?: boolean
  /** A name for people, shown by agent list and status (one line, at most 80 characters). */
  label?: string
  /** Attachments (8 MiB or less each, base64): written into the run's directory and named in the first prompt. */
  files?: { name: string; content_base64: string }[]
  /** The most the run may spend; at it, turns end `budget_reached` until `agentBudget` raises it. */
  budget?: Budget
}

/** SpaceAgentOptions with the contract's snake_case keys, as on the wire (docs/api.md). */
export interface SpaceAgentOptionsWire {
  env_from_host?: string[]
  env?: Record<string, string>
  repo?: string
  branch?: string
  cwd?: string
  model?: string
  base_url?: string
  exit_when_idle?: boolean
  home?: string
  mcp_servers?: unknown[]
  space_tools?: boolean
  label?: string
  files?: { name: string; content_base64: string }[]
  budget?: Budget
}

/** A run's budget (`options.budget`, `agentBudget`): every field optional. */
export interface Budget {
  /** Most US dollars (the CLI's own cost, or the daemon's price table). */
  usd?: number
  /** Most tokens: input (cached included) plus output. */
  tokens?: number
  /** Most turns. */
  turns?: number
}

/** What runs spent (the usage ledger; `agentUsage`, and `usage` of a run's status). Snake_case, as on the wire. */
export interface UsageTotals {
  turns: number
  input_tokens: number
  cached_input_tokens: number
  output_tokens: number
  /** US dollars. */
  cost_usd: number
  /** True when part of cost_usd came from the daemon's price table. */
  cost_estimated: boolean
  /** Turns whose cost is unknown (not in cost_usd). */
  cost_unknown_turns: number
  /** Wall time of the turns, ms. */
  duration_ms: number
  tool_calls: number
}

/** Result of Space.agentStart. */
export interface AgentStartReport {
  runId: string
  agent: string
  space: string
  /** spacesd process tag of the first turn. */
  processTag: string
  /** Preparation steps that could not be completed. */
  notes: string[]
  /** The whole report as JSON (snake_case, as on the wire). */
  json: string
}

/** One agent run's status. */
export interface AgentRunStatus {
  runId: string
  agent: string | null
  space: string
  /** running, queued (waiting for a turn slot), quota_waiting (until resetsAtMs, then it continues), idle, done, failed, crashed, stopped, unknown. */
  status: string
  reason: string
  /** preparing, installing, starting, working, waiting, exited, failed, crashed, unknown. */
  phase: string
  /** The last turn's final text (agentStatus only). */
  resultText: string | null
  /** A follow-up sent now starts the next turn (the server's rule). Read this, never derive it from status. */
  acceptsMessage: boolean
  outputTail: string | null
  turns: number
  sessionId: string | null
  createdMs: number
  /** The run's options.label, if it was given one. */
  label?: string | null
  /** The first turn's prompt on one line, secrets redacted, cut to 60 characters. */
  promptExcerpt?: string | null
  /** What the run spent over its ended turns. */
  usage: UsageTotals
  /** The run's budget, when it has one; at it, acceptsMessage is false and reason says so. */
  budget?: Budget | null
  /** With status quota_waiting: when the run continues by itself, Unix ms. */
  resetsAtMs?: number | null
  json: string
}

/** Result of Space.agentMessage / agentInterrupt / agentStop. */
export interface AgentActionReport {
  runId: string
  /** Delivered (message) or stopped (stop). */
  ok: boolean
  reason: string
  json: string
}

/** A live follow of one run (Space.agentFollow): `for await (const ev of follow)`. */
export interface AgentFollow extends AsyncIterableIterator<AgentEvent> {
  /** How the events arrive: `sse`, `long_poll`, or `unopened` before the first event. */
  readonly transport: 'sse' | 'long_poll' | 'unopened'
  /** The seq of the last event returned (or the starting cursor). */
  readonly cursor: number
}

/** One normalized event, as on the wire (docs/api.md, "Events"). */
export interface AgentEvent {
  seq: number
  ts_ms: number
  turn: number
  kind: string
  category: string
  text?: string
  stop_reason?: string
  [field: string]: unknown
}

/** The operation catalogue. */
export declare const catalogue: OperationEntry[]
/** SPACES_HOME, else <data dir>/spaces. */
export declare function defaultStateDir(): string

/** A daemon: the local one of a state dir (started detached from this package when none
 * answers), or a remote one over TCP (`url` + `token`). A daemon this SDK started ends a few
 * seconds after its last client is gone (`close()` or the process exiting), once no turn is in
 * flight, unless `keepDaemon: true`. */
export declare class Spaces {
  constructor(options?: { stateDir?: string; url?: string; token?: string; keepDaemon?: boolean })
  /** Connects now (starting the local daemon if needed). */
  connect(): Promise<this>
  /** Lets the daemon go (one this SDK started ends once no client holds it, unless `keepDaemon`); runs go on. */
  close(): Promise<void>
  /** The pid of the daemon this object started, or null. */
  daemonPid(): Promise<number | null>
  /** What starts this state dir's daemon (this package's daemon.js under this Node), or null for a remote daemon. */
  daemonCommand(): string[] | null
  /** Any operation by wire name with snake_case arguments; resolves to its result JSON, parsed. */
  call(name: string, args?: Record<string, unknown>): Promise<any>
  /** The Space `name` (not checked until a call). */
  space(name: string): Space
  /** Registers the directory `path` as the Space `name`. */
  addSpace(name: string, path: string): Promise<{ name: string; root: string; read_only: boolean; approvals: string; network: string }>
  listSpaces(): Promise<Array<{ name: string; root: string; read_only: boolean; approvals: string; network: string }>>
  /** What every agent harness is and cannot do, as JSON. */
  agentCapabilities(): Promise<string>
  /** Every Space registered on this host. (`space_list`: GET /v1/spaces) */
  spaceList(args?: {  }): Promise<any>
  /** Register a Space (name, directory, policy); the same registration again is a no-op. (`space_add`: POST /v1/spaces) */
  spaceAdd(args: { approvals?: any; name: any; network?: any; read_only?: any; replace?: any; root: any }): Promise<any>
  /** Start an agent run with a prompt; answers as soon as the run is launched. (`agent_start`: POST /v1/spaces/{space}/agents) */
  agentStart(args: { agent: any; options?: any; prompt: any; request_id?: any; show?: any; space: any; traceparent?: any }): Promise<any>
  /** Every run of a Space, newest first, whoever started it. (`agent_list`: GET /v1/spaces/{space}/agents) */
  agentList(args: { space: any }): Promise<any>
  /** One run's status, phase, reason, last result and output tail. (`agent_status`: GET /v1/spaces/{space}/agents/{run_id}) */
  agentStatus(args: { run_id: any; space: any; tail?: any }): Promise<any>
  /** A page of the run's normalized events after a cursor, optionally long-polling. (`agent_events`: GET /v1/spaces/{space}/agents/{run_id}/events) */
  agentEvents(args: { cursor?: any; max?: any; raw?: any; run_id: any; space: any; wait_ms?: any }): Promise<any>
  /** Send a follow-up: the next turn, queued mid-turn, or forced (steered into the running turn, or run after an interrupt). (`agent_message`: POST /v1/spaces/{space}/agents/{run_id}/message) */
  agentMessage(args: { force?: any; message_id?: any; run_id: any; space: any; text: any; traceparent?: any }): Promise<any>
  /** Cancel the turn in flight; the session stays open. (`agent_interrupt`: POST /v1/spaces/{space}/agents/{run_id}/interrupt) */
  agentInterrupt(args: { run_id: any; space: any }): Promise<any>
  /** Stop the run: signal, grace, then kill of every process it has. (`agent_stop`: POST /v1/spaces/{space}/agents/{run_id}/stop) */
  agentStop(args: { run_id: any; space: any }): Promise<any>
  /** Unregister a Space and delete its runs' history (refused while runs live, unless force stops them). (`space_remove`: POST /v1/spaces/{name}/remove) */
  spaceRemove(args: { force?: any; name: any }): Promise<any>
  /** Delete a run that is not live: its row, events and run directory. (`agent_remove`: POST /v1/spaces/{space}/agents/{run_id}/remove) */
  agentRemove(args: { run_id: any; space: any }): Promise<any>
  /** Delete the Space's runs that are not live and were created more than older_than_ms ago. (`agent_prune`: POST /v1/spaces/{space}/agents/prune) */
  agentPrune(args: { older_than_ms: any; space: any }): Promise<any>
  /** What a run, or every run of the Space, spent: tokens, cost, time and tool calls, in total and per turn. (`agent_usage`: GET /v1/spaces/{space}/usage) */
  agentUsage(args: { run_id?: any; since_ms?: any; space: any; turns?: any }): Promise<any>
  /** Set or raise a run's budget (usd, tokens, turns); a run at its budget takes turns again once it is raised. (`agent_budget`: POST /v1/spaces/{space}/agents/{run_id}/budget) */
  agentBudget(args: { budget: any; run_id: any; space: any }): Promise<any>
  /** What a run's turns changed in its working folder: the files with +/- lines, and the unified diff. (`agent_diff`: GET /v1/spaces/{space}/agents/{run_id}/diff) */
  agentDiff(args: { from_turn?: any; run_id: any; space: any; to_turn?: any; turn?: any }): Promise<any>
  /** Take an idle run back to the end of a turn: its folder from the checkpoint, its conversation resumed there. (`agent_rewind`: POST /v1/spaces/{space}/agents/{run_id}/rewind) */
  agentRewind(args: { run_id: any; space: any; to_turn: any; what?: any }): Promise<any>
  /** Fork a run at a turn into a new idle run: its own worktree at that turn's checkpoint, its session forked there. (`agent_fork`: POST /v1/spaces/{space}/agents/{run_id}/fork) */
  agentFork(args: { at_turn: any; label?: any; run_id: any; space: any }): Promise<any>
  /** Merge a fork's changes into its parent's folder (three-way, per file); with a conflict nothing is written. (`agent_merge`: POST /v1/spaces/{space}/agents/{run_id}/merge) */
  agentMerge(args: { run_id: any; space: any }): Promise<any>
  /** Register an endpoint to be posted chosen run events, signed (Standard Webhooks), retried, in order per run. (`webhook_add`: POST /v1/webhooks) */
  webhookAdd(args: { events?: any; secret: any; url: any }): Promise<any>
  /** Every registered webhook endpoint with its deliveries counted (never its secret). (`webhook_list`: GET /v1/webhooks) */
  webhookList(args?: {  }): Promise<any>
  /** Unregister a webhook endpoint; its deliveries go too. (`webhook_remove`: POST /v1/webhooks/{webhook_id}/remove) */
  webhookRemove(args: { webhook_id: any }): Promise<any>
  /** Webhook deliveries, newest first: pending, delivered and failed ones, with tries and the last error. (`webhook_deliveries`: GET /v1/webhooks/deliveries) */
  webhookDeliveries(args?: { max?: any; status?: any; webhook_id?: any }): Promise<any>
  /** Send to a persistent agent: a follow-up to its live run, or a fresh run with its home restored. (`persistent_agent_send`: POST /v1/homes/{name}/send) */
  persistentAgentSend(args: { name: any; text: any }): Promise<any>
  /** Every persistent agent's home in this host's volume, with its lease and latest snapshot. (`home_list`: GET /v1/homes) */
  homeList(args?: {  }): Promise<any>
  /** The snapshots of one home, oldest first. (`home_snapshots`: GET /v1/homes/{name}/snapshots) */
  homeSnapshots(args: { name: any }): Promise<any>
  /** Write one snapshot of a home as a self-contained .tar.zst file on the daemon's host. (`home_export`: POST /v1/homes/{name}/export) */
  homeExport(args: { at?: any; name: any; path: any }): Promise<any>
  /** Make a .tar.zst file on the daemon's host the home's newest snapshot. (`home_import`: POST /v1/homes/{name}/import) */
  homeImport(args: { name: any; path: any }): Promise<any>
  /** Point-in-time restore: a snapshot into a directory, or back as the home's newest snapshot. (`home_restore`: POST /v1/homes/{name}/restore) */
  homeRestore(args: { at?: any; name: any; to?: any }): Promise<any>
  /** Delete a home and every snapshot of it (refused while a run holds its lease). (`home_delete`: POST /v1/homes/{name}/delete) */
  homeDelete(args: { name: any }): Promise<any>
  /** Give a home to another Space: only that Space's runs may use it from then on. (`home_move`: POST /v1/homes/{name}/move) */
  homeMove(args: { name: any; space: any }): Promise<any>
  /** What the workspace permits and this host supports: permissions, limits, process lifetime, isolation. (`workspace_info`: POST /v1/tools/workspace_info) */
  workspaceInfo(args: { work_id?: any; workspace_id: any }): Promise<any>
  /** Read a file of the workspace (a window of at most 1 MiB) with its version. (`read`: POST /v1/tools/read) */
  read(args: { limit?: any; offset?: any; path: any; work_id?: any; workspace_id: any }): Promise<any>
  /** List the workspace's files matching a glob, sorted, in pages. (`find`: POST /v1/tools/find) */
  find(args: { glob?: any; limit?: any; offset?: any; work_id?: any; workspace_id: any }): Promise<any>
  /** Apply a V4A patch atomically, with expected versions, an idempotency key and a preview mode. (`apply_patch`: POST /v1/tools/apply_patch) */
  applyPatch(args: { check_only?: any; expected_versions?: any; operation_key?: any; patch: any; work_id?: any; workspace_id: any }): Promise<any>
  /** The ledger record of one apply_patch operation, by id or key. (`operation_status`: POST /v1/tools/operation_status) */
  operationStatus(args?: { operation_id?: any; operation_key?: any; work_id?: any }): Promise<any>
  /** Start a command (argv, no shell) in the workspace on a PTY or pipes; answers with its handle. (`exec_command`: POST /v1/tools/exec_command) */
  execCommand(args: { command: any; tty?: any; work_id?: any; workspace_id: any }): Promise<any>
  /** Read a command's retained output from a cursor, optionally waiting for more. (`read_process`: POST /v1/tools/read_process) */
  readProcess(args: { cursor?: any; process_id: any; wait_ms?: any; work_id?: any }): Promise<any>
  /** Whether a command runs or how it ended, with its output counts. (`process_status`: POST /v1/tools/process_status) */
  processStatus(args: { process_id: any; work_id?: any }): Promise<any>
  /** Write bytes to a running command's stdin or terminal. (`write_stdin`: POST /v1/tools/write_stdin) */
  writeStdin(args: { data: any; process_id: any; work_id?: any }): Promise<any>
  /** Resize a running command's terminal. (`process_resize`: POST /v1/tools/process_resize) */
  processResize(args: { cols: any; process_id: any; rows: any; work_id?: any }): Promise<any>
  /** End a command's whole process group: signal, grace, kill. (`terminate_process`: POST /v1/tools/terminate_process) */
  terminateProcess(args: { process_id: any; work_id?: any }): Promise<any>
  /** Open an approval hold for an apply_patch or exec_command call. (`approval_create`: POST /v1/tools/approval_create) */
  approvalCreate(args: { arguments: any; tool: any; work_id?: any }): Promise<any>
  /** Grant or deny a pending approval hold. (`approval_resolve`: POST /v1/tools/approval_resolve) */
  approvalResolve(args: { approval_id: any; decision: any; work_id?: any }): Promise<any>
  /** Run a granted hold's call once and store its result. (`operation_resume`: POST /v1/tools/operation_resume) */
  operationResume(args: { approval_id: any; work_id?: any }): Promise<any>
  /** Open a work (coordination context) in a workspace. (`work_open`: POST /v1/tools/work_open) */
  workOpen(args: { title?: any; workspace_id: any }): Promise<any>
  /** Counts of a work's steering queue, never the instruction bodies. (`steer_status`: POST /v1/tools/steer_status) */
  steerStatus(args: { work_id: any }): Promise<any>
  /** Claim the next deliverable instruction of a work. (`steer_claim_next`: POST /v1/tools/steer_claim_next) */
  steerClaimNext(args: { work_id: any }): Promise<any>
  /** Mark a claimed instruction done or blocked. (`steer_complete`: POST /v1/tools/steer_complete) */
  steerComplete(args: { intent_id: any; outcome: any; work_id: any }): Promise<any>
  /** Close a work, unless instructions are still pending. (`work_finish`: POST /v1/tools/work_finish) */
  workFinish(args: { work_id: any }): Promise<any>
  /** The works of this host, optionally of one workspace. (`inbox_works`: GET /inbox/works) */
  inboxWorks(args?: { workspace_id?: any }): Promise<any>
  /** One work and every intent of it, in queue order. (`inbox_work`: GET /inbox/works/{work_id}) */
  inboxWork(args: { work_id: any }): Promise<any>
  /** Add a draft instruction to a work's queue. (`inbox_intent_create`: POST /inbox/works/{work_id}/intents) */
  inboxIntentCreate(args: { body: any; delivery?: any; kind?: any; work_id: any }): Promise<any>
  /** Reorder a work's open instructions. (`inbox_reorder`: POST /inbox/works/{work_id}/reorder) */
  inboxReorder(args: { intent_ids: any; work_id: any }): Promise<any>
  /** Replace a draft's text (with a revision check). (`inbox_intent_edit`: PATCH /inbox/intents/{intent_id}) */
  inboxIntentEdit(args: { body: any; intent_id: any; revision: any }): Promise<any>
  /** Queue a draft: from now on it can be delivered. (`inbox_intent_queue`: POST /inbox/intents/{intent_id}/queue) */
  inboxIntentQueue(args: { intent_id: any; revision: any }): Promise<any>
  /** Cancel a draft or queued instruction. (`inbox_intent_cancel`: POST /inbox/intents/{intent_id}/cancel) */
  inboxIntentCancel(args: { intent_id: any }): Promise<any>
  /** Stop a work: the agent's later steering calls get WORK_CLOSED. (`inbox_work_stop`: POST /inbox/works/{work_id}/stop) */
  inboxWorkStop(args: { work_id: any }): Promise<any>
}

/** One Space: its agent runs and the CodeSpace tools, with `space` / `workspace_id` filled. */
export declare class Space {
  readonly spaces: Spaces
  readonly name: string
  /** Starts an agent CLI (claude-code, openai-codex, ...) with a prompt, as a detached run.
   * `requestId`: an idempotency key (1-128 ASCII letters, digits, `-_.:`; a UUID is sent when
   * none is given): a repeat answers the first run and starts nothing; a call whose connection is
   * lost before its answer is sent once more with its key (`CONNECTION_LOST` if that fails too).
   * `traceparent`: the caller's W3C trace context; the run's spans join that trace. */
  agentStart(agent: string, prompt: string, show?: boolean | null, options?: SpaceAgentOptions | SpaceAgentOptionsWire | null, requestId?: string | null, traceparent?: string | null): Promise<AgentStartReport>
  /** A run's status with the last `tail` lines of output. */
  agentStatus(runId: string, tail?: number | null): Promise<AgentRunStatus>
  /** Events after `cursor` (0: the start), as the agent_events JSON (events, cursor, caught_up, status). */
  agentEvents(runId: string, cursor?: number | null, max?: number | null): Promise<string>
  /** Sends a follow-up message to a run. `messageId`: an idempotency key (as `agentStart`'s
   * `requestId`): a repeat answers the first report and delivers nothing twice. */
  agentMessage(runId: string, text: string, force?: boolean | null, messageId?: string | null, traceparent?: string | null): Promise<AgentActionReport>
  /** Cancels the run's turn in flight; the session stays open. */
  agentInterrupt(runId: string): Promise<AgentActionReport>
  /** Stops a run. */
  agentStop(runId: string): Promise<AgentActionReport>
  /** Every agent run in this Space. */
  agentList(): Promise<AgentRunStatus[]>
  /** Follows the run's events live from `cursor` over the daemon's server-sent event stream
   * (Last-Event-ID reconnects; long-polls when a daemon answers no stream), until caught up and
   * `until` is reached: `turn` (default: the run no longer running) or `stopped` (across turns). */
  agentFollow(runId: string, cursor?: number, options?: { until?: 'turn' | 'stopped' }): AgentFollow
  /** What a run, or every run of the Space, spent: tokens, cost, time and tool calls, in total and per turn. (`agent_usage`: GET /v1/spaces/{space}/usage) */
  agentUsage(args?: { run_id?: any; since_ms?: any; turns?: any }): Promise<any>
  /** What a run's turns changed in its working folder: the files with +/- lines, and the unified diff. (`agent_diff`: GET /v1/spaces/{space}/agents/{run_id}/diff) */
  agentDiff(args: { from_turn?: any; run_id: any; to_turn?: any; turn?: any }): Promise<any>
  /** Take an idle run back to the end of a turn: its folder from the checkpoint, its conversation resumed there. (`agent_rewind`: POST /v1/spaces/{space}/agents/{run_id}/rewind) */
  agentRewind(args: { run_id: any; to_turn: any; what?: any }): Promise<any>
  /** Fork a run at a turn into a new idle run: its own worktree at that turn's checkpoint, its session forked there. (`agent_fork`: POST /v1/spaces/{space}/agents/{run_id}/fork) */
  agentFork(args: { at_turn: any; label?: any; run_id: any }): Promise<any>
  /** Merge a fork's changes into its parent's folder (three-way, per file); with a conflict nothing is written. (`agent_merge`: POST /v1/spaces/{space}/agents/{run_id}/merge) */
  agentMerge(args: { run_id: any }): Promise<any>
  /** What the workspace permits and this host supports: permissions, limits, process lifetime, isolation. (`workspace_info`: POST /v1/tools/workspace_info) */
  workspaceInfo(args?: { work_id?: any }): Promise<any>
  /** Read a file of the workspace (a window of at most 1 MiB) with its version. (`read`: POST /v1/tools/read) */
  read(args: { limit?: any; offset?: any; path: any; work_id?: any }): Promise<any>
  /** List the workspace's files matching a glob, sorted, in pages. (`find`: POST /v1/tools/find) */
  find(args?: { glob?: any; limit?: any; offset?: any; work_id?: any }): Promise<any>
  /** Apply a V4A patch atomically, with expected versions, an idempotency key and a preview mode. (`apply_patch`: POST /v1/tools/apply_patch) */
  applyPatch(args: { check_only?: any; expected_versions?: any; operation_key?: any; patch: any; work_id?: any }): Promise<any>
  /** The ledger record of one apply_patch operation, by id or key. (`operation_status`: POST /v1/tools/operation_status) */
  operationStatus(args?: { operation_id?: any; operation_key?: any; work_id?: any }): Promise<any>
  /** Start a command (argv, no shell) in the workspace on a PTY or pipes; answers with its handle. (`exec_command`: POST /v1/tools/exec_command) */
  execCommand(args: { command: any; tty?: any; work_id?: any }): Promise<any>
  /** Read a command's retained output from a cursor, optionally waiting for more. (`read_process`: POST /v1/tools/read_process) */
  readProcess(args: { cursor?: any; process_id: any; wait_ms?: any; work_id?: any }): Promise<any>
  /** Whether a command runs or how it ended, with its output counts. (`process_status`: POST /v1/tools/process_status) */
  processStatus(args: { process_id: any; work_id?: any }): Promise<any>
  /** Write bytes to a running command's stdin or terminal. (`write_stdin`: POST /v1/tools/write_stdin) */
  writeStdin(args: { data: any; process_id: any; work_id?: any }): Promise<any>
  /** Resize a running command's terminal. (`process_resize`: POST /v1/tools/process_resize) */
  processResize(args: { cols: any; process_id: any; rows: any; work_id?: any }): Promise<any>
  /** End a command's whole process group: signal, grace, kill. (`terminate_process`: POST /v1/tools/terminate_process) */
  terminateProcess(args: { process_id: any; work_id?: any }): Promise<any>
  /** Open an approval hold for an apply_patch or exec_command call. (`approval_create`: POST /v1/tools/approval_create) */
  approvalCreate(args: { arguments: any; tool: any; work_id?: any }): Promise<any>
  /** Grant or deny a pending approval hold. (`approval_resolve`: POST /v1/tools/approval_resolve) */
  approvalResolve(args: { approval_id: any; decision: any; work_id?: any }): Promise<any>
  /** Run a granted hold's call once and store its result. (`operation_resume`: POST /v1/tools/operation_resume) */
  operationResume(args: { approval_id: any; work_id?: any }): Promise<any>
  /** Open a work (coordination context) in a workspace. (`work_open`: POST /v1/tools/work_open) */
  workOpen(args?: { title?: any }): Promise<any>
  /** Counts of a work's steering queue, never the instruction bodies. (`steer_status`: POST /v1/tools/steer_status) */
  steerStatus(args: { work_id: any }): Promise<any>
  /** Claim the next deliverable instruction of a work. (`steer_claim_next`: POST /v1/tools/steer_claim_next) */
  steerClaimNext(args: { work_id: any }): Promise<any>
  /** Mark a claimed instruction done or blocked. (`steer_complete`: POST /v1/tools/steer_complete) */
  steerComplete(args: { intent_id: any; outcome: any; work_id: any }): Promise<any>
  /** Close a work, unless instructions are still pending. (`work_finish`: POST /v1/tools/work_finish) */
  workFinish(args: { work_id: any }): Promise<any>
}
