//! Keeping a run's lease alive: one task per lease this host's runs hold, renewing it on a
//! schedule made from the lease's TTL, retrying a failed renewal with backoff well inside the
//! TTL, and telling the run (a `notice`, through [`super::Homes::on_lease_news`]) when renewals
//! are failing, when they work again, and when the lease is really gone.
//!
//! The timings, all fractions of the TTL ([`Schedule`]; TTL 60 s by default):
//!
//! | what                                   | of the TTL        | at 60 s          |
//! |----------------------------------------|-------------------|------------------|
//! | regular renewal, after a success       | 1/3               | 20 s             |
//! | longest wait for one try               | 1/12              | 5 s              |
//! | retry after the n-th failure in a row  | 1/60 · 2^(n-1), at most 1/12 | 1, 2, 4, 5, 5 … s |
//!
//! So a lease that was renewed at `t` and whose next renewal fails at `t + TTL/3` is tried
//! again before it would expire at `t + TTL`: 4 more times when every try waits out its whole
//! timeout (an unanswering store), 9 when tries fail at once (a refused connection); at least
//! two of those come within `TTL/3` of the failure, before the next regular renewal would have. The run is told
//! after [`Schedule::TELL_AFTER`] failures in a row (one failure that the next try mends is
//! only logged), again when a renewal works after that, and when the TTL passed with no
//! renewal working (the lease **lapsed**: another host may take it from then on). A lapsed
//! lease is still tried: while no other holder wrote a newer record it is this run's again
//! (nobody else can have saved meanwhile). When another holder's record is found (the home
//! was taken over or released elsewhere) the lease is **lost**: it is dropped, the run is
//! told, and its next save takes the lease again if it is free, or fails naming the holder.
//! A try that was cut off after its record landed is recognised as this run's own by the next
//! one (`spaces_volumes::Lease::renew`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use spaces_volumes::{Lease, VolumeError};

use super::Homes;

/// When to renew a lease of TTL `ttl` and when to try again after a failure (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    ttl: Duration,
}

impl Schedule {
    /// Failures in a row before the run is told its renewals are failing.
    pub const TELL_AFTER: u32 = 2;

    /// The schedule of a lease of TTL `ttl`.
    pub fn for_ttl(ttl: Duration) -> Schedule {
        Schedule { ttl }
    }

    /// The wait after a renewal that worked (or after the lease was taken): a third of the TTL.
    pub fn interval(&self) -> Duration {
        self.ttl / 3
    }

    /// The longest one try may take before it counts as failed: a twelfth of the TTL.
    pub fn attempt_timeout(&self) -> Duration {
        self.ttl / 12
    }

    /// The wait before the next try after `failures` failures in a row (`failures` >= 1):
    /// `TTL/60` doubled with each failure, at most `TTL/12`. `failures == 0` is
    /// [`Schedule::interval`].
    pub fn retry_delay(&self, failures: u32) -> Duration {
        if failures == 0 {
            return self.interval();
        }
        let first = self.ttl / 60;
        let doubled = first.saturating_mul(1u32 << (failures - 1).min(16));
        doubled.min(self.ttl / 12)
    }
}

/// What the renewal task tells a run: a `notice`'s one-line summary and its whole text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseNote {
    /// One line (at most 160 characters are shown as the event's summary).
    pub summary: String,
    /// Everything: the error, the expiry, what happens next.
    pub detail: String,
}

fn note(summary: String, detail: String) -> LeaseNote {
    LeaseNote { summary, detail }
}

/// The note of renewals failing.
fn failing(home: &str, failures: u32, error: &str, expires_ms: u64, sched: &Schedule) -> LeaseNote {
    let left = expires_ms.saturating_sub(spaces_store::now_ms()) / 1000;
    let summary = format!("lease of {home:?} not renewed: {failures} tries in a row failed; retrying before it expires in {left} s");
    note(
        summary,
        format!(
            "the lease of persistent agent {home:?} could not be renewed ({failures} tries in a row failed, the last: {error}); \
         trying again every {} ms at most; it expires at {expires_ms} (ms since the epoch, {left} s from now) unless a renewal works",
            sched.retry_delay(u32::MAX).as_millis()
        ),
    )
}

/// Keeps `lease` (held by run `run_id` on `home`) renewed until it is released, lost, or the
/// daemon ends (module doc). `homes` is weak: the task never keeps the daemon's homes alive.
pub(super) async fn keep(homes: Weak<Homes>, run_id: String, lease: Arc<Lease>, sched: Schedule) {
    let home = lease.home().to_owned();
    let mut failures = 0u32;
    let mut lapsed = false;
    loop {
        tokio::time::sleep(sched.retry_delay(failures)).await;
        let Some(homes) = homes.upgrade() else { return };
        if !homes.holds(&home, &run_id, &lease) {
            return;
        }
        let result = match tokio::time::timeout(sched.attempt_timeout(), lease.renew()).await {
            Ok(r) => r.map_err(|e| (matches!(e, VolumeError::LeaseLost { .. }), e.to_string())),
            Err(_) => Err((false, format!("no answer from the volume within {} ms", sched.attempt_timeout().as_millis()))),
        };
        match result {
            Ok(()) => {
                if failures >= Schedule::TELL_AFTER {
                    let how = if lapsed { "it had lapsed, and no other host took it meanwhile" } else { "it never lapsed" };
                    homes.tell(
                        &run_id,
                        note(
                            format!("lease of {home:?} renewed again after {failures} failed tries; {how}"),
                            format!("the lease of persistent agent {home:?} was renewed again after {failures} failed tries; {how}"),
                        ),
                    );
                } else if failures > 0 {
                    tracing::info!("home {home}: lease renewed after {failures} failed try");
                }
                failures = 0;
                lapsed = false;
            }
            Err((true, error)) => {
                tracing::warn!("home {home}: lease lost: {error}");
                homes.forget(&home, &lease);
                homes.tell(
                    &run_id,
                    note(
                        format!("lease of {home:?} lost: another holder's record came after this run's"),
                        format!(
                            "the lease of persistent agent {home:?} was lost: another holder's lease record came after this \
                             run's (the home was taken over after the lease lapsed, or released); the next save takes the \
                             lease again if it is free, or fails naming its holder"
                        ),
                    ),
                );
                return;
            }
            Err((false, error)) => {
                failures = failures.saturating_add(1);
                let expires_ms = lease.info().expires_ms;
                tracing::warn!("home {home}: lease renewal failed ({failures} in a row): {error}");
                if failures == Schedule::TELL_AFTER {
                    homes.tell(&run_id, failing(&home, failures, &error, expires_ms, &sched));
                }
                if !lapsed && spaces_store::now_ms() >= expires_ms {
                    lapsed = true;
                    homes.tell(
                        &run_id,
                        note(
                            format!("lease of {home:?} lapsed: no renewal worked for its TTL; another host may take the home"),
                            format!(
                                "the lease of persistent agent {home:?} lapsed at {expires_ms} (ms since the epoch): no \
                                 renewal worked for its TTL ({failures} tries, the last: {error}); another host may take the \
                                 home over from now on; this run keeps trying, and keeps the home if no other host took it"
                            ),
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    #[test]
    fn renewals_and_retries_are_fractions_of_the_ttl() {
        let s = Schedule::for_ttl(TTL);
        assert_eq!(s.interval(), Duration::from_secs(20));
        assert_eq!(s.attempt_timeout(), Duration::from_secs(5));
        assert_eq!(s.retry_delay(0), s.interval());
        let delays: Vec<Duration> = (1..=7).map(|n| s.retry_delay(n)).collect();
        let secs = |v: &[u64]| v.iter().map(|n| Duration::from_secs(*n)).collect::<Vec<_>>();
        assert_eq!(delays, secs(&[1, 2, 4, 5, 5, 5, 5]));
        assert_eq!(s.retry_delay(u32::MAX), Duration::from_secs(5), "capped, never overflows");
        // Another TTL, the same shape.
        let short = Schedule::for_ttl(Duration::from_millis(12_000));
        assert_eq!(short.interval(), Duration::from_millis(4000));
        assert_eq!((1..=4).map(|n| short.retry_delay(n)).collect::<Vec<_>>(), [200, 400, 800, 1000].map(Duration::from_millis));
    }

    /// The worst case: the lease was renewed at 0, the regular renewal at TTL/3 fails and every
    /// try after it takes its whole timeout. Several tries still fit before the expiry, the
    /// first of them before the next regular renewal would have come.
    #[test]
    fn a_failed_renewal_is_tried_again_several_times_before_the_lease_expires() {
        for ttl in [TTL, Duration::from_millis(1000), Duration::from_millis(12_000), Duration::from_secs(600)] {
            let s = Schedule::for_ttl(ttl);
            let mut at = s.interval() + s.attempt_timeout();
            let (mut tries, mut before_next_tick) = (1u32, 0u32);
            loop {
                at += s.retry_delay(tries);
                if at >= ttl {
                    break;
                }
                if at < s.interval() * 2 {
                    before_next_tick += 1;
                }
                tries += 1;
                at += s.attempt_timeout();
            }
            assert!(tries >= 5, "{ttl:?}: only {tries} tries before expiry");
            assert!(before_next_tick >= Schedule::TELL_AFTER, "{ttl:?}: {before_next_tick} retries before the next regular renewal");
            // The run is told well before the lease could lapse.
            let told = s.interval() + s.attempt_timeout() * Schedule::TELL_AFTER + s.retry_delay(1);
            assert!(told * 3 < ttl * 2, "{ttl:?}: told at {told:?}");
        }
    }
}
