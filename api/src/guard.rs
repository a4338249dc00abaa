//! Reads HTTP/1 requests off a connection one step ahead of hyper and refuses a
//! malformed head itself.
//!
//! hyper answers a request it cannot parse with an empty 400 or 431 and no
//! request id, and offers no hook to change that. So each head is checked here
//! first, with the same parser (`httparse`) and limits at least as strict as
//! hyper's, plus the framing rules hyper would refuse (duplicate or malformed
//! `Content-Length`, `Transfer-Encoding` not ending in `chunked`, both at once).
//! A head that passes is handed to hyper whole; body bytes follow as they come,
//! counted (or de-chunked) to find where the next head starts. A head that fails
//! is never shown to hyper: it sees the end of the stream, finishes what it was
//! writing, and shuts the connection down; the shutdown first writes our answer:
//! the error envelope with a request id and `Connection: close`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use svc_contract::Problem;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::io::poll_read_buf;

use crate::response::{RequestId, problem_body};

/// Longest request head accepted (hyper's own limit is about 400 KiB).
pub const MAX_HEAD: usize = 64 * 1024;
/// Most header fields in a head (hyper's default).
pub const MAX_HEADERS: usize = 100;
const READ_CHUNK: usize = 16 * 1024;

/// Where the next bytes of the stream belong.
#[derive(Debug)]
enum Framing {
    /// A request head.
    Head,
    /// This many more bytes of a body.
    Length(u64),
    Chunked(Chunk),
    /// Not tracked any more (a chunked body hyper will refuse).
    PassThrough,
}

/// Position inside a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading the hexadecimal size (`digits` so far).
    Size {
        size: u64,
        digits: u8,
    },
    /// After the size: an extension, up to the line's end.
    Extension {
        size: u64,
    },
    /// Expecting the `\n` of the size line.
    SizeLf {
        size: u64,
    },
    /// This many more data bytes.
    Data(u64),
    /// Expecting the `\r\n` after the data.
    DataCr,
    DataLf,
    /// The trailer section: `at_line_start` is true after a line's `\n`.
    Trailer {
        at_line_start: bool,
        seen_cr: bool,
    },
}

/// What a check of the buffered bytes found.
enum Step {
    /// `n` more bytes may go to hyper.
    Release(usize),
    /// More bytes are needed.
    Wait,
    /// The head is refused: this response is the connection's last.
    Refuse(Vec<u8>),
}

pub struct Guarded<IO> {
    io: IO,
    /// Bytes read from the socket and not yet handed to hyper.
    held: BytesMut,
    /// How many bytes at the front of `held` hyper may have.
    released: usize,
    framing: Framing,
    eof: bool,
    /// The answer to a refused head, still to be written (and how much is).
    refusal: Option<(Vec<u8>, usize)>,
}

impl<IO> Guarded<IO> {
    pub fn new(io: IO) -> Self {
        Self { io, held: BytesMut::new(), released: 0, framing: Framing::Head, eof: false, refusal: None }
    }

    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// Moves what the framing allows from held to released, head by head.
    fn advance(&mut self) {
        while self.refusal.is_none() {
            let pending = &self.held[self.released..];
            if pending.is_empty() {
                return;
            }
            match self.step() {
                Step::Release(0) | Step::Wait => return,
                Step::Release(n) => self.released += n,
                Step::Refuse(answer) => self.refusal = Some((answer, 0)),
            }
        }
    }

    fn step(&mut self) -> Step {
        let pending = &self.held[self.released..];
        match &mut self.framing {
            Framing::PassThrough => Step::Release(pending.len()),
            Framing::Length(remaining) => {
                let n = (pending.len() as u64).min(*remaining);
                *remaining -= n;
                if *remaining == 0 {
                    self.framing = Framing::Head;
                }
                Step::Release(n as usize)
            }
            Framing::Chunked(state) => {
                let mut used = 0;
                while used < pending.len() {
                    match feed_chunked(state, &pending[used..]) {
                        Some((n, done)) => {
                            used += n;
                            if done {
                                self.framing = Framing::Head;
                                break;
                            }
                        }
                        None => {
                            // hyper refuses the body itself (the handler reports
                            // it); nothing here can find the next head.
                            self.framing = Framing::PassThrough;
                            return Step::Release(pending.len());
                        }
                    }
                }
                Step::Release(used)
            }
            Framing::Head => match check_head(pending) {
                Ok(Some((len, body))) => {
                    self.framing = body;
                    Step::Release(len)
                }
                Ok(None) => Step::Wait,
                Err(answer) => Step::Refuse(answer),
            },
        }
    }
}

/// Checks a complete request head at the start of `bytes`: its length and the
/// framing of its body, `None` while incomplete, or the refusal to send.
fn check_head(bytes: &[u8]) -> Result<Option<(usize, Framing)>, Vec<u8>> {
    // Empty lines before a request are allowed (RFC 9112 §2.2); hyper skips them.
    let blank = bytes.iter().take_while(|b| **b == b'\r' || **b == b'\n').count();
    let bytes_after = &bytes[blank..];
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let len = match request.parse(bytes_after) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => len,
        Ok(httparse::Status::Complete(_)) => {
            return Err(refusal(431, "The request head is too large.", "head_too_large"));
        }
        Ok(httparse::Status::Partial) if bytes_after.len() > MAX_HEAD => {
            return Err(refusal(431, "The request head is too large.", "head_too_large"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(refusal(431, "The request has too many header fields.", "too_many_headers"));
        }
        Err(_) => return Err(refusal(400, "The request is not valid HTTP/1.1.", "malformed_request")),
    };
    let framing = body_framing(&request).map_err(|reason| {
        refusal(400, "The request's body framing (Content-Length, Transfer-Encoding) is not valid.", reason)
    })?;
    Ok(Some((blank + len, framing)))
}

/// How the body of a valid head is framed (RFC 9112 §6), refusing what could be
/// read two ways.
fn body_framing(request: &httparse::Request<'_, '_>) -> Result<Framing, &'static str> {
    let named = |name: &'static str| -> Vec<&[u8]> {
        request.headers.iter().filter(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value).collect()
    };
    let lengths = named("content-length");
    let codings = named("transfer-encoding");
    match (lengths.as_slice(), codings.is_empty()) {
        ([], true) => Ok(Framing::Head),
        ([value], true) => {
            let text = std::str::from_utf8(value).map_err(|_| "invalid_content_length")?;
            let valid = !text.is_empty() && text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit());
            let length: u64 = if valid { text.parse().map_err(|_| "invalid_content_length")? } else { 0 };
            match (valid, length) {
                (false, _) => Err("invalid_content_length"),
                (true, 0) => Ok(Framing::Head),
                (true, n) => Ok(Framing::Length(n)),
            }
        }
        (_, true) => Err("duplicate_content_length"),
        ([], false) => {
            if request.version != Some(1) {
                return Err("transfer_encoding_in_http_1_0");
            }
            let joined: Vec<String> = codings.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect();
            let last = joined.join(",").rsplit(',').next().map(|c| c.trim().to_ascii_lowercase());
            if last.as_deref() == Some("chunked") {
                Ok(Framing::Chunked(Chunk::Size { size: 0, digits: 0 }))
            } else {
                Err("unsupported_transfer_encoding")
            }
        }
        (_, false) => Err("content_length_with_transfer_encoding"),
    }
}

/// Advances a chunked body over `bytes`: how many bytes were used and whether
/// the body ended, or `None` when it is malformed.
fn feed_chunked(state: &mut Chunk, bytes: &[u8]) -> Option<(usize, bool)> {
    let mut used = 0;
    while used < bytes.len() {
        let byte = bytes[used];
        *state = match *state {
            Chunk::Data(n) => {
                let take = (bytes.len() - used).min(usize::try_from(n).unwrap_or(usize::MAX));
                used += take;
                let left = n - take as u64;
                *state = if left == 0 { Chunk::DataCr } else { Chunk::Data(left) };
                continue;
            }
            Chunk::Size { size, digits } => match byte {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' if digits < 16 => {
                    let digit = (byte as char).to_digit(16)? as u64;
                    Chunk::Size { size: size * 16 + digit, digits: digits + 1 }
                }
                b'\r' if digits > 0 => Chunk::SizeLf { size },
                b';' | b' ' | b'\t' if digits > 0 => Chunk::Extension { size },
                _ => return None,
            },
            Chunk::Extension { size } => match byte {
                b'\r' => Chunk::SizeLf { size },
                b'\n' => return None,
                _ => Chunk::Extension { size },
            },
            Chunk::SizeLf { size } => match (byte, size) {
                (b'\n', 0) => Chunk::Trailer { at_line_start: true, seen_cr: false },
                (b'\n', size) => Chunk::Data(size),
                _ => return None,
            },
            Chunk::DataCr => (byte == b'\r').then_some(Chunk::DataLf)?,
            Chunk::DataLf => (byte == b'\n').then_some(Chunk::Size { size: 0, digits: 0 })?,
            Chunk::Trailer { at_line_start, seen_cr } => match byte {
                b'\r' => Chunk::Trailer { at_line_start, seen_cr: true },
                b'\n' if at_line_start => {
                    used += 1;
                    return Some((used, true));
                }
                b'\n' => Chunk::Trailer { at_line_start: true, seen_cr: false },
                _ if seen_cr => return None,
                _ => Chunk::Trailer { at_line_start: false, seen_cr: false },
            },
        };
        used += 1;
    }
    Some((used, false))
}

/// A complete HTTP/1.1 response carrying the error envelope.
fn refusal(status: u16, message: &'static str, reason: &'static str) -> Vec<u8> {
    let request_id = RequestId::new();
    let problem = Problem::invalid(reason, message);
    let body = problem_body(&problem, &request_id).to_string();
    let phrase = match status {
        431 => "Request Header Fields Too Large",
        _ => "Bad Request",
    };
    format!(
        "HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         x-request-id: {}\r\nconnection: close\r\n\r\n{body}",
        body.len(),
        request_id.0
    )
    .into_bytes()
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.released > 0 {
                let n = this.released.min(buf.remaining());
                buf.put_slice(&this.held[..n]);
                this.held.advance(n);
                this.released -= n;
                return Poll::Ready(Ok(()));
            }
            // After a refusal, or at the real end: hyper sees the end of the stream.
            if this.refusal.is_some() || this.eof {
                return Poll::Ready(Ok(()));
            }
            this.held.reserve(READ_CHUNK);
            if ready!(poll_read_buf(Pin::new(&mut this.io), cx, &mut this.held))? == 0 {
                this.eof = true;
            } else {
                this.advance();
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    /// Writes the answer to a refused head, if any, before shutting down.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some((answer, written)) = &mut this.refusal {
            while *written < answer.len() {
                let n = ready!(Pin::new(&mut this.io).poll_write(cx, &answer[*written..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
            }
            ready!(Pin::new(&mut this.io).poll_flush(cx))?;
        }
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
