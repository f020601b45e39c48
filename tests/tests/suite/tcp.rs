//! The loopback TCP listener: bearer token from a 0600 file, loopback Host/Origin only.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

use spaces_sdk::client::{Client, ClientError, Endpoint};
use spaces_sdk::ErrorCode;

use crate::support::TestDaemon;

fn raw_get(addr: &str, host: &str, token: Option<&str>, origin: Option<&str>) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut req = format!("GET /v1/spaces HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(o) = origin {
        req.push_str(&format!("Origin: {o}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test]
async fn tcp_needs_the_token_and_a_loopback_host() {
    let d = TestDaemon::start_with(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    let state = d.state_dir();
    let token_file = state.join("token");
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "token file is private");
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_owned();
    let addr = std::fs::read_to_string(state.join("tcp.addr")).unwrap().trim().to_owned();
    let sock_mode = std::fs::metadata(state.join("spacesd.sock")).unwrap().permissions().mode() & 0o777;
    assert_eq!(sock_mode, 0o600, "unix socket is private");

    let good = Client::new(Endpoint::Tcp { addr: addr.clone(), token: token.clone() });
    let root = d.space("s").await;
    let listed: Vec<(String, String)> =
        good.space_list(&spaces_sdk::Empty {}).await.unwrap().into_iter().map(|s| (s.name, s.root)).collect();
    assert_eq!(listed, vec![("s".to_owned(), root.display().to_string())], "the token opens the API over TCP");
    let bad = Client::new(Endpoint::Tcp { addr: addr.clone(), token: "wrong".into() });
    match bad.space_list(&spaces_sdk::Empty {}).await {
        Err(ClientError::Api(e)) => assert_eq!(e.code, ErrorCode::Unauthorized),
        other => panic!("expected UNAUTHORIZED, got {other:?}"),
    }
    let port = addr.rsplit(':').next().unwrap();
    let ok = raw_get(&addr, &format!("localhost:{port}"), Some(&token), None);
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let evil = raw_get(&addr, "attacker.example", Some(&token), Some("http://attacker.example"));
    assert!(evil.starts_with("HTTP/1.1 403"), "{evil}");
    let evil_origin = raw_get(&addr, &format!("localhost:{port}"), Some(&token), Some("http://attacker.example"));
    assert!(evil_origin.starts_with("HTTP/1.1 403"), "{evil_origin}");
}
