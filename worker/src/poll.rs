//! How an idle worker looks for jobs.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis::prelude::{PollSnapshot, PollStrategy};

/// Looks at the queue every `period`.
///
/// apalis's own `IntervalStrategy` replaces a fired timer without polling the
/// new one; when the fetch that follows completes in the same poll, no waker is
/// left and the worker only looks again at its next heartbeat (seconds later).
/// This strategy re-arms and polls its timer until it is pending, so a waker is
/// always registered.
pub struct EveryInterval {
    period: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl EveryInterval {
    pub fn new(period: Duration) -> Self {
        Self { period, sleep: Box::pin(tokio::time::sleep(period)) }
    }
}

impl PollStrategy for EveryInterval {
    fn poll_drive(&mut self, cx: &mut Context<'_>, _: &PollSnapshot) -> Poll<Option<()>> {
        use std::future::Future;
        let mut fired = false;
        while self.sleep.as_mut().poll(cx).is_ready() {
            fired = true;
            let next = tokio::time::Instant::now() + self.period;
            self.sleep.as_mut().reset(next);
        }
        if fired { Poll::Ready(Some(())) } else { Poll::Pending }
    }
}
