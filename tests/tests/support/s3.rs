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

    /// Stops the server (SIGSTOP): requests reach its socket and wait, unanswered, as in an
    /// outage of the store; [`S3Server::resume`] answers them.
    pub fn pause(&self) {
        self.signal(nix::sys::signal::Signal::SIGSTOP);
    }

    /// Lets a [`S3Server::pause`]d server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig).unwrap();
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

    /// The object at `key` in [`BUCKET`] (e.g. `homes/homes/a/snapshots/...json` for a volume
    /// `s3://spaces-test/homes`), read behind the daemon's back.
    pub fn get_object(&self, key: &str) -> Vec<u8> {
        let (status, body) = self.object_request("GET", key, b"");
        assert_eq!(status, 200, "GET {key}: {}", String::from_utf8_lossy(&body));
        body
    }

    /// Replaces the object at `key` with `bytes` behind the daemon's back (as a damaged store
    /// would hold it).
    pub fn put_object(&self, key: &str, bytes: &[u8]) {
        let (status, body) = self.object_request("PUT", key, bytes);
        assert_eq!(status, 200, "PUT {key}: {}", String::from_utf8_lossy(&body));
    }

    /// One request for an object, as the test credentials' (moto checks no signature but
    /// answers an anonymous caller 403): status and body.
    fn object_request(&self, method: &str, key: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "{method} /{BUCKET}/{key} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=spaces-test/20250101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0\r\n\r\n",
            self.port,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
        let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let mut body = raw[split + 4..].to_vec();
        if head.contains("transfer-encoding: chunked") {
            let (mut rest, mut out) = (&body[..], Vec::new());
            while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
                let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16).unwrap_or(0);
                if size == 0 {
                    break;
                }
                out.extend_from_slice(&rest[eol + 2..(eol + 2 + size).min(rest.len())]);
                rest = &rest[(eol + 4 + size).min(rest.len())..];
            }
            body = out;
        }
        (status, body)
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
