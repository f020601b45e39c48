//! A real S3-compatible server on loopback for the volume tests: moto's server mode
//! (`moto_server` from PyPI, pinned in `volumes/tests/requirements-s3.txt`, installed into the
//! test venv by `scripts/test`). It honours conditional writes (`If-None-Match: *`, `If-Match`),
//! which leases rely on. A missing server fails the test loudly; it is never skipped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bucket every test server gets.
pub const BUCKET: &str = "spaces-test";

/// One `moto_server` process on a free loopback port, with [`BUCKET`] created; killed on drop.
pub struct S3Server {
    child: Child,
    port: u16,
}

/// `$SPACES_TEST_VENV/bin/moto_server` (default `<repo>/.venv-test`).
fn binary() -> PathBuf {
    let venv = std::env::var_os("SPACES_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv-test"));
    venv.join("bin/moto_server")
}

impl S3Server {
    /// Start it and create the bucket. Panics (with the install command) when it is missing.
    pub async fn start() -> S3Server {
        let bin = binary();
        assert!(
            bin.is_file(),
            "no S3-compatible test server at {}: run scripts/test once (it installs volumes/tests/requirements-s3.txt into the test venv)",
            bin.display()
        );
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let server = S3Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(status) = server.request("PUT", &format!("/{BUCKET}")) {
                assert!(status < 300, "creating the test bucket answered {status}");
                return server;
            }
            assert!(Instant::now() < deadline, "moto_server did not come up on port {port} within 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `s3://spaces-test/<prefix>`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}")
    }

    /// The daemon environment that reaches it (dummy credentials; moto checks none).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ENDPOINT_URL".into(), self.endpoint()),
            ("AWS_ACCESS_KEY_ID".into(), "spaces-test".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "spaces-test-secret".into()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
        ]
    }

    /// One unsigned HTTP/1.1 request; its status.
    fn request(&self, method: &str, path: &str) -> std::io::Result<u16> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(s, "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.port)?;
        let mut head = [0u8; 32];
        let n = s.read(&mut head)?;
        let line = String::from_utf8_lossy(&head[..n]);
        line.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| std::io::Error::other(format!("bad answer {line:?}")))
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
