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

use std::{
    io,
    pin::Pin,
    task::{ready, Context, Poll},
};

use futures_util::TryFutureExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, TlsConnect, TlsStream};

/// The largest message a destination's server may send, body and header.
pub const MOST_MESSAGE: usize = 64 * 1024;

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
}

impl<S> Capped<S> {
    /// The TCP stream: its first byte answers the request for TLS when one is made.
    pub fn raw(inner: S, asks_for_tls: bool) -> Self {
        let stage = if asks_for_tls { Stage::SslAnswer } else { Stage::Framed };
        Capped { inner, stage, header: [0; 5], have: 0, left: 0 }
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
                self.left -= skip;
                bytes = &bytes[skip..];
                continue;
            }
            let take = (5 - self.have).min(bytes.len());
            self.header[self.have..self.have + take].copy_from_slice(&bytes[..take]);
            self.have += take;
            bytes = &bytes[take..];
            if self.have == 5 {
                self.have = 0;
                let len = u32::from_be_bytes([self.header[1], self.header[2], self.header[3], self.header[4]]) as usize;
                if len < 4 {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "the server sent a malformed message"));
                }
                if len + 1 > MOST_MESSAGE {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the server began a message of {} bytes; a destination's server may send at most {} KiB in one",
                            len + 1,
                            MOST_MESSAGE / 1024
                        ),
                    ));
                }
                self.left = len - 4;
            }
        }
        Ok(())
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
        let mut tls = Capped::raw((), true);
        tls.feed(&[b'S', 0x16, 0xff, 0xff, 0xff, 0xff]).unwrap();
        assert_eq!(tls.stage, Stage::Pass, "TLS records are not messages");
    }
}
