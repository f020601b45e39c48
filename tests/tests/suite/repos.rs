//! `repo` and `branch`: a run's repository cloned (or its branch checked out) before the first
//! turn, against local bare repositories; each refusal typed, nothing half-cloned.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use spaces_sdk::client::ClientError;
use spaces_sdk::{AgentStartRequest, ErrorCode, EventKind, SpaceAgentOptions, Status, StopReason};

use super::survive::{fake_codex, DONE};
use crate::support::{describe, settled, TestDaemon};

const WAIT: Duration = Duration::from_secs(60);

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A bare repository `<dir>/origin.git` with `main` (README) and `feature` (README and
/// feature.txt), and a branch `broken` whose commit is missing (listed, but it cannot clone).
fn bare_repo(dir: &Path) -> String {
    git(dir, &["init", "-q", "--bare", "origin.git"]);
    git(dir, &["init", "-q", "work"]);
    let work = dir.join("work");
    std::fs::write(work.join("README"), "hello\n").unwrap();
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-q", "-m", "first"]);
    git(&work, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(work.join("feature.txt"), "the feature\n").unwrap();
    git(&work, &["add", "feature.txt"]);
    git(&work, &["commit", "-q", "-m", "feature"]);
    git(&work, &["push", "-q", "../origin.git", "main", "feature"]);
    std::fs::write(dir.join("origin.git/refs/heads/broken"), "1234567890123456789012345678901234567890\n").unwrap();
    dir.join("origin.git").display().to_string()
}

/// A daemon with the fake Codex agent running `body` and a Space `s`, where the operator allows
/// local repositories (`SPACES_ALLOW_LOCAL_REPOS=1`, as these tests clone bare repositories of
/// a temp dir) unless `allow_local` is false.
async fn repo_daemon(body: &str, allow_local: bool) -> (TestDaemon, std::path::PathBuf, tempfile::TempDir) {
    repo_daemon_with(body, allow_local, Vec::new()).await
}

/// [`repo_daemon`] with more environment for the daemon (`SPACES_SANDBOX=landlock`).
async fn repo_daemon_with(
    body: &str,
    allow_local: bool,
    more: Vec<(String, String)>,
) -> (TestDaemon, std::path::PathBuf, tempfile::TempDir) {
    let bin = tempfile::tempdir().unwrap();
    let agent = fake_codex(bin.path(), body);
    let mut env = vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), agent.display().to_string())];
    env.extend(more);
    if allow_local {
        env.push(("SPACES_ALLOW_LOCAL_REPOS".to_owned(), "1".to_owned()));
    }
    let d = TestDaemon::start_with_env(env).await;
    let root = d.space("s").await;
    (d, root, bin)
}

async fn fake_daemon(body: &str) -> (TestDaemon, std::path::PathBuf, tempfile::TempDir) {
    repo_daemon(body, true).await
}

/// The fake agent answers with its working directory's branch and files.
fn reporting_agent() -> String {
    format!(
        "cat > /dev/null\nwhat=\"$(git rev-parse --abbrev-ref HEAD) $(ls | tr '\\n' ' ')in $(basename \"$PWD\")\"\n\
         echo '{{\"type\":\"item.completed\",\"item\":{{\"id\":\"m\",\"type\":\"agent_message\",\"text\":\"'\"$what\"'\"}}}}'\n{DONE}"
    )
}

fn request(repo: Option<&str>, branch: Option<&str>) -> AgentStartRequest {
    AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: "which branch?".into(),
        show: None,
        options: Some(SpaceAgentOptions { repo: repo.map(Into::into), branch: branch.map(Into::into), ..Default::default() }),
        request_id: None,
        traceparent: None,
    }
}

/// Start a run with `repo` = `url` and `branch` = `feature`; wait until its first turn ended
/// normally with the reporting agent's answer from the checked-out clone. Returns the run id and
/// its events.
async fn clone_and_answer(d: &crate::support::TestDaemon, url: &str) -> (String, Vec<spaces_sdk::Event>) {
    let run = d.client.agent_start(&request(Some(url), Some("feature"))).await.unwrap().run_id;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(st.result_text.as_deref().map(str::trim), Some("feature README feature.txt in origin"), "{st:#?}");
    (run, events)
}

/// A run started with `repo` and `branch` on a local bare repository works in a clone named
/// after it with the branch checked out; `preparing` progress is in `notice` events before the
/// turn's agent starts.
#[tokio::test]
async fn repo_and_branch_are_cloned_and_checked_out_before_the_first_turn() {
    let (d, root, _bin) = fake_daemon(&reporting_agent()).await;
    let repos = tempfile::tempdir().unwrap();
    let url = bare_repo(repos.path());
    let (run, events) = clone_and_answer(&d, &url).await;
    let notices: Vec<String> = events.iter().filter(|e| e.kind == EventKind::Notice).filter_map(|e| e.summary.clone()).collect();
    assert!(notices.first().is_some_and(|n| n.starts_with(&format!("cloning {url} (branch feature) into "))), "{notices:?}");
    assert!(notices.iter().any(|n| n.starts_with("cloned ") && n.ends_with("(branch feature)")), "{notices:?}");
    let entries: Vec<String> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(entries, vec!["origin".to_owned()], "the clone, and no temporary folder beside it");
    // A follow-up does not clone again.
    let sent = d
        .client
        .agent_message(&spaces_sdk::AgentMessageRequest {
            space: "s".into(),
            run_id: run.clone(),
            text: "again".into(),
            force: None,
            message_id: None,
            traceparent: None,
        })
        .await
        .unwrap();
    assert!(sent.ok, "{sent:?}");
    d.wait_turn_end("s", &run, 2, WAIT).await;
    let clones = d.events("s", &run).await.iter().filter(|e| e.summary.as_deref().is_some_and(|s| s.starts_with("cloning "))).count();
    assert_eq!(clones, 1);
}

/// `branch` alone checks out a branch of the repository the working directory is in.
#[tokio::test]
async fn branch_alone_checks_out_in_the_working_directory() {
    let (d, root, _bin) = fake_daemon(&reporting_agent()).await;
    let repos = tempfile::tempdir().unwrap();
    let url = bare_repo(repos.path());
    let out = Command::new("git").args(["clone", "-q", &url, "checkout"]).current_dir(&root).output().unwrap();
    assert!(out.status.success());
    let mut req = request(None, Some("feature"));
    req.options.as_mut().unwrap().cwd = Some("checkout".into());
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, WAIT).await;
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(st.result_text.as_deref().map(str::trim), Some("feature README feature.txt in checkout"), "{st:#?}");
}

fn refusal(r: Result<spaces_sdk::AgentStartReport, ClientError>) -> (ErrorCode, Option<String>, String) {
    match r {
        Err(ClientError::Api(e)) => (e.code, e.field, e.message),
        other => panic!("expected a typed refusal, got {other:?}"),
    }
}

/// A bad URL, an unreadable repository, an unknown branch and a target that is not empty are
/// refused at `agent_start` as `INVALID_ARGUMENT` naming the field, and no run is created; a
/// clone that fails later (a branch whose commit is missing) fails the turn with git's message
/// and leaves nothing in the Space.
#[tokio::test]
async fn repo_failures_are_typed_and_nothing_is_half_cloned() {
    let (d, root, _bin) = fake_daemon(&reporting_agent()).await;
    let repos = tempfile::tempdir().unwrap();
    let url = bare_repo(repos.path());
    let cases = [
        (request(Some("not a url"), None), "options.repo", "is not a repository git can clone"),
        (request(Some("--upload-pack=touch /tmp/x"), None), "options.repo", "is not a repository git can clone"),
        (request(Some("/nonexistent/thing.git"), None), "options.repo", "cannot be read"),
        (request(Some(&url), Some("no-such-branch")), "options.branch", "is not a branch of"),
        (request(None, Some("feature")), "options.branch", "has no such branch"),
    ];
    for (req, field, says) in cases {
        let (code, got_field, message) = refusal(d.client.agent_start(&req).await);
        assert_eq!((code, got_field.as_deref()), (ErrorCode::InvalidArgument, Some(field)), "{message}");
        assert!(message.contains(says), "{message}");
    }
    std::fs::create_dir(root.join("origin")).unwrap();
    std::fs::write(root.join("origin/notes.txt"), "mine").unwrap();
    let (code, field, message) = refusal(d.client.agent_start(&request(Some(&url), None)).await);
    assert_eq!((code, field.as_deref()), (ErrorCode::InvalidArgument, Some("options.repo")), "{message}");
    assert!(message.contains("is not empty"), "{message}");
    assert!(d.client.space("s").agent_list().await.unwrap().is_empty(), "no run was created");
    std::fs::remove_dir_all(root.join("origin")).unwrap();

    let run = d.client.agent_start(&request(Some(&url), Some("broken"))).await.unwrap().run_id;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{ended:?}");
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(st.status, Status::Failed, "{st:#?}");
    assert!(st.reason.contains("git clone of") && st.reason.contains("failed"), "{}", st.reason);
    let left: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "nothing half-cloned: {left:?}");
}

/// A repository URL with credentials (`scheme://user:token@host/...`) clones, but nothing the
/// daemon stores outside the run's 0600 secrets holds the credentials: the runs table (its
/// options), the events (clone notices show the URL without them), the logs.
#[tokio::test]
async fn a_repo_url_with_credentials_clones_and_is_stored_without_them() {
    let (d, _root, _bin) = fake_daemon(&reporting_agent()).await;
    let repos = tempfile::tempdir().unwrap();
    let path = bare_repo(repos.path());
    // Over a URL git fetches with its protocol, which refuses the deliberately broken ref.
    std::fs::remove_file(repos.path().join("origin.git/refs/heads/broken")).unwrap();
    let token = "repo-token-5fe2a9c1";
    let url = format!("file://bob:{token}@localhost{path}");
    let (run, events) = clone_and_answer(&d, &url).await;
    let notices: Vec<String> = events.iter().filter(|e| e.kind == EventKind::Notice).filter_map(|e| e.summary.clone()).collect();
    assert!(notices.first().is_some_and(|n| n.starts_with(&format!("cloning file://localhost{path} (branch feature)"))), "{notices:?}");

    // Every file of the state dir (database and its WAL, logs, run dirs) but the run's secret.
    let secret = d.state_dir().join("runs").join(&run).join("repo_url");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), url);
    let mut stack = vec![d.state_dir().to_path_buf()];
    let mut read = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p != secret && p.is_file() {
                let bytes = std::fs::read(&p).unwrap_or_default();
                read += 1;
                assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()), "{} holds the repo's credentials", p.display());
            }
        }
    }
    assert!(read > 3, "the state dir was read ({read} files)");
}

/// By default a caller's `repo` is a repository elsewhere: a path on the daemon's host, a
/// `file://` URL (even one that reads fine) and git's `ext::` helper are refused at
/// `agent_start`, naming `options.repo`, and nothing runs or is created; a URL of another host
/// passes that check (here it then cannot be read). With `allow_local_repos` the same path clones
/// (the tests above).
#[tokio::test]
async fn a_host_path_repo_is_refused_unless_the_operator_allows_local_repositories() {
    let (d, root, _bin) = repo_daemon(&reporting_agent(), false).await;
    let repos = tempfile::tempdir().unwrap();
    let path = bare_repo(repos.path());
    let marker = repos.path().join("ext-ran");
    let ext = format!("ext::sh -c touch% {}", marker.display());
    let cases = [
        (path.clone(), "is a repository on this host"),
        (format!("file://{path}"), "is a repository on this host"),
        (format!("FILE://localhost{path}"), "is a repository on this host"),
        (ext.clone(), "is not a repository git can clone"),
        ("ext::git-upload-pack%20/tmp".to_owned(), "transport helper"),
        (format!("fd::0,1/{path}"), "transport helper"),
        ("relative/origin.git".to_owned(), "is not a repository git can clone"),
    ];
    for (url, says) in cases {
        let (code, field, message) = refusal(d.client.agent_start(&request(Some(&url), None)).await);
        assert_eq!((code, field.as_deref()), (ErrorCode::InvalidArgument, Some("options.repo")), "{url}: {message}");
        assert!(message.contains(says), "{url}: {message}");
    }
    assert!(!marker.exists(), "no transport helper ran");
    // Another host's URL passes the check; nothing listens there, so it cannot be read.
    let (code, field, message) = refusal(d.client.agent_start(&request(Some("https://127.0.0.1:9/o/origin.git"), None)).await);
    assert_eq!((code, field.as_deref()), (ErrorCode::InvalidArgument, Some("options.repo")), "{message}");
    assert!(message.contains("cannot be read"), "{message}");
    assert!(d.client.space("s").agent_list().await.unwrap().is_empty(), "no run was created");
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "nothing was cloned");
}

/// Issue 28: the daemon runs nothing of a Space's on the host. A repository whose hook and
/// `core.fsmonitor` try to read the daemon's token and write outside the Space, checked out by
/// `branch`: git runs in the Space's sandbox, so the hook runs, but finds no token and cannot
/// write outside; the checkout itself works.
#[tokio::test]
async fn case_28_a_spaces_git_hooks_run_in_its_sandbox_never_as_the_operator() {
    a_spaces_git_hooks_run_in_its_sandbox_never_as_the_operator(Vec::new()).await
}

/// The same at the Landlock level (no namespaces: git runs under the helper's ruleset).
#[tokio::test]
async fn case_28_landlock_a_spaces_git_hooks_run_in_its_sandbox_never_as_the_operator() {
    a_spaces_git_hooks_run_in_its_sandbox_never_as_the_operator(vec![("SPACES_SANDBOX".to_owned(), "landlock".to_owned())]).await
}

async fn a_spaces_git_hooks_run_in_its_sandbox_never_as_the_operator(env: Vec<(String, String)>) {
    let (d, root, _bin) = repo_daemon_with(&reporting_agent(), true, env).await;
    let repos = tempfile::tempdir().unwrap();
    let url = bare_repo(repos.path());
    let out = Command::new("git").args(["clone", "-q", &url, "checkout"]).current_dir(&root).output().unwrap();
    assert!(out.status.success());
    let outside = repos.path().join("outside.txt");
    let token = d.state_dir().join("token");
    // The daemon's own token where it keeps one (the Landlock level always does), else a stand-in.
    if !token.exists() {
        std::fs::write(&token, "operator-token-value\n").unwrap();
    }
    let secret = std::fs::read_to_string(&token).unwrap().trim().to_owned();
    let hook = format!(
        "#!/bin/sh\necho ran > \"{root}/checkout/hook-ran\"\ncat \"{token}\" >> \"{root}/checkout/hook-ran\" 2>&1\necho escaped > \"{outside}\"\nexit 0\n",
        root = root.display(),
        token = token.display(),
        outside = outside.display()
    );
    let hooks = root.join("checkout/.git/hooks");
    for name in ["post-checkout", "fsmonitor"] {
        std::fs::write(hooks.join(name), &hook).unwrap();
        std::fs::set_permissions(hooks.join(name), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    git(&root.join("checkout"), &["config", "core.fsmonitor", &hooks.join("fsmonitor").display().to_string()]);
    let mut req = request(None, Some("feature"));
    req.options.as_mut().unwrap().cwd = Some("checkout".into());
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, WAIT).await;
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(st.result_text.as_deref().map(str::trim).map(|t| t.starts_with("feature ")), Some(true), "{st:#?}");
    let ran = std::fs::read_to_string(root.join("checkout/hook-ran")).expect("the hook ran (in the sandbox)");
    assert!(ran.starts_with("ran") && !ran.contains(&secret), "the hook read the operator's token: {ran}");
    assert!(!outside.exists(), "the hook wrote outside the Space: {}", outside.display());
}
