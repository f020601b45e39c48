//! Each listener's credential check: the request's [`Principal`] (see [`crate::access`]) goes
//! into its extensions, or the request is refused `UNAUTHORIZED` here.
//!
//! - TCP ([`check_tcp`]): `Host`/`Origin` must name a loopback host (DNS rebinding, cross-site
//!   requests), and `Authorization: Bearer` must carry the operator's token or a caller's.
//! - TCP without a bearer token: the web page's session cookie on `/ui/...` and `/v1/...`, as
//!   the operator, from the page's own origin and with its CSRF token on writes (the request
//!   then carries a [`BrowserSession`]); `/ui/login` (which redeems a one-time ticket) and
//!   `/favicon.ico` (the page's icon, which browsers fetch on their own) need no credential.
//! - Unix socket ([`check_unix`]): a bearer token, when given, decides as on TCP (a process may
//!   present a caller's token to act with less); without one the peer's uid must be the
//!   daemon's or root's, except at the Landlock level, where the operator's token is needed
//!   (`spacesd`'s clients, refused on their uid, send again with the token of `<state
//!   dir>/token` when they can read it).
//! - A run's own socket ([`as_run`]): every request is that run, a caller of its Space.
//!
//! Nothing here guesses who a process is: a process of a run or command is in a sandbox where
//! neither the operator's socket nor the token file exists (`spaces_os::sandbox`), and reaches
//! the daemon only through its run's socket. At the Landlock level the socket's path is there
//! (no mount namespace) but the token file is not readable, so the uid is no credential there.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use spaces_sdk::{ApiError, ErrorCode};

use super::HttpError;
use crate::access::sessions::same_secret;
use crate::access::{Access, Principal};

/// A connection's peer, set by the listener ([`super::listen`]) on every request of the
/// connection.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Unix socket: the peer's uid (`SO_PEERCRED`).
    pub uid: Option<u32>,
}

fn loopback_host(value: &str) -> bool {
    let host = value.trim();
    let host = host.strip_prefix("http://").or_else(|| host.strip_prefix("https://")).unwrap_or(host);
    let host =
        if let Some(rest) = host.strip_prefix('[') { rest.split(']').next().unwrap_or("") } else { host.split(':').next().unwrap_or("") };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

fn refuse(message: &str) -> Response {
    HttpError(ApiError::new(ErrorCode::Unauthorized, message)).into_response()
}

/// The bearer token of `headers`: `None` without an `Authorization` header, `Some(None)` for one
/// that is not `Bearer <token>`.
fn bearer(headers: &HeaderMap) -> Option<Option<&str>> {
    let value = headers.get(header::AUTHORIZATION)?;
    Some(value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).map(str::trim))
}

/// The web page's login route, the one `/ui` route that takes no credential (it redeems a
/// one-time ticket); the page's router ([`super::ui`]) serves it.
pub const LOGIN_PATH: &str = "/ui/login";

/// The page's icon, which browsers fetch by themselves at the root: public, like the login route
/// (a static image; the loopback `Host`/`Origin` check still applies).
pub const FAVICON_PATH: &str = "/favicon.ico";

const BAD_TOKEN: &str =
    "missing or wrong bearer token: use the operator's token (the daemon's token file) or a caller's token from `spacesd token create`";

/// TCP: refuse a non-loopback `Host`/`Origin` or a missing or unknown bearer token (403
/// `UNAUTHORIZED`); otherwise run the request as the token's principal.
pub async fn check_tcp(State(access): State<Arc<Access>>, mut req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host_ok = headers.get(header::HOST).and_then(|v| v.to_str().ok()).map(loopback_host).unwrap_or(false);
    let origin_ok = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(loopback_host).unwrap_or(true);
    if !host_ok || !origin_ok {
        return refuse("Host/Origin must be a loopback address");
    }
    let Some(token) = bearer(headers) else {
        if req.uri().path() == LOGIN_PATH || req.uri().path() == FAVICON_PATH {
            return next.run(req).await;
        }
        return match browser(&access, &req) {
            Ok(session) => {
                req.extensions_mut().insert(Principal::Operator);
                req.extensions_mut().insert(session);
                next.run(req).await
            }
            Err(refusal) => *refusal,
        };
    };
    let Some(token) = token else { return refuse(BAD_TOKEN) };
    let Some(principal) = access.by_token(token) else { return refuse(BAD_TOKEN) };
    req.extensions_mut().insert(principal);
    next.run(req).await
}

/// A request authenticated by the web page's session cookie: the session it belongs to.
#[derive(Debug, Clone)]
pub struct BrowserSession {
    /// The session cookie's value (to end it at logout).
    pub cookie: String,
    /// The session's CSRF token (the page gets it in a `<meta>` tag).
    pub csrf: String,
}

/// The header a cookie-authenticated state-changing request carries its session's CSRF token
/// in.
pub const CSRF_HEADER: &str = "x-csrf-token";

const NO_SESSION: &str =
    "no bearer token and no live session cookie: open the one-time link `spacesd ui` prints (or send the operator's bearer token)";

/// The value of cookie `name` in `headers`, if sent.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// The checks of a cookie-authenticated request (the web page, [`super::ui`]), on top of the
/// loopback `Host`/`Origin` of every TCP request:
/// - only `/ui/...` and `/v1/...` take the cookie (not `/mcp` or `/inbox`);
/// - the cookie must name a live session ([`crate::access::sessions`]);
/// - `Origin`, when sent, must be this very origin (`http://` + `Host`): another port of the
///   same loopback host is another site's page; `Sec-Fetch-Site`, when sent, must be
///   `same-origin` or `none` (typed or opened from outside the browser);
/// - a method other than `GET`/`HEAD` must carry the session's CSRF token in `X-CSRF-Token`.
///
/// Every other failure is 403 `UNAUTHORIZED`.
fn browser(access: &Access, req: &Request) -> Result<BrowserSession, Box<Response>> {
    let headers = req.headers();
    let path = req.uri().path();
    if !(path.starts_with("/ui/") || path == "/ui" || path.starts_with("/v1/")) {
        return Err(Box::new(refuse(BAD_TOKEN)));
    }
    let sessions = access.sessions();
    let Some(value) = cookie(headers, &sessions.cookie_name()) else { return Err(Box::new(refuse(NO_SESSION))) };
    let Some(session) = sessions.find(value, std::time::Instant::now()) else {
        return Err(Box::new(refuse("this session has ended or is unknown: open a new link from `spacesd ui`")));
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    if let Some(origin) = headers.get(header::ORIGIN) {
        let same = origin.to_str().ok().is_some_and(|o| o.eq_ignore_ascii_case(&format!("http://{host}")));
        if !same {
            return Err(Box::new(refuse("a session cookie is taken only from the page's own origin")));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site") {
        if !matches!(site.to_str().unwrap_or(""), "same-origin" | "none") {
            return Err(Box::new(refuse("a session cookie is taken only from the page's own origin")));
        }
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        let presented = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !same_secret(presented, &session.csrf) {
            return Err(Box::new(refuse(
                "missing or wrong X-CSRF-Token: a state-changing request of the page carries its session's token",
            )));
        }
    }
    Ok(BrowserSession { cookie: value.to_owned(), csrf: session.csrf })
}

/// Unix socket: a bearer token decides when given (refused if unknown); without one, the peer
/// uid must be the daemon's or root's (403 `UNAUTHORIZED` otherwise).
pub async fn check_unix(State(access): State<Arc<Access>>, mut req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<Peer>().cloned();
    let principal: Principal = match bearer(req.headers()) {
        Some(token) => match token.and_then(|t| access.by_token(t)) {
            Some(p) => p,
            None => return refuse(BAD_TOKEN),
        },
        None => match peer.and_then(|p| p.uid) {
            Some(uid) => match access.by_peer_uid(uid) {
                Some(p) => p,
                None if !access.uid_trusted() => {
                    return refuse(
                        "this daemon's sandbox is Landlock, so its socket takes the operator's bearer token (the daemon's token \
                         file, <state dir>/token, which spacesd's clients send when they can read it), not the peer's uid",
                    )
                }
                None => {
                    return refuse(&format!(
                        "uid {uid} is not this daemon's (uid {}): present a caller's token (`spacesd token create`) as a bearer token",
                        access.daemon_uid()
                    ))
                }
            },
            None => return refuse("the peer of this connection is unknown"),
        },
    };
    req.extensions_mut().insert(principal);
    next.run(req).await
}

/// A run's own socket (`spaces_host::supervisor::api`): the request is `principal`, that run, a
/// caller of its Space, whatever credential it presents (the connection itself says who it
/// is).
pub async fn as_run(State(principal): State<Principal>, mut req: Request, next: Next) -> Response {
    req.extensions_mut().insert(principal);
    next.run(req).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    const TOKEN: &str = "operator-token-for-tests";
    const HOST: &str = "127.0.0.1:7700";

    struct Fixture {
        _dir: tempfile::TempDir,
        access: Arc<Access>,
    }

    fn fixture(tcp: bool) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let access = Arc::new(Access::new(dir.path(), Some(TOKEN)));
        if tcp {
            access.sessions().listen_on(HOST.parse().unwrap());
        }
        Fixture { _dir: dir, access }
    }

    /// What a request got: status, headers, body.
    struct Answer {
        status: StatusCode,
        headers: HeaderMap,
        body: String,
    }

    impl Fixture {
        /// One request through the TCP check to a `/v1/x` route (GET and POST answer `ok`),
        /// `/mcp` (likewise), the page and the ticket route.
        async fn send(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
            let ok = || async { "ok" };
            let app = Router::new()
                .route("/v1/x", get(ok).post(ok))
                .route("/mcp", get(ok).post(ok))
                .merge(crate::http::ui::pages(self.access.clone()))
                .merge(crate::http::ui::tickets(self.access.clone()))
                .layer(axum::middleware::from_fn_with_state(self.access.clone(), check_tcp));
            let mut req = axum::http::Request::builder().method(method).uri(path).header(header::HOST, HOST);
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            let mut req = req.body(Body::empty()).unwrap();
            req.extensions_mut().insert(Peer { uid: None });
            let res = app.oneshot(req).await.unwrap();
            let (status, headers) = (res.status(), res.headers().clone());
            let bytes = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
            Answer { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
        }

        /// A login link minted with the operator's token.
        async fn link(&self) -> String {
            let a = self.send("POST", "/v1/ui/tickets", &[("authorization", &format!("Bearer {TOKEN}"))]).await;
            assert_eq!(a.status, StatusCode::OK, "{}", a.body);
            let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
            let url = v["url"].as_str().unwrap().to_owned();
            assert!(url.starts_with(&format!("http://{HOST}/ui/login?ticket=")), "{url}");
            url.trim_start_matches(&format!("http://{HOST}")).to_owned()
        }

        /// Logs in: the `Cookie` header value and the page's CSRF token.
        async fn login(&self) -> (String, String) {
            let a = self.send("GET", &self.link().await, &[]).await;
            assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
            let set = a.headers.get(header::SET_COOKIE).unwrap().to_str().unwrap().to_owned();
            let cookie = set.split(';').next().unwrap().to_owned();
            let page = self.send("GET", "/ui/", &[("cookie", &cookie)]).await;
            assert_eq!(page.status, StatusCode::OK, "{}", page.body);
            let csrf = page.body.split("name=\"csrf-token\" content=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
            (cookie, csrf)
        }
    }

    fn refused(a: &Answer, code: &str) {
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
        assert!(a.body.contains(code), "{}", a.body);
    }

    #[tokio::test]
    async fn a_login_link_works_once_and_sets_an_httponly_strict_cookie() {
        let f = fixture(true);
        let link = f.link().await;
        let a = f.send("GET", &link, &[]).await;
        assert_eq!(a.status, StatusCode::SEE_OTHER);
        assert_eq!(a.headers.get(header::LOCATION).unwrap(), "/ui/");
        let set = a.headers.get(header::SET_COOKIE).unwrap().to_str().unwrap();
        assert!(set.starts_with("spaces_session_7700="), "{set}");
        assert!(set.contains("; HttpOnly") && set.contains("; SameSite=Strict") && set.contains("; Path=/"), "{set}");
        assert!(!set.contains(TOKEN), "the cookie is never the bearer token");
        refused(&f.send("GET", &link, &[]).await, "UNAUTHORIZED");
        refused(&f.send("GET", "/ui/login?ticket=made-up", &[]).await, "UNAUTHORIZED");
        refused(&f.send("GET", "/ui/login", &[("origin", "http://attacker.example")]).await, "UNAUTHORIZED");
    }

    #[tokio::test]
    async fn the_cookie_reads_and_with_the_csrf_token_writes_from_its_own_origin_only() {
        let f = fixture(true);
        let (cookie, csrf) = f.login().await;
        let c = ("cookie", cookie.as_str());
        assert_eq!(f.send("GET", "/v1/x", &[c]).await.status, StatusCode::OK);
        refused(&f.send("GET", "/v1/x", &[]).await, "UNAUTHORIZED");
        refused(&f.send("GET", "/v1/x", &[("cookie", "spaces_session_7700=forged")]).await, "UNAUTHORIZED");
        refused(&f.send("GET", "/ui/", &[]).await, "UNAUTHORIZED");
        // Writes need the CSRF token.
        refused(&f.send("POST", "/v1/x", &[c]).await, "UNAUTHORIZED");
        refused(&f.send("POST", "/v1/x", &[c, ("x-csrf-token", "wrong")]).await, "UNAUTHORIZED");
        let own = format!("http://{HOST}");
        let a = f.send("POST", "/v1/x", &[c, ("x-csrf-token", &csrf), ("origin", &own), ("sec-fetch-site", "same-origin")]).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        // Another origin, even another port of the same loopback host, is refused.
        for origin in ["http://attacker.example", "http://127.0.0.1:9999", "http://localhost:7700", "null"] {
            refused(&f.send("POST", "/v1/x", &[c, ("x-csrf-token", &csrf), ("origin", origin)]).await, "UNAUTHORIZED");
            refused(&f.send("GET", "/v1/x", &[c, ("origin", origin)]).await, "UNAUTHORIZED");
        }
        refused(&f.send("GET", "/v1/x", &[c, ("sec-fetch-site", "same-site")]).await, "UNAUTHORIZED");
        // Not on other routes.
        refused(&f.send("GET", "/mcp", &[c]).await, "UNAUTHORIZED");
        // A session mints no tickets; logging out ends it.
        refused(&f.send("POST", "/v1/ui/tickets", &[c, ("x-csrf-token", &csrf)]).await, "FORBIDDEN");
        refused(&f.send("POST", "/ui/logout", &[c]).await, "UNAUTHORIZED");
        let out = f.send("POST", "/ui/logout", &[c, ("x-csrf-token", &csrf)]).await;
        assert_eq!(out.status, StatusCode::OK, "{}", out.body);
        assert!(out.headers.get(header::SET_COOKIE).unwrap().to_str().unwrap().contains("Max-Age=0"));
        refused(&f.send("GET", "/v1/x", &[c]).await, "UNAUTHORIZED");
    }

    #[tokio::test]
    async fn the_page_and_its_files_carry_a_strict_content_security_policy() {
        let f = fixture(true);
        let (cookie, csrf) = f.login().await;
        let page = f.send("GET", "/ui/", &[("cookie", &cookie)]).await;
        assert!(page.body.contains(&csrf) && !page.body.contains("{{CSRF_TOKEN}}"));
        let csp = page.headers.get(header::CONTENT_SECURITY_POLICY).unwrap().to_str().unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
        let run = f.send("GET", "/ui/spaces/s/runs/run-1", &[("cookie", &cookie)]).await;
        assert_eq!(run.status, StatusCode::OK);
        let js = f.send("GET", "/ui/assets/app.js", &[("cookie", &cookie)]).await;
        assert_eq!(js.status, StatusCode::OK);
        assert!(js.headers.get(header::CONTENT_TYPE).unwrap().to_str().unwrap().starts_with("text/javascript"));
        assert_eq!(f.send("GET", "/ui/assets/nope.js", &[("cookie", &cookie)]).await.status, StatusCode::NOT_FOUND);
        // The icon needs no credential; nothing else at the root is public.
        let icon = f.send("GET", "/favicon.ico", &[]).await;
        assert_eq!(icon.status, StatusCode::OK, "{}", icon.body);
        assert_eq!(icon.headers.get(header::CONTENT_TYPE).unwrap(), "image/x-icon");
        refused(&f.send("GET", "/favicon.png", &[]).await, "UNAUTHORIZED");
        // The bearer token reads the files but has no session to give the page.
        refused(&f.send("GET", "/ui/", &[("authorization", &format!("Bearer {TOKEN}"))]).await, "UNAUTHORIZED");
    }

    #[tokio::test]
    async fn tickets_need_the_operator_and_a_tcp_listener() {
        let f = fixture(false);
        let a = f.send("POST", "/v1/ui/tickets", &[("authorization", &format!("Bearer {TOKEN}"))]).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
        assert!(a.body.contains("INVALID_ARGUMENT") && a.body.contains("--tcp"), "{}", a.body);
        refused(&f.send("POST", "/v1/ui/tickets", &[("authorization", "Bearer wrong")]).await, "UNAUTHORIZED");
        refused(&f.send("POST", "/v1/ui/tickets", &[]).await, "UNAUTHORIZED");
    }
}
