//! Connection behaviour of real servers: keep-alive that is advertised but
//! not kept (llama.cpp closes after every streamed response), and keep-alive
//! with a request limit (`Keep-Alive: max=N`).
//!
//! The connection's socket is wrapped in [`ConnIo`]; the service marks the
//! responses after which the connection must close. Once such a response is
//! written and flushed, reads report end-of-file, so hyper closes the
//! connection. A request the client already sent on it is never read: the
//! close resets it, exactly what a client sees from llama.cpp.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Frame;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use hyper::Response;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::config::FaultArgs;

/// What `Keep-Alive` advertises when a mode is on.
const ADVERTISED_TIMEOUT_S: u32 = 5;
const ADVERTISED_MAX: u32 = 100;

/// Per-connection state shared by the socket wrapper and the service.
#[derive(Default)]
pub struct ConnState {
    /// A connection mode is on (otherwise the wrapper only passes bytes through).
    active: bool,
    responses: AtomicU32,
    /// A response after which the connection closes has ended its body.
    close_after_flush: AtomicBool,
    /// Its bytes are flushed: reads now see end-of-file.
    eof: AtomicBool,
    read_waker: Mutex<Option<Waker>>,
}

/// True when the simulator changes connection handling at all.
pub fn active(f: &FaultArgs) -> bool {
    f.close_after_stream || f.keep_alive_max.is_some()
}

impl ConnState {
    pub fn new(f: &FaultArgs) -> Self {
        ConnState {
            active: active(f),
            ..Default::default()
        }
    }
}

/// Adds the keep-alive headers and marks the response after which the
/// connection closes.
pub fn apply<B>(
    mut resp: Response<B>,
    conn: &Arc<ConnState>,
    f: &FaultArgs,
) -> Response<ConnBody<B>> {
    let n = conn.responses.fetch_add(1, Ordering::Relaxed) + 1;
    let streamed = resp
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let max = f.keep_alive_max.unwrap_or(ADVERTISED_MAX);
    let mut close_silently = false;
    if active(f) {
        let remaining = max.saturating_sub(n);
        let h = resp.headers_mut();
        if f.keep_alive_max.is_some() && remaining == 0 {
            // The honest way: say so, and hyper closes after this response.
            h.insert(CONNECTION, HeaderValue::from_static("close"));
        } else {
            h.insert(CONNECTION, HeaderValue::from_static("keep-alive"));
            if let Ok(v) =
                HeaderValue::from_str(&format!("timeout={ADVERTISED_TIMEOUT_S}, max={remaining}"))
            {
                h.insert("keep-alive", v);
            }
            close_silently = f.close_after_stream && streamed;
        }
    }
    resp.map(|inner| ConnBody {
        inner,
        close: close_silently.then(|| conn.clone()),
    })
}

/// A response body that, when `close` is set, closes the connection once it is sent.
pub struct ConnBody<B> {
    inner: B,
    close: Option<Arc<ConnState>>,
}

impl<B> http_body::Body for ConnBody<B>
where
    B: http_body::Body<Data = Bytes, Error = io::Error> + Unpin,
{
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        if let (Poll::Ready(None), Some(c)) = (&r, this.close.as_ref()) {
            c.close_after_flush.store(true, Ordering::Release);
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, reporting end-of-file once a closing response is flushed.
pub struct ConnIo<T> {
    inner: T,
    state: Arc<ConnState>,
}

impl<T> ConnIo<T> {
    pub fn new(inner: T, state: Arc<ConnState>) -> Self {
        ConnIo { inner, state }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ConnIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.state.active {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        if this.state.eof.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if r.is_pending() {
            if let Ok(mut w) = this.state.read_waker.lock() {
                *w = Some(cx.waker().clone());
            }
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ConnIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        if matches!(r, Poll::Ready(Ok(())))
            && this.state.close_after_flush.load(Ordering::Acquire)
            && !this.state.eof.swap(true, Ordering::AcqRel)
        {
            // Wake the reader so that hyper sees the end-of-file and closes now.
            if let Ok(mut w) = this.state.read_waker.lock() {
                if let Some(w) = w.take() {
                    w.wake();
                }
            }
        }
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse() -> Response<()> {
        let mut r = Response::new(());
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        r
    }

    #[test]
    fn llama_cpp_mode_advertises_keep_alive_and_closes_streams() {
        let f = FaultArgs {
            close_after_stream: true,
            ..Default::default()
        };
        let c = Arc::new(ConnState::default());
        let r = apply(sse(), &c, &f);
        assert_eq!(r.headers()["keep-alive"], "timeout=5, max=99");
        assert_eq!(r.headers()[CONNECTION], "keep-alive");
        assert!(r.body().close.is_some());
        // Non-streamed answers keep the connection.
        let r = apply(Response::new(()), &c, &f);
        assert!(r.body().close.is_none());
    }

    #[test]
    fn max_mode_says_close_on_the_last_response() {
        let f = FaultArgs {
            keep_alive_max: Some(2),
            ..Default::default()
        };
        let c = Arc::new(ConnState::default());
        let first = apply(sse(), &c, &f);
        assert_eq!(first.headers()["keep-alive"], "timeout=5, max=1");
        let second = apply(sse(), &c, &f);
        assert_eq!(second.headers()[CONNECTION], "close");
        assert!(second.body().close.is_none());
    }

    #[test]
    fn default_mode_touches_nothing() {
        let c = Arc::new(ConnState::default());
        let r = apply(sse(), &c, &FaultArgs::default());
        assert!(r.headers().get("keep-alive").is_none());
        assert!(r.body().close.is_none());
    }
}
