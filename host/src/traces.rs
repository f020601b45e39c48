//! Traces of runs (issue 33): OpenTelemetry spans exported over OTLP/HTTP (JSON) to the
//! operator's collector (`SPACES_OTLP_ENDPOINT` / `otlp_endpoint`). Off without an endpoint.
//!
//! One trace per run: the run's span (from its start to its end: stopped or done), a span per
//! turn under it (with the turn's usage as attributes, from the usage ledger), a span per tool
//! call under its turn. A caller's W3C `traceparent` on `agent_start` (an argument, the HTTP
//! header, MCP `_meta.traceparent`) puts the run's span under the caller's span, in the
//! caller's trace; a `traceparent` on `agent_message` becomes a link of the turn it starts.
//! Agent CLIs get `TRACEPARENT` (the turn's span) in their environment, for those that export
//! their own telemetry.
//!
//! Span ids are derived from the run (SHA-256 of the run id, the turn, the tool call id), so a
//! span made after a daemon restart still has the parent its children name. The SDK draws ids
//! from an id generator; `FixedIds` hands it the derived one for the span being built.

use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status as SpanStatus, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer, TracerProvider,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, IdGenerator, RandomIdGenerator, SdkTracer, SdkTracerProvider};
use sha2::{Digest, Sha256};
use spaces_sdk::{TurnUsage, UsageTotals};

/// How often a batch of finished spans is sent.
const SCHEDULE: Duration = Duration::from_millis(500);

thread_local! {
    /// The ids of the span being built on this thread ([`FixedIds`]).
    static NEXT_SPAN: Cell<Option<SpanId>> = const { Cell::new(None) };
    static NEXT_TRACE: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// The SDK's id generator, handing out the derived ids of the span being built.
#[derive(Debug, Default)]
struct FixedIds(RandomIdGenerator);

impl IdGenerator for FixedIds {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE.with(Cell::take).unwrap_or_else(|| self.0.new_trace_id())
    }
    fn new_span_id(&self) -> SpanId {
        NEXT_SPAN.with(Cell::take).unwrap_or_else(|| self.0.new_span_id())
    }
}

/// The trace of one run: its trace id, its span's id, and the caller's span above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTrace {
    pub trace_id: TraceId,
    pub run_span: SpanId,
    /// The caller's span (`traceparent`), the run span's parent.
    pub parent: Option<SpanId>,
    /// False when the caller's `traceparent` says not to record.
    pub sampled: bool,
}

/// The exporter of run spans.
pub struct Traces {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

/// `traceparent` as (trace id, span id, sampled), if it is well formed (W3C Trace Context:
/// `00-<32 hex>-<16 hex>-<2 hex>`, ids not all zero).
pub fn parse_traceparent(tp: &str) -> Option<(TraceId, SpanId, bool)> {
    let parts: Vec<&str> = tp.trim().split('-').collect();
    let [version, trace, span, flags] = parts.as_slice() else { return None };
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
    if !hex(version, 2) || *version == "ff" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok().filter(|t| *t != TraceId::INVALID)?;
    let span_id = SpanId::from_hex(span).ok().filter(|s| *s != SpanId::INVALID)?;
    let sampled = u8::from_str_radix(flags, 16).ok()? & 1 == 1;
    Some((trace_id, span_id, sampled))
}

fn derived(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

fn span_id(parts: &[&str]) -> SpanId {
    let d = derived(parts);
    SpanId::from_bytes(d[..8].try_into().unwrap_or([1; 8]))
}

/// The trace of run `run_id`, under the caller's `traceparent` when given.
pub fn run_trace(run_id: &str, traceparent: Option<&str>) -> RunTrace {
    let run_span = span_id(&["run", run_id]);
    match traceparent.and_then(parse_traceparent) {
        Some((trace_id, parent, sampled)) => RunTrace { trace_id, run_span, parent: Some(parent), sampled },
        None => {
            let d = derived(&["trace", run_id]);
            RunTrace { trace_id: TraceId::from_bytes(d[..16].try_into().unwrap_or([1; 16])), run_span, parent: None, sampled: true }
        }
    }
}

/// The span id of turn `turn` of `run_id`.
pub fn turn_span(run_id: &str, turn: u32) -> SpanId {
    span_id(&["turn", run_id, &turn.to_string()])
}

/// The `TRACEPARENT` an agent process of turn `turn` gets: the turn's span.
pub fn traceparent_of(rt: &RunTrace, run_id: &str, turn: u32) -> String {
    format!("00-{}-{}-{}", rt.trace_id, turn_span(run_id, turn), if rt.sampled { "01" } else { "00" })
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// A parent context of `span` in `rt`'s trace.
fn parent(rt: &RunTrace, span: SpanId) -> Context {
    let flags = if rt.sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
    Context::new().with_remote_span_context(SpanContext::new(rt.trace_id, span, flags, true, TraceState::default()))
}

fn usage_attributes(u: &UsageTotals) -> Vec<KeyValue> {
    vec![
        KeyValue::new("gen_ai.usage.input_tokens", u.input_tokens as i64),
        KeyValue::new("gen_ai.usage.output_tokens", u.output_tokens as i64),
        KeyValue::new("spaces.usage.cached_input_tokens", u.cached_input_tokens as i64),
        KeyValue::new("spaces.usage.cost_usd", u.cost_usd),
        KeyValue::new("spaces.usage.cost_estimated", u.cost_estimated),
        KeyValue::new("spaces.usage.tool_calls", u.tool_calls as i64),
    ]
}

impl Traces {
    /// The exporter to `endpoint` (a collector's base URL, `http://host:4318`, or its traces
    /// URL ending `/v1/traces`). Errors: the exporter cannot be built (a bad URL).
    pub fn new(endpoint: &str) -> Result<Traces, String> {
        let url = if endpoint.trim_end_matches('/').ends_with("/v1/traces") {
            endpoint.to_owned()
        } else {
            format!("{}/v1/traces", endpoint.trim_end_matches('/'))
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpJson)
            .with_endpoint(url)
            .build()
            .map_err(|e| format!("the OTLP exporter to {endpoint} cannot be built: {e}"))?;
        let batches = BatchSpanProcessor::builder(exporter)
            .with_batch_config(BatchConfigBuilder::default().with_scheduled_delay(SCHEDULE).build())
            .build();
        let resource = opentelemetry_sdk::Resource::builder().with_service_name("spacesd").build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(batches)
            .with_id_generator(FixedIds::default())
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("spacesd");
        Ok(Traces { provider, tracer })
    }

    /// Build and end one span `name` with the derived `id`, under `parent_cx` (or a new trace
    /// `trace` when the parent is not valid), from `start_ms` to `end_ms`.
    #[allow(clippy::too_many_arguments)]
    fn span(
        &self,
        name: String,
        id: SpanId,
        trace: TraceId,
        parent_cx: &Context,
        start_ms: u64,
        end_ms: u64,
        attrs: Vec<KeyValue>,
        links: Vec<Link>,
        error: Option<String>,
    ) {
        NEXT_SPAN.with(|n| n.set(Some(id)));
        NEXT_TRACE.with(|n| n.set(Some(trace)));
        let builder = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(at(start_ms))
            .with_attributes(attrs)
            .with_links(links);
        let mut span = self.tracer.build_with_context(builder, parent_cx);
        NEXT_SPAN.with(|n| n.set(None));
        NEXT_TRACE.with(|n| n.set(None));
        if let Some(why) = error {
            use opentelemetry::trace::Span as _;
            span.set_status(SpanStatus::error(why));
        }
        use opentelemetry::trace::Span as _;
        span.end_with_timestamp(at(end_ms));
    }

    /// The run's span, at its end.
    #[allow(clippy::too_many_arguments)] // the run's names and times, each an attribute
    pub fn run(&self, rt: &RunTrace, run_id: &str, agent: &str, space: &str, start_ms: u64, end_ms: u64, spent: &UsageTotals) {
        let cx = match rt.parent {
            Some(p) => parent(rt, p),
            None => Context::new(),
        };
        let mut attrs = vec![
            KeyValue::new("spaces.run_id", run_id.to_owned()),
            KeyValue::new("spaces.agent", agent.to_owned()),
            KeyValue::new("spaces.space", space.to_owned()),
            KeyValue::new("spaces.turns", i64::from(spent.turns)),
        ];
        attrs.extend(usage_attributes(spent));
        self.span(format!("run {agent}"), rt.run_span, rt.trace_id, &cx, start_ms, end_ms, attrs, Vec::new(), None);
    }

    /// A turn's span, at its end, with its ledger row's usage; `link`, a caller's
    /// `traceparent` given with the message that started it.
    pub fn turn(&self, rt: &RunTrace, run_id: &str, start_ms: u64, row: &TurnUsage, link: Option<&str>) {
        let mut spent = UsageTotals::default();
        spent.add(row);
        let mut attrs = vec![
            KeyValue::new("spaces.run_id", run_id.to_owned()),
            KeyValue::new("spaces.turn", i64::from(row.turn)),
            KeyValue::new("spaces.stop_reason", row.stop_reason.clone()),
        ];
        attrs.extend(usage_attributes(&spent));
        let links = link
            .and_then(parse_traceparent)
            .map(|(t, s, sampled)| {
                let flags = if sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
                vec![Link::with_context(SpanContext::new(t, s, flags, true, TraceState::default()))]
            })
            .unwrap_or_default();
        let failed = matches!(row.stop_reason.as_str(), "error" | "crashed").then(|| row.stop_reason.clone());
        let id = turn_span(run_id, row.turn);
        self.span(format!("turn {}", row.turn), id, rt.trace_id, &parent(rt, rt.run_span), start_ms, row.ended_ms, attrs, links, failed);
    }

    /// A tool call's span under its turn.
    #[allow(clippy::too_many_arguments)]
    pub fn tool(
        &self,
        rt: &RunTrace,
        run_id: &str,
        turn: u32,
        tool_id: &str,
        title: &str,
        kind: &str,
        start_ms: u64,
        end_ms: u64,
        ok: bool,
    ) {
        let attrs = vec![
            KeyValue::new("spaces.run_id", run_id.to_owned()),
            KeyValue::new("spaces.turn", i64::from(turn)),
            KeyValue::new("gen_ai.tool.call.id", tool_id.to_owned()),
            KeyValue::new("gen_ai.tool.name", title.to_owned()),
            KeyValue::new("spaces.tool_kind", kind.to_owned()),
        ];
        let id = span_id(&["tool", run_id, tool_id]);
        let cx = parent(rt, turn_span(run_id, turn));
        self.span(
            format!("tool {kind}"),
            id,
            rt.trace_id,
            &cx,
            start_ms,
            end_ms,
            attrs,
            Vec::new(),
            (!ok).then(|| "the tool call failed".to_owned()),
        );
    }

    /// Send what is finished (at shutdown). Blocking: call off the runtime.
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn traceparents_are_read_as_w3c_says() {
        let (t, s, sampled) = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(
            (t.to_string().as_str(), s.to_string().as_str(), sampled),
            ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true)
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_run_keeps_its_ids_and_joins_the_callers_trace() {
        let a = run_trace("run-1", None);
        assert_eq!(a, run_trace("run-1", None), "derived: the same after a restart");
        assert_ne!(a.trace_id, run_trace("run-2", None).trace_id);
        let b = run_trace("run-1", Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        assert_eq!(b.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(b.parent.unwrap().to_string(), "00f067aa0ba902b7");
        assert!(traceparent_of(&b, "run-1", 2).starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
    }
}
