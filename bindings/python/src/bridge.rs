//! Rust futures as `asyncio.Future`s, safe at interpreter exit.
//!
//! [`awaitable`] creates a future on the caller's running loop, runs the Rust future on the tokio
//! runtime of pyo3-async-runtimes with the GIL released, and hands the outcome back with
//! `loop.call_soon_threadsafe`. A tokio thread takes the GIL only for that hand-over, and only
//! while the interpreter is not exiting: [`drain`] (registered with `atexit` by the package)
//! forbids new hand-overs and waits for those in progress, because a tokio thread still releasing
//! the GIL while the main thread finalizes aborts the process ("PyGILState_Release: thread state
//! must be current"), which `future_into_py` alone allowed when a script exited right after its
//! last call. A Python future cancelled by its caller is left alone; the Rust call runs to its end
//! (every call is bounded: long polls by their `wait_ms`).

use std::future::Future;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::errors::CallError;

/// `(exiting, hand-overs in progress)`.
static STATE: Mutex<(bool, usize)> = Mutex::new((false, 0));
static CHANGED: Condvar = Condvar::new();

/// How long [`drain`] waits for hand-overs in progress.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

const SETTLE: &std::ffi::CStr = c"
def settle(future, ok, value):
    if not future.cancelled():
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
";

/// The Python helper that completes a future on its loop's thread.
static SETTLE_FN: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

fn settle_fn(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    SETTLE_FN
        .get_or_try_init(py, || {
            let m = PyModule::from_code(py, SETTLE, c"spaces/_native/bridge.py", c"spaces._bridge")?;
            Ok::<_, PyErr>(m.getattr("settle")?.unbind())
        })
        .map(|f| f.bind(py))
}

/// An `asyncio.Future` of the running loop that resolves to `fut`'s value or raises its error.
pub fn awaitable<'py, T, F>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, CallError>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    crate::errors::fork_guard()?;
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let future = event_loop.call_method0("create_future")?;
    settle_fn(py)?;
    let handle = (event_loop.unbind(), future.clone().unbind());
    pyo3_async_runtimes::tokio::get_runtime().spawn(async move {
        let outcome = fut.await;
        if !enter() {
            // The interpreter is exiting: nobody waits; the references are leaked, not released
            // without the GIL.
            std::mem::forget(handle);
            return;
        }
        Python::attach(|py| {
            let (event_loop, future) = handle;
            let settled = (|| -> PyResult<()> {
                let (ok, value) = match outcome {
                    Ok(v) => (true, v.into_py_any(py)?),
                    Err(e) => (false, e.into_pyerr(py).into_py_any(py)?),
                };
                event_loop.call_method1(py, "call_soon_threadsafe", (settle_fn(py)?, future, ok, value))?;
                Ok(())
            })();
            // A closed loop (its script ended without awaiting) is not an error of the call.
            drop(settled);
            drop(event_loop);
        });
        leave();
    });
    Ok(future)
}

fn enter() -> bool {
    let mut s = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if s.0 {
        return false;
    }
    s.1 += 1;
    true
}

fn leave() {
    let mut s = STATE.lock().unwrap_or_else(|p| p.into_inner());
    s.1 -= 1;
    CHANGED.notify_all();
}

/// Stops hand-overs and waits (GIL released) for those in progress: run at exit.
#[pyfunction]
pub fn drain(py: Python<'_>) {
    py.detach(|| {
        let mut s = STATE.lock().unwrap_or_else(|p| p.into_inner());
        s.0 = true;
        let (s, _) = CHANGED.wait_timeout_while(s, DRAIN_TIMEOUT, |s| s.1 > 0).unwrap_or_else(|p| p.into_inner());
        drop(s);
    });
}
