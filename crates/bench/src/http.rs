//! A keep-alive HTTP/1.1 client for the load benchmarks (`http_load`, `gateway_latency`): one
//! connection, requests written by hand, so that the figures measure the server and not a
//! client library.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// One keep-alive HTTP/1.1 connection (`TCP_NODELAY`, a 120-second read timeout).
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// The request head's headers: `Host` (the server's address: a server without tokens
    /// answers loopback hosts only) and those added by [`Client::header`].
    headers: String,
}

/// A 200 answer.
pub struct Answer {
    /// From writing the request to the first byte of a chunked body (a stream), or to the
    /// last byte of any other.
    pub first_byte: Duration,
    /// From writing the request to the answer's last byte.
    pub whole: Duration,
    /// The body (a chunked one de-chunked).
    pub body: Vec<u8>,
}

impl Client {
    /// Connects to `addr`.
    ///
    /// # Errors
    /// The connection cannot be made or configured.
    pub fn connect(addr: SocketAddr) -> Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        Ok(Client {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            headers: format!("Host: {addr}\r\n"),
        })
    }

    /// Sends `name: value` with every request.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Client {
        self.headers.push_str(&format!("{name}: {value}\r\n"));
        self
    }

    /// POSTs the JSON `body` to `path`.
    ///
    /// # Errors
    /// The connection fails, the answer is not HTTP/1.1 with a length or chunked body, or
    /// its status is not 200 (the error holds the status and the body).
    pub fn post(&mut self, path: &str, body: &str) -> Result<Answer> {
        let request = format!(
            "POST {path} HTTP/1.1\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.headers,
            body.len()
        );
        let start = Instant::now();
        self.writer.write_all(request.as_bytes())?;
        let head = read_head(&mut self.reader)?;
        let status = head.get(9..12).context("a short status line")?.to_owned();
        let chunked = header(&head, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let mut answer = Vec::new();
        let first_byte = if chunked {
            read_chunked(&mut self.reader, &mut answer, start)?
        } else {
            let length: usize = header(&head, "content-length")
                .context("an answer without content-length")?
                .parse()
                .context("content-length")?;
            answer.resize(length, 0);
            self.reader.read_exact(&mut answer)?;
            start.elapsed()
        };
        let whole = start.elapsed();
        if status != "200" {
            bail!(
                "{path} answered {status}: {}",
                String::from_utf8_lossy(&answer)
            );
        }
        Ok(Answer {
            first_byte,
            whole,
            body: answer,
        })
    }
}

/// Reads an HTTP head (a request's or an answer's) up to its blank line, lower-cased.
///
/// # Errors
/// The connection fails or closes first.
pub fn read_head(reader: &mut impl BufRead) -> Result<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            bail!("the connection closed before an answer");
        }
        if line == "\r\n" {
            return Ok(head);
        }
        head.push_str(&line.to_ascii_lowercase());
    }
}

/// The value of the (lower-case) header `name` in `head`.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == name).then(|| v.trim())
    })
}

/// Reads a chunked body into `out`; the time from `start` to its first chunk.
fn read_chunked(reader: &mut impl BufRead, out: &mut Vec<u8>, start: Instant) -> Result<Duration> {
    let mut first = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
            .with_context(|| format!("a chunk size, not {line:?}"))?;
        first.get_or_insert_with(|| start.elapsed());
        let at = out.len();
        out.resize(at + size + 2, 0);
        reader.read_exact(&mut out[at..])?;
        out.truncate(at + size);
        if size == 0 {
            return first.context("no chunk");
        }
    }
}
