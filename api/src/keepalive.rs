//! Keeps connections reusable when a response is sent before its request body
//! was read (a 401, 404, 405 or 413 answered at once).
//!
//! hyper cannot reuse a connection whose request body is still unread, and
//! closes it after the response without saying so: a client that sends its next
//! request on it gets a transport error. So the body is wrapped: what the handler
//! leaves unread is handed back here. A small rest that arrives promptly is read
//! and dropped, and the connection stays open; otherwise the response says
//! `Connection: close`.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;

/// Largest unread rest that is read to keep the connection.
const DRAIN_LIMIT: u64 = 64 * 1024;
/// Longest wait for it.
const DRAIN_WAIT: Duration = Duration::from_millis(500);

type Slot = Arc<Mutex<Option<Body>>>;

/// A request body that, dropped before its end, leaves its rest in `slot`.
struct Tracked {
    inner: Option<Body>,
    slot: Slot,
}

impl HttpBody for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        let polled = Pin::new(inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.inner = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map(HttpBody::size_hint).unwrap_or_else(|| SizeHint::with_exact(0))
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take()
            && !inner.is_end_stream()
            && let Ok(mut slot) = self.slot.lock()
        {
            *slot = Some(inner);
        }
    }
}

/// A request's body as the handler will see it, tracked: see [`Unread::settle`].
pub fn track(request: Request) -> (Request, Unread) {
    let expects_continue =
        request.headers().get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let slot: Slot = Arc::default();
    let request = request.map(|body| Body::new(Tracked { inner: Some(body), slot: slot.clone() }));
    (request, Unread { slot, expects_continue })
}

/// What the handler may leave of a tracked body.
pub struct Unread {
    slot: Slot,
    expects_continue: bool,
}

impl Unread {
    /// Once the response is ready: reads a small rest that arrives promptly,
    /// or else says `Connection: close` (see the module documentation).
    pub async fn settle(self, response: &mut Response) {
        let rest = self.slot.lock().ok().and_then(|mut slot| slot.take());
        if let Some(rest) = rest {
            // A client waiting for `100 Continue` has not sent its body: do not ask for it.
            let small = rest.size_hint().upper().is_some_and(|upper| upper <= DRAIN_LIMIT);
            if self.expects_continue || !small || !drained(rest).await {
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
        }
    }
}

/// Reads and drops the rest of a body; `true` when it ended in time.
async fn drained(rest: Body) -> bool {
    let limited = http_body_util::Limited::new(rest, DRAIN_LIMIT as usize);
    matches!(tokio::time::timeout(DRAIN_WAIT, limited.collect()).await, Ok(Ok(_)))
}
