//! The bytes a Postgres destination's server sends, read through a parser of the protocol's framing, so that one message larger than [`MOST_MESSAGE`] fails the connection before anything buffers it.
//!
//! A backend message is a type byte and a four-byte big-endian length (itself
//! included). tokio-postgres reserves and reads whatever length a header claims,
//! up to 2 GiB, before it looks at the message: a tenant's server (or anything
//! listening where its URL points) could make each kept connection hold that
//! much. Hookgate's statements get small answers (a row of one boolean, command
//! tags, errors whose row values Postgres itself cuts to 64 bytes), so a message
//! over 64 KiB is refused as the header arrives.
//!
//! The stream is read in two places: on the TCP stream itself when the server
//! speaks in the clear, and inside TLS once it is negotiated (the TCP stream then
//! carries TLS records, passed through). Postgres answers the request for TLS with
//! one byte, `S` or `N`, outside any message.
//!
//! The cap holds each message; what a connection keeps of many is held too.
//! tokio-postgres keeps every `ParameterStatus` (`S`) under its name for the
//! connection's life (a map it never trims, at startup and whenever the server
//! sends one later, idle or not), and queues every `NoticeResponse` (`N`) that
//! comes before the first `ReadyForQuery`. So the parser counts, per connection,
//! the distinct parameter names (by a keyed hash of each) with the size of each
//! one's latest message, and the notices before the connection is ready: past
//! [`MOST_PARAMETERS`] names, [`MOST_STARTUP_NOTICES`] notices or [`MOST_KEPT`]
//! bytes of both, the connection ends. A parameter reported again (a trigger's
//! `SET`) replaces its value there and is counted once; a notice after startup is
//! logged and dropped by tokio-postgres, and is not counted.

use std::{
    collections::{hash_map::RandomState, HashMap},
    hash::{BuildHasher, DefaultHasher, Hasher},
    io,
    pin::Pin,
    task::{ready, Context, Poll},
};

use futures_util::TryFutureExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, TlsConnect, TlsStream};

/// The largest message a destination's server may send, body and header.
pub const MOST_MESSAGE: usize = 64 * 1024;

/// The most a connection keeps of its server's parameters (each distinct name's
/// latest message) and of the notices before it is ready, together.
pub const MOST_KEPT: usize = 1024 * 1024;

/// The most distinct parameter names a server may report on one connection
/// (Postgres itself reports about fifteen).
pub const MOST_PARAMETERS: usize = 256;

/// The most notices a server may send before the connection is ready.
pub const MOST_STARTUP_NOTICES: usize = 256;

/// Where a stream is in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// TLS was asked for: the next byte is the server's one-byte answer.
    SslAnswer,
    /// TLS records: the messages are parsed inside them.
    Pass,
    /// Backend messages.
    Framed,
}

/// A stream whose backend messages are held to [`MOST_MESSAGE`].
pub struct Capped<S> {
    inner: S,
    stage: Stage,
    header: [u8; 5],
    have: usize,
    /// Bytes of the current message's body still to come.
    left: usize,
    /// The current message's type byte and whole size.
    kind: u8,
    size: usize,
    /// A `ParameterStatus`'s name as it arrives, until its NUL.
    naming: Option<DefaultHasher>,
    /// The hash of the current `ParameterStatus`'s name, once read.
    named: Option<u64>,
    kept: Held,
}

/// What the client keeps of the messages so far.
#[derive(Default)]
struct Held {
    /// Keys the hash of parameter names: a server cannot choose names that collide.
    keys: RandomState,
    /// Each distinct parameter name's hash, and the size of its latest message.
    parameters: HashMap<u64, usize>,
    parameter_bytes: usize,
    /// Notices before the first `ReadyForQuery` (queued until then).
    notices: usize,
    notice_bytes: usize,
    /// A `ReadyForQuery` came: the startup's notices have been handed on.
    ready: bool,
}

impl Held {
    /// Notes one whole message; an error when the client would keep too much.
    fn note(&mut self, kind: u8, size: usize, name: Option<u64>) -> io::Result<()> {
        match (kind, name) {
            (b'S', Some(name)) => {
                let before = self.parameters.insert(name, size).unwrap_or(0);
                self.parameter_bytes = self.parameter_bytes.saturating_sub(before).saturating_add(size);
            }
            (b'N', _) if !self.ready => {
                self.notices += 1;
                self.notice_bytes = self.notice_bytes.saturating_add(size);
            }
            (b'Z', _) => {
                self.ready = true;
                self.notices = 0;
                self.notice_bytes = 0;
            }
            _ => return Ok(()),
        }
        let too_much = if self.parameters.len() > MOST_PARAMETERS {
            format!("the server reported more than {MOST_PARAMETERS} parameters")
        } else if self.notices > MOST_STARTUP_NOTICES {
            format!("the server sent more than {MOST_STARTUP_NOTICES} notices before the connection was ready")
        } else if self.parameter_bytes.saturating_add(self.notice_bytes) > MOST_KEPT {
            format!("the server's parameters and notices came to more than {} KiB", MOST_KEPT / 1024)
        } else {
            return Ok(());
        };
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{too_much}; a destination's server may make a connection keep at most {MOST_PARAMETERS} parameters, \
                 {MOST_STARTUP_NOTICES} notices before it is ready, and {} KiB of both",
                MOST_KEPT / 1024
            ),
        ))
    }
}

impl<S> Capped<S> {
    /// The TCP stream: its first byte answers the request for TLS when one is made.
    pub fn raw(inner: S, asks_for_tls: bool) -> Self {
        let stage = if asks_for_tls { Stage::SslAnswer } else { Stage::Framed };
        Capped {
            inner,
            stage,
            header: [0; 5],
            have: 0,
            left: 0,
            kind: 0,
            size: 0,
            naming: None,
            named: None,
            kept: Held::default(),
        }
    }

    /// The stream inside TLS: backend messages from its first byte.
    pub fn framed(inner: S) -> Self {
        Capped::raw(inner, false)
    }

    /// Follows the framing over bytes just read; an error ends the connection.
    fn feed(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if self.stage == Stage::SslAnswer {
            let Some((&answer, rest)) = bytes.split_first() else { return Ok(()) };
            self.stage = if answer == b'S' { Stage::Pass } else { Stage::Framed };
            bytes = rest;
        }
        if self.stage == Stage::Pass {
            return Ok(());
        }
        while !bytes.is_empty() {
            if self.left > 0 {
                let skip = self.left.min(bytes.len());
                if let Some(name) = self.naming.as_mut() {
                    let end = bytes[..skip].iter().position(|&b| b == 0);
                    name.write(&bytes[..end.unwrap_or(skip)]);
                    if end.is_some() {
                        // The name's hash stands in for it from here.
                        self.named = self.naming.take().map(|h| h.finish());
                    }
                }
                self.left -= skip;
                bytes = &bytes[skip..];
                if self.left == 0 {
                    self.end()?;
                }
                continue;
            }
            let take = (5 - self.have).min(bytes.len());
            self.header[self.have..self.have + take].copy_from_slice(&bytes[..take]);
            self.have += take;
            bytes = &bytes[take..];
            if self.have == 5 {
                self.have = 0;
                let len = u32::from_be_bytes([self.header[1], self.header[2], self.header[3], self.header[4]]);
                // In u64: the type byte added to any length cannot overflow, on any target.
                let size = u64::from(len) + 1;
                if len < 4 {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "the server sent a malformed message"));
                }
                if size > MOST_MESSAGE as u64 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the server began a message of {size} bytes; a destination's server may send at most {} KiB in one",
                            MOST_MESSAGE / 1024
                        ),
                    ));
                }
                // At most 64 KiB from here.
                self.kind = self.header[0];
                self.size = size as usize;
                self.left = (len - 4) as usize;
                self.named = None;
                self.naming = (self.kind == b'S').then(|| self.kept.keys.build_hasher());
                if self.left == 0 {
                    self.end()?;
                }
            }
        }
        Ok(())
    }

    /// The current message has been read whole.
    fn end(&mut self) -> io::Result<()> {
        self.naming = None;
        self.kept.note(self.kind, self.size, self.named.take())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        // Refused before the caller sees the header, so nothing reserves room for its length.
        this.feed(&buf.filled()[before..])?;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Capped<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<S: TlsStream + Unpin> TlsStream for Capped<S> {
    fn channel_binding(&self) -> ChannelBinding {
        self.inner.channel_binding()
    }
}

/// A TLS connector whose streams are [`Capped`] inside TLS.
pub struct CapTls<T>(pub T);

impl<S, T> TlsConnect<S> for CapTls<T>
where
    T: TlsConnect<S>,
{
    type Stream = Capped<T::Stream>;
    type Error = T::Error;
    type Future = futures_util::future::MapOk<T::Future, fn(T::Stream) -> Capped<T::Stream>>;

    fn connect(self, stream: S) -> Self::Future {
        self.0.connect(stream).map_ok(Capped::framed as fn(T::Stream) -> Capped<T::Stream>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u8, len: u32) -> Vec<u8> {
        [vec![kind], len.to_be_bytes().to_vec()].concat()
    }

    #[test]
    fn messages_under_the_cap_pass_in_any_chunking_and_one_over_it_fails_at_its_header() {
        let small = [header(b'Z', 5), vec![b'I']].concat();
        let notice = [header(b'N', 4 + 1000), vec![b'x'; 1000]].concat();
        let stream = [vec![b'N'], small.clone(), notice, small].concat();
        for chunk in [1, 3, 5, 7, 4096] {
            let mut c = Capped::raw((), true);
            for part in stream.chunks(chunk) {
                c.feed(part).unwrap();
            }
            assert_eq!((c.stage, c.have, c.left), (Stage::Framed, 0, 0), "chunks of {chunk}");
        }
        let mut c = Capped::framed(());
        let e = c.feed(&header(b'E', (MOST_MESSAGE as u32) * 4)).unwrap_err();
        assert!(e.to_string().contains("at most 64 KiB"), "{e}");
        let mut c = Capped::framed(());
        assert!(c.feed(&header(b'E', 3)).is_err(), "a length below its own size");
        let mut c = Capped::framed(());
        let e = c.feed(&header(b'E', u32::MAX)).unwrap_err();
        assert!(e.to_string().contains("of 4294967296 bytes"), "the largest length, counted without overflow: {e}");
        let mut tls = Capped::raw((), true);
        tls.feed(&[b'S', 0x16, 0xff, 0xff, 0xff, 0xff]).unwrap();
        assert_eq!(tls.stage, Stage::Pass, "TLS records are not messages");
    }

    fn parameter(name: &str, value: &str) -> Vec<u8> {
        let body = [name.as_bytes(), b"\0", value.as_bytes(), b"\0"].concat();
        [header(b'S', 4 + body.len() as u32), body].concat()
    }

    #[test]
    fn a_parameter_name_counts_once_however_its_messages_are_cut_and_past_256_names_the_connection_ends() {
        for chunk in [1, 2, 3, 7, 4096] {
            let mut c = Capped::framed(());
            let again = [parameter("application_name", "a"), parameter("application_name", "bcd")].concat();
            for part in again.chunks(chunk) {
                c.feed(part).unwrap();
            }
            assert_eq!(c.kept.parameters.len(), 1, "chunks of {chunk}");
            assert_eq!(c.kept.parameter_bytes, parameter("application_name", "bcd").len(), "the latest value's size");
        }
        let mut c = Capped::framed(());
        for i in 0..MOST_PARAMETERS {
            c.feed(&parameter(&format!("p{i}"), "v")).unwrap();
        }
        let e = c.feed(&parameter("one_more", "v")).unwrap_err();
        assert!(e.to_string().contains("more than 256 parameters"), "{e}");
        // Notices count only until the connection is ready.
        let mut c = Capped::framed(());
        let notice = [header(b'N', 4 + 1000), vec![b'x'; 1000]].concat();
        c.feed(&[header(b'Z', 5), vec![b'I']].concat()).unwrap();
        for _ in 0..2 * MOST_STARTUP_NOTICES {
            c.feed(&notice).unwrap();
        }
    }
}
