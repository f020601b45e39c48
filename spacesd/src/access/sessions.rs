//! Browser sessions of the web page of runs ([`crate::http::ui`]): one-time login tickets and
//! the sessions they open, held in the daemon's memory only (a restart logs every browser out).
//!
//! - A **ticket** is minted for an operator (`spacesd ui`, `POST /v1/ui/tickets` over the Unix
//!   socket or with the operator's token): 244 random bits, valid [`TICKET_TTL`], redeemable
//!   once. Only its SHA-256 is kept.
//! - Redeeming it opens a **session**: a fresh cookie value (244 random bits, never the bearer
//!   token; only its SHA-256 is kept) and a CSRF token (another 244 bits) that the page sends
//!   back in `X-CSRF-Token` on every state-changing request. A session lasts [`SESSION_TTL`]
//!   from its login, or until the page logs out.
//! - At most [`MAX_TICKETS`] tickets and [`MAX_SESSIONS`] sessions are kept; past that the one
//!   closest to expiring goes first.
//!
//! Times are [`Instant`]s given by the caller (`Instant::now()` in the daemon), so expiry is on
//! the monotonic clock and testable.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::tokens::digest;

/// How long a login ticket may wait to be used.
pub const TICKET_TTL: Duration = Duration::from_secs(60);
/// How long a session lasts from its login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Tickets kept at once.
pub const MAX_TICKETS: usize = 64;
/// Sessions kept at once.
pub const MAX_SESSIONS: usize = 64;

/// A session as the request checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The token the page must send in `X-CSRF-Token` on state-changing requests (not secret
    /// from the page itself: it is in the page's `<meta name="csrf-token">`).
    pub csrf: String,
}

/// What a redeemed ticket gives the browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The cookie's value (sent back by the browser; kept here only as its SHA-256).
    pub cookie: String,
    /// The session's CSRF token.
    pub csrf: String,
}

#[derive(Debug)]
struct Live {
    csrf: String,
    expires: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    /// SHA-256 of a ticket -> its expiry.
    tickets: HashMap<String, Instant>,
    /// SHA-256 of a cookie value -> the session.
    sessions: HashMap<String, Live>,
}

/// The daemon's tickets and sessions (one per daemon, in [`super::Access`]).
#[derive(Debug, Default)]
pub struct Sessions {
    inner: Mutex<Inner>,
    /// The TCP listener's address, once it is bound: the page is served there, the cookie is
    /// named after its port and login links point at it.
    tcp: OnceLock<SocketAddr>,
}

/// Two v4 UUIDs (244 random bits from the OS's generator) as 64 lower-case hex digits.
fn secret() -> String {
    let mut out = String::with_capacity(64);
    for _ in 0..2 {
        for b in uuid::Uuid::new_v4().as_bytes() {
            out.push_str(&format!("{b:02x}"));
        }
    }
    out
}

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Sessions {
    /// Remembers the TCP listener's address (the first call wins: there is one TCP listener).
    pub fn listen_on(&self, addr: SocketAddr) {
        let _ = self.tcp.set(addr);
    }

    /// The TCP listener's address, if the daemon has one.
    pub fn tcp(&self) -> Option<SocketAddr> {
        self.tcp.get().copied()
    }

    /// The session cookie's name: `spaces_session_<port>` (cookies are not scoped by port, so
    /// two daemons on one host keep apart by name).
    pub fn cookie_name(&self) -> String {
        format!("spaces_session_{}", self.tcp().map(|a| a.port()).unwrap_or(0))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new ticket, valid until `now + TICKET_TTL`.
    pub fn mint_ticket(&self, now: Instant) -> String {
        let ticket = secret();
        let mut inner = self.lock();
        inner.tickets.retain(|_, expires| *expires > now);
        if inner.tickets.len() >= MAX_TICKETS {
            if let Some(first) = inner.tickets.iter().min_by_key(|(_, e)| **e).map(|(k, _)| k.clone()) {
                inner.tickets.remove(&first);
            }
        }
        inner.tickets.insert(digest(&ticket), now + TICKET_TTL);
        ticket
    }

    /// Uses up `ticket` and opens a session; `None` for a ticket that is unknown, already used
    /// or expired.
    pub fn redeem(&self, ticket: &str, now: Instant) -> Option<Opened> {
        let mut inner = self.lock();
        let expires = inner.tickets.remove(&digest(ticket))?;
        if expires <= now {
            return None;
        }
        inner.sessions.retain(|_, s| s.expires > now);
        if inner.sessions.len() >= MAX_SESSIONS {
            if let Some(first) = inner.sessions.iter().min_by_key(|(_, s)| s.expires).map(|(k, _)| k.clone()) {
                inner.sessions.remove(&first);
            }
        }
        let opened = Opened { cookie: secret(), csrf: secret() };
        inner.sessions.insert(digest(&opened.cookie), Live { csrf: opened.csrf.clone(), expires: now + SESSION_TTL });
        Some(opened)
    }

    /// The live session of a cookie value, if any.
    pub fn find(&self, cookie: &str, now: Instant) -> Option<Session> {
        let mut inner = self.lock();
        let key = digest(cookie);
        match inner.sessions.get(&key) {
            Some(s) if s.expires > now => Some(Session { csrf: s.csrf.clone() }),
            Some(_) => {
                inner.sessions.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends the session of a cookie value (logout); false if there was none.
    pub fn end(&self, cookie: &str) -> bool {
        self.lock().sessions.remove(&digest(cookie)).is_some()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_opens_one_session_once() {
        let s = Sessions::default();
        let now = Instant::now();
        let ticket = s.mint_ticket(now);
        assert_eq!(ticket.len(), 64);
        let opened = s.redeem(&ticket, now).unwrap();
        assert!(s.redeem(&ticket, now).is_none(), "a ticket is single-use");
        assert_ne!(opened.cookie, ticket);
        assert_ne!(opened.cookie, opened.csrf);
        assert_eq!(s.find(&opened.cookie, now), Some(Session { csrf: opened.csrf.clone() }));
        assert!(s.find(&opened.csrf, now).is_none(), "the CSRF token is no cookie");
        assert!(s.find(&ticket, now).is_none(), "nor is the ticket");
    }

    #[test]
    fn tickets_and_sessions_expire() {
        let s = Sessions::default();
        let now = Instant::now();
        let late = s.mint_ticket(now);
        assert!(s.redeem(&late, now + TICKET_TTL).is_none(), "a ticket is short-lived");
        let opened = s.redeem(&s.mint_ticket(now), now).unwrap();
        assert!(s.find(&opened.cookie, now + SESSION_TTL - Duration::from_secs(1)).is_some());
        assert!(s.find(&opened.cookie, now + SESSION_TTL).is_none(), "a session ends after its time");
        assert!(s.find(&opened.cookie, now).is_none(), "and is gone for good");
    }

    #[test]
    fn logout_ends_a_session_and_unknown_values_open_nothing() {
        let s = Sessions::default();
        let now = Instant::now();
        let opened = s.redeem(&s.mint_ticket(now), now).unwrap();
        assert!(s.redeem("not-a-ticket", now).is_none());
        assert!(s.end(&opened.cookie));
        assert!(s.find(&opened.cookie, now).is_none());
        assert!(!s.end(&opened.cookie));
    }

    #[test]
    fn the_oldest_go_first_past_the_caps() {
        let s = Sessions::default();
        let now = Instant::now();
        let first = s.mint_ticket(now);
        for i in 0..MAX_TICKETS {
            s.mint_ticket(now + Duration::from_millis(i as u64 + 1));
        }
        assert!(s.redeem(&first, now).is_none(), "the oldest ticket went");
        let sessions: Vec<Opened> =
            (0..=MAX_SESSIONS).map(|i| s.redeem(&s.mint_ticket(now), now + Duration::from_millis(i as u64)).unwrap()).collect();
        assert!(s.find(&sessions[0].cookie, now).is_none(), "the oldest session went");
        assert!(s.find(&sessions[MAX_SESSIONS].cookie, now).is_some());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd") && !same_secret("abc", "ab") && !same_secret("", "a"));
    }

    #[test]
    fn the_cookie_is_named_after_the_port() {
        let s = Sessions::default();
        s.listen_on("127.0.0.1:7700".parse().unwrap());
        s.listen_on("127.0.0.1:9".parse().unwrap());
        assert_eq!(s.cookie_name(), "spaces_session_7700");
    }
}
