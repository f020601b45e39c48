//! Test support: volumes on a temp directory or on a moto S3 server started once per test
//! binary on 127.0.0.1, tree snapshots for whole-value comparison, hostile archive builders.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use spaces_volumes::{Lease, NoProgress, SaveOptions, SaveReport, Volume};

/// Which store a test runs on.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Local,
    S3,
}

/// A volume with its temp dirs (kept alive with it).
pub struct TestVolume {
    pub volume: Volume,
    pub url: String,
    pub env: HashMap<String, String>,
    pub tmp: tempfile::TempDir,
    /// For a local volume: its directory.
    pub store_dir: Option<PathBuf>,
}

impl TestVolume {
    pub fn new(backend: Backend) -> TestVolume {
        let tmp = tempfile::tempdir().unwrap();
        let (url, env, store_dir) = match backend {
            Backend::Local => {
                let d = tmp.path().join("volume");
                (d.to_str().unwrap().to_string(), HashMap::new(), Some(d))
            }
            Backend::S3 => {
                let s = moto();
                let bucket = format!("vol-{}", uuid::Uuid::new_v4().simple());
                create_bucket(s.port, &bucket);
                (format!("s3://{bucket}/some/prefix"), s.env(), None)
            }
        };
        let volume = Volume::open(&url, &env, &tmp.path().join("cache-a"), "host-a").unwrap();
        TestVolume { volume, url, env, tmp, store_dir }
    }

    /// The same volume as seen by another host (own cache dir, own host id).
    pub fn other_host(&self, host: &str) -> Volume {
        Volume::open(&self.url, &self.env, &self.tmp.path().join(format!("cache-{host}")), host).unwrap()
    }

    /// A fresh directory under the test's temp dir.
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    pub async fn lease(&self, home: &str) -> Lease {
        self.volume.acquire(home, "host-a/run-1", Duration::from_secs(60)).await.unwrap()
    }

    pub async fn save(&self, lease: &Lease, dir: &Path) -> SaveReport {
        self.volume.save(lease, dir, &SaveOptions::default(), &NoProgress).await.unwrap()
    }

    /// The object `key` (relative to the volume, e.g. `homes/a/snapshots/...json`) as stored,
    /// read behind the volume's back: the file of a local volume, a plain GET on moto.
    pub fn get_raw(&self, key: &str) -> Vec<u8> {
        match &self.store_dir {
            Some(dir) => std::fs::read(dir.join(key)).unwrap(),
            None => {
                let (status, body) = self.s3_request("GET", key, b"");
                assert_eq!(status, 200, "GET {key}: {}", String::from_utf8_lossy(&body));
                body
            }
        }
    }

    /// Replaces the object `key` with `bytes` behind the volume's back (as a damaged or hostile
    /// store would hold it).
    pub fn put_raw(&self, key: &str, bytes: &[u8]) {
        match &self.store_dir {
            Some(dir) => std::fs::write(dir.join(key), bytes).unwrap(),
            None => {
                let (status, body) = self.s3_request("PUT", key, bytes);
                assert_eq!(status, 200, "PUT {key}: {}", String::from_utf8_lossy(&body));
            }
        }
    }

    /// One request for `key` under the S3 volume's bucket and prefix, as the test credentials' (moto
    /// checks no signature, but answers an anonymous caller 403): status and body.
    fn s3_request(&self, method: &str, key: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let path = self.url.strip_prefix("s3://").unwrap();
        let port = moto().port;
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let head = format!(
            "{method} /{path}/{key} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=testing/20250101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body).unwrap();
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).unwrap();
        let split = resp.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
        let head = String::from_utf8_lossy(&resp[..split]).into_owned();
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let mut body = resp[split + 4..].to_vec();
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            body = dechunk(&body);
        }
        (status, body)
    }
}

/// The body of a chunked HTTP answer.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).split(';').next().unwrap_or("0").trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[eol + 2..(eol + 2 + size).min(b.len())]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
    out
}

/// The moto server shared by the tests of this binary. Its launcher exits when the binary does
/// (its stdin closes), taking the server with it.
pub struct Moto {
    pub port: u16,
    _child: Mutex<(Child, ChildStdin)>,
}

impl Moto {
    pub fn env(&self) -> HashMap<String, String> {
        [
            ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", self.port)),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_ACCESS_KEY_ID", "testing".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "testing-secret".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// The test venv: `SPACES_TEST_VENV`, default `<workspace>/.venv-test`.
pub fn venv() -> PathBuf {
    std::env::var_os("SPACES_TEST_VENV").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-test"))
}

const LAUNCHER: &str = r#"
import sys
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=False)
server.start()
print("ready", flush=True)
sys.stdin.read()
server.stop()
"#;

pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        let venv = venv();
        let python = venv.join("bin/python");
        assert!(
            venv.join("bin/moto_server").exists(),
            "the S3 tests need moto's server in the test venv {}: install it with `{}/bin/pip install -r volumes/tests/requirements-s3.txt` (scripts/test does)",
            venv.display(),
            venv.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(python)
            .args(["-c", LAUNCHER, &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "moto did not start");
        let stdin = child.stdin.take().unwrap();
        Moto { port, _child: Mutex::new((child, stdin)) }
    })
}

/// Creates a bucket with one plain HTTP request (moto does not check signatures).
pub fn create_bucket(port: u16, bucket: &str) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200") || resp.starts_with("HTTP/1.0 200"), "create bucket: {resp}");
}

/// One entry of a tree, as compared by the tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir { mode: u32 },
    File { mode: u32, data: Vec<u8>, mtime: i64 },
    Symlink { target: String },
}

/// Every entry under `root` (not following symlinks), by relative path.
pub fn tree(root: &Path) -> BTreeMap<String, Node> {
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<String, Node>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let mode = md.permissions().mode() & 0o7777;
            if md.is_dir() {
                out.insert(rel, Node::Dir { mode });
                go(root, &p, out);
            } else if md.file_type().is_symlink() {
                out.insert(rel, Node::Symlink { target: std::fs::read_link(&p).unwrap().to_str().unwrap().to_string() });
            } else if md.is_file() {
                out.insert(rel, Node::File { mode, data: std::fs::read(&p).unwrap(), mtime: md.mtime() });
            }
        }
    }
    let mut out = BTreeMap::new();
    go(root, root, &mut out);
    out
}

/// Writes a file, creating parents.
pub fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

/// A small home: nested dirs, files, a symlink, an empty dir.
pub fn sample_home(dir: &Path) {
    write(&dir.join("settings.json"), b"{\"theme\":\"dark\"}");
    write(&dir.join("sessions/one.jsonl"), b"{\"turn\":1}\n");
    write(&dir.join("sessions/two.jsonl"), &vec![b'x'; 200_000]);
    write(&dir.join("deep/a/b/c/d.txt"), b"deep");
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    std::os::unix::fs::symlink("sessions/one.jsonl", dir.join("current")).unwrap();
}

/// Makes a tree writable again so TempDir can remove it.
pub fn make_writable(root: &Path) {
    if let Ok(md) = std::fs::symlink_metadata(root) {
        if md.is_dir() {
            let _ = std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755));
            for e in std::fs::read_dir(root).unwrap() {
                make_writable(&e.unwrap().path());
            }
        }
    }
}

/// Raw tar entry with any name (the tar crate's builder refuses hostile names, as it should).
pub fn raw_entry(out: &mut Vec<u8>, name: &str, kind: tar::EntryType, link: Option<&str>, data: &[u8]) {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    if let Some(l) = link {
        h.as_old_mut().linkname[..l.len()].copy_from_slice(l.as_bytes());
    }
    h.set_entry_type(kind);
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(1_700_000_000);
    h.set_cksum();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    let pad = (512 - data.len() % 512) % 512;
    out.extend(std::iter::repeat_n(0u8, pad));
}

/// Ends a raw tar and compresses it.
pub fn finish_tar_zst(mut tar: Vec<u8>) -> Vec<u8> {
    tar.extend(std::iter::repeat_n(0u8, 1024));
    zstd::encode_all(&tar[..], 3).unwrap()
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// Lists a directory's names.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_str().unwrap().to_string()).collect();
    v.sort();
    v
}

/// Commits a crafted snapshot (manifest entries + one layer) straight into a local volume.
pub fn plant(store: &Path, home: &str, seq: u64, entries: Value, layer: &[u8]) {
    let sha = sha256_hex(layer);
    let dir = store.join("homes").join(home);
    write(&dir.join(format!("layers/{sha}.tar.zst")), layer);
    let entries: Vec<Value> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if e["kind"] == "file" {
                e["layer"] = json!(sha);
            }
            e
        })
        .collect();
    let m = json!({
        "format": 1, "id": format!("{seq:020}"), "home": home, "created_ms": 1, "host": "evil",
        "nonce": "n", "meta": null, "skipped": [], "root": {"mode": 0o755, "mtime_ns": 0},
        "layers": [sha], "entries": entries,
    });
    write(&dir.join(format!("snapshots/{seq:020}.json")), &serde_json::to_vec(&m).unwrap());
}

pub fn file_entry(path: &str, data: &[u8]) -> Value {
    json!({"path": path, "kind": "file", "mode": 0o644, "size": data.len(), "mtime_ns": 0, "sha256": sha256_hex(data)})
}
