//! The server and the client: bulk streams, short connections, idle connections.

use std::io::BufRead as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BUF: usize = 256 * 1024;

/// Raises the open-files limit as far as root may: 10 000 idle connections are 10 000
/// sockets in the client and in the server.
pub fn raise_nofile() {
    use nix::sys::resource::{setrlimit, Resource};
    let _ = setrlimit(Resource::RLIMIT_NOFILE, 1 << 20, 1 << 20);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The server: a sink on 8080, one byte each way then close on 8081, one byte each way
/// then hold on 8082. Prints `ready`, runs until killed.
pub fn server(addr: &str) -> anyhow::Result<()> {
    raise_nofile();
    runtime().block_on(async {
        let sink = TcpListener::bind((addr, 8080)).await?;
        let rr = TcpListener::bind((addr, 8081)).await?;
        let idle = TcpListener::bind((addr, 8082)).await?;
        tokio::spawn(accept(sink, |mut s| async move {
            let mut buf = vec![0u8; BUF];
            while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
        }));
        tokio::spawn(accept(rr, |mut s| async move {
            let mut b = [0u8; 1];
            if s.read_exact(&mut b).await.is_ok() {
                let _ = s.write_all(b"y").await;
            }
        }));
        tokio::spawn(accept(idle, |mut s| async move {
            let mut b = [0u8; 1];
            if s.read_exact(&mut b).await.is_ok() && s.write_all(b"y").await.is_ok() {
                let _ = s.read(&mut b).await;
            }
        }));
        println!("ready");
        std::future::pending::<()>().await;
        Ok(())
    })
}

async fn accept<F, Fut>(listener: TcpListener, handle: F)
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((s, _)) => {
                let _ = s.set_nodelay(true);
                tokio::spawn(handle(s));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// `streams` connections writing as fast as they can for `secs`: Gbit/s.
pub fn bulk(to: SocketAddr, streams: usize, secs: u64) -> anyhow::Result<()> {
    let sent = Arc::new(AtomicU64::new(0));
    let elapsed = runtime().block_on(async {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for _ in 0..streams {
            let sent = sent.clone();
            tasks.push(tokio::spawn(async move {
                let mut s = TcpStream::connect(to).await?;
                let buf = vec![7u8; BUF];
                while Instant::now() < deadline {
                    s.write_all(&buf).await?;
                    sent.fetch_add(BUF as u64, Ordering::Relaxed);
                }
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        anyhow::Ok(start.elapsed())
    })?;
    let gbit = sent.load(Ordering::Relaxed) as f64 * 8.0 / elapsed.as_secs_f64() / 1e9;
    println!("{gbit:.2}");
    Ok(())
}

/// `concurrency` loops of connect, one byte each way, close, for `secs`: connections/s and
/// failures.
pub fn rate(to: SocketAddr, concurrency: usize, secs: u64) -> anyhow::Result<()> {
    raise_nofile();
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let elapsed = runtime().block_on(async {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (done, failed) = (done.clone(), failed.clone());
            tasks.push(tokio::spawn(async move {
                while Instant::now() < deadline {
                    match one_exchange(to).await {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
        start.elapsed()
    });
    let per_sec = done.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64();
    println!("{per_sec:.0} {}", failed.load(Ordering::Relaxed));
    Ok(())
}

async fn one_exchange(to: SocketAddr) -> anyhow::Result<()> {
    let mut s = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(to)).await??;
    s.set_nodelay(true)?;
    s.write_all(b"x").await?;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut rest)).await??;
    anyhow::ensure!(rest == b"y", "unexpected reply {rest:?}");
    Ok(())
}

/// Opens `n` connections (one byte each way) and holds them; prints `open N` (N opened),
/// then waits for stdin to close.
pub fn idle(to: SocketAddr, n: usize) -> anyhow::Result<()> {
    raise_nofile();
    let rt = runtime();
    let conns = rt.block_on(async {
        let mut conns = Vec::with_capacity(n);
        // 200 at a time, so the accept queues never overflow.
        for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
            let opened = open_batch(chunk.len(), to).await;
            conns.extend(opened);
        }
        conns
    });
    println!("open {}", conns.len());
    let _ = std::io::stdin().lock().lines().count();
    drop(conns);
    Ok(())
}

/// Opens `k` connections concurrently; those that completed their exchange within 5 s.
async fn open_batch(k: usize, to: SocketAddr) -> Vec<TcpStream> {
    let tasks: Vec<_> = (0..k)
        .map(|_| {
            tokio::spawn(async move {
                let open = async {
                    let mut s = TcpStream::connect(to).await.ok()?;
                    s.write_all(b"x").await.ok()?;
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).await.ok()?;
                    Some(s)
                };
                tokio::time::timeout(Duration::from_secs(5), open)
                    .await
                    .ok()?
            })
        })
        .collect();
    let mut out = Vec::with_capacity(k);
    for t in tasks {
        if let Ok(Some(s)) = t.await {
            out.push(s);
        }
    }
    out
}
