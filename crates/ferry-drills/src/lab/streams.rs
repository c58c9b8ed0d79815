//! Long-lived TCP streams from the client: each reads its endpoint's line, then sends a byte
//! every 200 ms and expects it back within two seconds. A stream that fails is broken.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// How long an echo may take.
const ECHO_TIMEOUT: Duration = Duration::from_secs(2);

/// Streams kept open from the client namespace until [`Streams::finish`].
pub struct Streams {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<Outcomes>>>,
}

/// Each stream's fate: `Err` says how it broke.
type Outcomes = Vec<Result<(), String>>;

impl Streams {
    /// Opens one stream to each target (from namespace `client`); fails if one cannot be
    /// opened.
    pub fn open(client: &str, targets: Vec<SocketAddrV4>) -> anyhow::Result<Streams> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let ns = client.to_owned();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let thread = std::thread::spawn(move || {
            ferry_lab::netns::run_in(&ns, move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(async move {
                    let mut opened = Vec::new();
                    for t in &targets {
                        match open(*t).await {
                            Ok(s) => opened.push(s),
                            Err(e) => {
                                let _ = ready_tx.send(Err(format!("{t}: {e}")));
                                return Ok(Vec::new());
                            }
                        }
                    }
                    let _ = ready_tx.send(Ok(()));
                    let tasks: Vec<_> = opened
                        .into_iter()
                        .map(|s| tokio::spawn(keep(s, flag.clone())))
                        .collect();
                    let mut out = Vec::new();
                    for t in tasks {
                        out.push(t.await.unwrap_or_else(|e| Err(e.to_string())));
                    }
                    Ok(out)
                })
            })?
        });
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Streams {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => anyhow::bail!("opening a stream: {e}"),
            Err(_) => anyhow::bail!("the stream thread ended: {:?}", thread.join().ok()),
        }
    }

    /// Stops the streams; each one's result (an error says how it broke).
    pub fn finish(mut self) -> anyhow::Result<Vec<Result<(), String>>> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("stream thread panicked"))?,
            None => Ok(Vec::new()),
        }
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn open(target: SocketAddrV4) -> std::io::Result<BufReader<TcpStream>> {
    let stream = timeout(ECHO_TIMEOUT, TcpStream::connect(target)).await??;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    timeout(ECHO_TIMEOUT, reader.read_line(&mut line)).await??;
    Ok(reader)
}

async fn keep(mut s: BufReader<TcpStream>, stop: Arc<AtomicBool>) -> Result<(), String> {
    let mut n: u8 = 0;
    while !stop.load(Ordering::Relaxed) {
        n = n.wrapping_add(1);
        let exchange = async {
            s.get_mut().write_all(&[n]).await?;
            let mut b = [0u8; 1];
            s.read_exact(&mut b).await?;
            if b[0] == n {
                Ok(())
            } else {
                Err(std::io::Error::other("echoed the wrong byte"))
            }
        };
        match timeout(ECHO_TIMEOUT, exchange).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no echo within 2 s".to_owned()),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
