//! The latency `ctxlog gateway` adds to a model call, beside the LiteLLM proxy, in one run
//! (docs/benchmarks.md, "The gateway's added latency").
//!
//! A stand-in provider runs in this process on loopback (`TCP_NODELAY`, keep-alive, a fixed
//! small reply: one JSON completion, or the same text as six SSE chunks). Clients are
//! threads, each with one keep-alive HTTP/1.1 connection, each running chats that resend
//! their whole history with every call (as the SDKs do): a new user message, the reply
//! appended, [`TURNS_PER_CHAT`] turns a chat, then a new chat. The same clients call, one
//! after the other: the stand-in directly, `ctxlog gateway` (a release binary, headerless:
//! conversations recognised from the resent history; a fresh file store with the default
//! durable commits, one fsync per commit batch) and the LiteLLM proxy (one worker, no
//! database) routing `gpt-4o` to the stand-in. For 1, 16 and 64 clients, plain and
//! streamed, it prints each target's p50 and p99 (a whole answer; for a stream, the first
//! byte of its body), what each proxy adds over calling the stand-in directly, and the
//! ratio, and the CPU time the gateway process used per call (user and system, all threads,
//! read from `/proc`: what the call costs the machine, whatever else runs on it); then each
//! proxy's peak RSS.
//!
//! ```text
//! scripts/bench-gateway      # builds, makes the LiteLLM venv, runs this
//! target/release/gateway_latency --ctxlog target/release/ctxlog \
//!     [--litellm target/bench-gateway-venv/bin/litellm] [--requests N] [--clients 1,16,64]
//! ```
//!
//! `--requests N`: calls per client at each level (default 400 split over the clients, at
//! least 10 each). Without `--litellm` only the gateway is measured. Files go to a fresh
//! directory under `$TMPDIR`, removed at the end. Only loopback is ever contacted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ctxlog_bench::http::{Client, header, read_head};
use ctxlog_bench::peak_rss_kib_of;
use serde_json::{Value, json};

/// Turns a chat holds before its client starts a new one.
const TURNS_PER_CHAT: usize = 20;
/// The stand-in's reply, whole (about 200 bytes).
const REPLY: &str = "Here is a short answer to that. The main point is that the setting you \
                     asked about is read once at start-up, so a restart applies it; nothing \
                     else needs to change in the configuration for this to work.";
/// The API key every client sends: forwarded by the gateway, the LiteLLM proxy's master key
/// (it refuses to start without one).
const KEY: &str = "sk-bench-5f0c2a9e71d84b36a0e9c4d2b7f1a863";
/// How a user message of a chat reads (its client, chat and turn appended), about 300 bytes.
const QUESTION: &str = "I am working through the deployment notes for our service and I have a \
                        question about the configuration: when I change the timeout for the \
                        upstream connection, does it apply to requests already in flight, or \
                        only to new ones, and do I have to restart anything for it to apply? \
                        Context:";

fn main() -> Result<()> {
    let options = Options::parse()?;
    let dir = tempdir()?;
    let result = run(&options, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

struct Options {
    ctxlog: PathBuf,
    litellm: Option<PathBuf>,
    requests: Option<usize>,
    clients: Vec<usize>,
}

impl Options {
    fn parse() -> Result<Options> {
        let mut options = Options {
            ctxlog: PathBuf::from("target/release/ctxlog"),
            litellm: None,
            requests: None,
            clients: vec![1, 16, 64],
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--ctxlog" => options.ctxlog = value()?.into(),
                "--litellm" => options.litellm = Some(value()?.into()),
                "--requests" => options.requests = Some(value()?.parse().context("--requests")?),
                "--clients" => {
                    options.clients = value()?
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .context("--clients")?;
                }
                _ => bail!(
                    "unknown argument {arg}: --ctxlog PATH, --litellm PATH, --requests N, \
                     --clients N,N,…"
                ),
            }
        }
        Ok(options)
    }

    fn requests_per_client(&self, clients: usize) -> usize {
        self.requests.unwrap_or((400 / clients).max(10))
    }
}

fn tempdir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ctxlog-gateway-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn run(options: &Options, dir: &Path) -> Result<()> {
    let standin = standin()?;
    let mut gateway = Proxy::ctxlog(&options.ctxlog, &dir.join("store"), standin)?;
    let mut litellm = match &options.litellm {
        Some(path) => Some(Proxy::litellm(path, dir, standin)?),
        None => None,
    };
    println!(
        "gateway latency: the stand-in provider on {standin}; ctxlog gateway on {} (file store, \
         default durable commits, headerless){}\n",
        gateway.addr,
        litellm
            .as_ref()
            .map(|l| format!("; LiteLLM proxy on {} (one worker, no database)", l.addr))
            .unwrap_or_default()
    );
    println!(
        "| clients | calls | measure | direct p50 / p99 | ctxlog p50 / p99 | ctxlog adds p50 / p99 \
         | LiteLLM p50 / p99 | LiteLLM adds p50 / p99 | ctxlog / LiteLLM added (p50) \
         | ctxlog CPU per call |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for &clients in &options.clients {
        let calls = options.requests_per_client(clients);
        for stream in [false, true] {
            let direct = measure(standin, clients, calls, stream, "direct")?;
            let cpu = gateway.cpu_seconds();
            let ours = measure(gateway.addr, clients, calls, stream, "ctxlog")?;
            // Every call the gateway answered, the unmeasured first call of each client too.
            let cpu_ms = (gateway.cpu_seconds() - cpu) * 1e3 / (clients * (calls + 1)) as f64;
            let theirs = match &litellm {
                Some(l) => Some(measure(l.addr, clients, calls, stream, "litellm")?),
                None => None,
            };
            print_row(
                clients,
                calls,
                stream,
                &direct,
                &ours,
                theirs.as_ref(),
                cpu_ms,
            );
        }
    }
    println!();
    println!(
        "peak RSS: ctxlog gateway {:.1} MiB{}",
        gateway.peak_rss_mib(),
        litellm
            .as_ref()
            .map(|l| format!(", LiteLLM proxy {:.1} MiB", l.peak_rss_mib()))
            .unwrap_or_default()
    );
    println!(
        "times in ms; a plain call is timed to the last byte of its answer, a streamed one to \
         the first byte of its body; \"adds\" is the proxy's percentile minus the direct one"
    );
    gateway.stop();
    if let Some(l) = litellm.as_mut() {
        l.stop();
    }
    Ok(())
}

/// p50 and p99 of a run, in ms.
struct Percentiles {
    p50: f64,
    p99: f64,
}

fn print_row(
    clients: usize,
    calls: usize,
    stream: bool,
    direct: &Percentiles,
    ours: &Percentiles,
    theirs: Option<&Percentiles>,
    cpu_ms: f64,
) {
    let pair = |p: &Percentiles| format!("{:.2} / {:.2}", p.p50, p.p99);
    let added =
        |p: &Percentiles| format!("{:+.2} / {:+.2}", p.p50 - direct.p50, p.p99 - direct.p99);
    let (their_pair, their_added, ratio) = match theirs {
        Some(t) => (
            pair(t),
            added(t),
            format!(
                "{:.3}",
                (ours.p50 - direct.p50) / (t.p50 - direct.p50).max(f64::EPSILON)
            ),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    };
    let measure = if stream {
        "streamed: first byte"
    } else {
        "plain: whole answer"
    };
    println!(
        "| {clients} | {} | {measure} | {} | {} | {} | {their_pair} | {their_added} | {ratio} \
         | {cpu_ms:.3} |",
        clients * calls,
        pair(direct),
        pair(ours),
        added(ours),
    );
}

/// Runs `clients` clients of `calls` calls each against `addr` (after one unmeasured call
/// each) and returns the percentiles of the measured ones.
fn measure(
    addr: SocketAddr,
    clients: usize,
    calls: usize,
    stream: bool,
    target: &str,
) -> Result<Percentiles> {
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let target = target.to_owned();
            std::thread::spawn(move || -> Result<Vec<f64>> {
                let mut client =
                    Client::connect(addr)?.header("Authorization", &format!("Bearer {KEY}"));
                let mut chat = Chat::new(&format!("{target}-{c}-{stream}"));
                chat.call(&mut client, stream)?;
                (0..calls).map(|_| chat.call(&mut client, stream)).collect()
            })
        })
        .collect();
    let mut times = Vec::with_capacity(clients * calls);
    for handle in handles {
        let client = handle
            .join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
        times.extend(client);
    }
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    Ok(Percentiles {
        p50: at(0.50),
        p99: at(0.99),
    })
}

/// A client's chat: the messages it resends with each call.
struct Chat {
    client: String,
    chats: usize,
    messages: Vec<Value>,
}

impl Chat {
    fn new(client: &str) -> Chat {
        Chat {
            client: client.to_owned(),
            chats: 0,
            messages: Vec::new(),
        }
    }

    /// One call with the whole history and a new user message; the reply is appended. The
    /// time (ms) to the answer's last byte, or for a stream to its body's first byte.
    fn call(&mut self, client: &mut Client, stream: bool) -> Result<f64> {
        if self.messages.len() >= 2 * TURNS_PER_CHAT {
            self.messages.clear();
            self.chats += 1;
        }
        let turn = self.messages.len() / 2;
        self.messages
            .push(json!({"role": "user", "content": format!(
            "{QUESTION} client {}, chat {}, turn {turn}.", self.client, self.chats)}));
        let mut body = json!({"model": "gpt-4o", "messages": self.messages, "max_tokens": 256});
        if stream {
            body["stream"] = json!(true);
        }
        let answer = client.post("/v1/chat/completions", &body.to_string())?;
        let (elapsed, text) = if stream {
            (answer.first_byte, streamed_text(&answer.body)?)
        } else {
            let body: Value = serde_json::from_slice(&answer.body).context("a JSON answer")?;
            let text = body["choices"][0]["message"]["content"]
                .as_str()
                .context("an answer without content")?
                .to_owned();
            (answer.whole, text)
        };
        self.messages
            .push(json!({"role": "assistant", "content": text}));
        Ok(elapsed.as_secs_f64() * 1e3)
    }
}

/// The text of an OpenAI chat stream: its `data:` events' delta contents.
fn streamed_text(body: &[u8]) -> Result<String> {
    let mut text = String::new();
    for line in String::from_utf8_lossy(body).lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let event: Value = serde_json::from_str(data).context("an SSE event")?;
        if let Some(piece) = event["choices"][0]["delta"]["content"].as_str() {
            text.push_str(piece);
        }
    }
    Ok(text)
}

/// Starts the stand-in provider: `POST …/chat/completions` answered with [`REPLY`], whole
/// or as SSE chunks (when the body asks for a stream), on keep-alive connections.
fn standin() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = provide(stream);
            });
        }
    });
    Ok(addr)
}

fn provide(stream: TcpStream) -> Result<()> {
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let head = read_head(&mut reader)?;
        let length: usize = header(&head, "content-length").unwrap_or("0").parse()?;
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if request["stream"] == true {
            write!(
                writer,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                 transfer-encoding: chunked\r\n\r\n"
            )?;
            for event in reply_events() {
                let event = format!("data: {event}\n\n");
                write!(writer, "{:x}\r\n{event}\r\n", event.len())?;
            }
            write!(writer, "0\r\n\r\n")?;
        } else {
            let reply = json!({"id": "chatcmpl-standin", "object": "chat.completion",
                "created": 1, "model": "gpt-4o", "choices": [{"index": 0,
                "finish_reason": "stop", "message": {"role": "assistant", "content": REPLY}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 40, "total_tokens": 50}})
            .to_string();
            write!(
                writer,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
                reply.len()
            )?;
        }
        writer.flush()?;
    }
}

/// The stream of [`REPLY`]: a role chunk, the text in five pieces, the finish, `[DONE]`.
fn reply_events() -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o", "choices": [{"index": 0, "delta": delta,
            "finish_reason": finish}]})
        .to_string()
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let words: Vec<&str> = REPLY.split_inclusive(' ').collect();
    for piece in words.chunks(words.len().div_ceil(5)) {
        events.push(chunk(json!({"content": piece.concat()}), Value::Null));
    }
    events.push(chunk(json!({}), json!("stop")));
    events.push("[DONE]".into());
    events
}

/// A proxy in a process of its own.
struct Proxy {
    child: Child,
    addr: SocketAddr,
    /// The peak RSS seen so far, KiB (the process tree's, read while it ran).
    peak_kib: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// `ctxlog --root STORE gateway` with the stand-in as its OpenAI upstream.
    fn ctxlog(binary: &Path, store: &Path, standin: SocketAddr) -> Result<Proxy> {
        let mut child = Command::new(binary)
            .arg("--root")
            .arg(store)
            .args(["gateway", "--addr", "127.0.0.1:0", "--openai-upstream"])
            .arg(format!("http://{standin}/v1"))
            .env_remove("CTXLOG_TOKENS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let mut stderr = BufReader::new(child.stderr.take().context("stderr")?);
        let addr = loop {
            let mut line = String::new();
            if stderr.read_line(&mut line)? == 0 {
                bail!("ctxlog gateway exited before listening");
            }
            if let Some(rest) = line.split("listening on http://").nth(1) {
                break rest.split('/').next().unwrap_or_default().parse()?;
            }
        };
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Ok(Proxy::watch(child, addr))
    }

    /// `litellm --config … --port P --num_workers 1`: `gpt-4o` routed to the stand-in, no
    /// database, no telemetry, the local model cost map (no download), [`KEY`] as its master
    /// key.
    fn litellm(binary: &Path, dir: &Path, standin: SocketAddr) -> Result<Proxy> {
        let config = dir.join("litellm.yaml");
        std::fs::write(
            &config,
            format!(
                "model_list:\n  - model_name: gpt-4o\n    litellm_params:\n      \
                 model: openai/gpt-4o\n      api_base: http://{standin}/v1\n      \
                 api_key: sk-bench\nlitellm_settings:\n  telemetry: false\n"
            ),
        )?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(binary)
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--num_workers", "1"])
            .env("LITELLM_MASTER_KEY", KEY)
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_TELEMETRY", "False")
            .env("LITELLM_LOG", "ERROR")
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let proxy = Proxy::watch(child, addr);
        let deadline = Instant::now() + Duration::from_secs(180);
        while !ready(addr) {
            if Instant::now() > deadline {
                bail!("the LiteLLM proxy did not answer /health/liveliness within 180 s");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(proxy)
    }

    /// Samples the peak RSS of `child` and its descendants every 100 ms while it runs (a
    /// Python proxy may serve from a child process).
    fn watch(child: Child, addr: SocketAddr) -> Proxy {
        let peak_kib = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (peak, done, pid) = (peak_kib.clone(), stop.clone(), child.id());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(tree_peak_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Proxy {
            child,
            addr,
            peak_kib,
            stop,
        }
    }

    /// The CPU time the process has used so far (user and system, all its threads), in
    /// seconds: `utime` and `stime` of `/proc/PID/stat`, at the kernel's 100 ticks a second.
    fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // The fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
        (ticks(11) + ticks(12)) as f64 / 100.0
    }

    fn peak_rss_mib(&self) -> f64 {
        let now = tree_peak_kib(self.child.id());
        self.peak_kib.fetch_max(now, Ordering::Relaxed).max(now) as f64 / 1024.0
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The sum of the peak RSS (`VmHWM`) of process `pid` and its descendants, KiB.
fn tree_peak_kib(pid: u32) -> u64 {
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    peak_rss_kib_of(&pid.to_string())
        + children
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .map(tree_peak_kib)
            .sum::<u64>()
}

/// Whether `GET /health/liveliness` answers 200.
fn ready(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request =
        format!("GET /health/liveliness HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}
