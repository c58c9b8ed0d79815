//! Drill 5, bad input at scale: 1 000 malformed or hostile objects ([`super::hostile`]) mixed
//! into 10 000 good Services, from manifests and from the API. Every good Service must be
//! programmed (`ferry status` finds each one in the kernel, a sample answers), every bad
//! object named (a warning naming its file or object), no crash, memory bounded (`VmHWM`
//! with and without the bad objects). Runs in nftables mode (reading and converting input
//! does not depend on the mode), and in userspace mode when `--modes` has it.
//!
//! Why the fake API server: it serves malformed objects, which a real one refuses to store.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::time::Duration;

use ferry_testkit::FakeApiServer;

use crate::drill::hostile::{self, KINDS};
use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Layout};
use crate::lab::probe::{served, Served};
use crate::lab::Ferry;
use crate::report::Row;

/// Where the input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// Manifest files.
    Manifests,
    /// The fake API server.
    Api,
}

/// Runs the drill with input from `from`, in `mode` (nftables or userspace: the drill checks
/// what is programmed through `ferry status` and probes, the same in both).
pub fn run(o: &Options, from: From, mode: Mode) -> anyhow::Result<Row> {
    let n = o.services(200, 10_000);
    let bad = n / 10;
    let mut label = match from {
        From::Manifests => "manifests",
        From::Api => "API",
    }
    .to_owned();
    if mode != Mode::Nftables {
        label = format!("{label}, {}", mode.name());
    }
    let mut row = Row::new("5. bad input at scale", &label);
    let tag = format!("bad-{}", label.to_lowercase().replace(", ", "-"));
    let stage = Stage::new(o, &tag, Cluster::new(n, 10, Layout::drill(false))?)?;
    let clean_hwm = hwm(o, &stage, from, mode, &[])?;
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let input = write_bad(&stage, from, bad, &mut rng)?;
    let (mut ferry, server) = start(o, &stage, from, mode, &input.api)?;
    let mut why = Vec::new();
    if let Err(e) = ferry.wait_syncs(1, Duration::from_secs(1200)) {
        why.push(format!("{e:#}"));
    }
    settle(&mut ferry);
    let named = Named::count(&ferry.log(), &input);
    let mut hwm_bad = f64::NAN;
    if ferry.is_running() {
        hwm_bad = ferry.memory_mib("VmHWM:")?;
        why.extend(check_good(o, &stage, &input, &mut rng)?);
        ferry.stop()?;
    } else {
        why.push(format!("ferry exited:\n{}", ferry.tail(10)));
    }
    drop(server);
    if !named.unnamed.is_empty() {
        let kinds: BTreeSet<&str> = named
            .unnamed
            .iter()
            .map(|k| KINDS[k % KINDS.len()])
            .collect();
        why.push(format!(
            "{} bad objects never named ({kinds:?})",
            named.unnamed.len()
        ));
    }
    row.rep((!why.is_empty()).then(|| why.join("; ")));
    row.figure = format!(
        "good programmed: {}; bad named: {} of {}; VmHWM {hwm_bad:.1} MiB (clean {clean_hwm:.1} MiB)",
        if row.failures == 0 { format!("{n} of {n}") } else { "see notes".to_owned() },
        input.named.len() - named.unnamed.len(),
        input.named.len()
    );
    row.note(&format!(
        "{n} good × 10, {bad} bad; named more than once: {}",
        named.twice
    ));
    if from == From::Api {
        row.note("only schema-valid bad values via the API (it refuses wrong types, garbled YAML, invalid UTF-8)");
    }
    Ok(row)
}

/// The bad input written for one run.
struct BadInput {
    /// Bad objects Ferry must name (their `k`).
    named: Vec<usize>,
    /// The bad objects the API server serves.
    api: Vec<serde_json::Value>,
}

/// Writes `bad` bad objects as files (or gathers them for the API server).
fn write_bad(
    stage: &Stage,
    from: From,
    bad: usize,
    rng: &mut fastrand::Rng,
) -> anyhow::Result<BadInput> {
    let n = stage.cluster.all().len();
    let taken = |k: usize| stage.cluster.cluster_ip(k % n).to_string();
    let mut input = BadInput {
        named: Vec::new(),
        api: Vec::new(),
    };
    for k in 0..bad {
        let objects = match from {
            From::Manifests => {
                let file = stage.dir.join(format!("zz-{}.yaml", hostile::name(k)));
                std::fs::write(file, hostile::manifest(k, &taken(k), rng))?;
                Some(Vec::new())
            }
            From::Api => hostile::api_objects(k),
        };
        let Some(objects) = objects else { continue };
        input.api.extend(objects);
        input.named.push(k);
    }
    Ok(input)
}

/// How Ferry's log named the bad objects.
struct Named {
    /// Bad objects no warning names.
    unnamed: Vec<usize>,
    /// Bad objects named more than once.
    twice: usize,
}

impl Named {
    fn count(log: &str, input: &BadInput) -> Named {
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("\"level\":\"WARN\"") || l.contains("\"level\":\"ERROR\""))
            .collect();
        let mut named = Named {
            unnamed: Vec::new(),
            twice: 0,
        };
        for &k in &input.named {
            let id = hostile::name(k);
            match warnings.iter().filter(|l| l.contains(&id)).count() {
                0 => named.unnamed.push(k),
                1 => {}
                _ => named.twice += 1,
            }
        }
        named
    }
}

/// What is wrong with the good Services: each programmed, a sample answering from its
/// endpoints.
fn check_good(
    o: &Options,
    stage: &Stage,
    input: &BadInput,
    rng: &mut fastrand::Rng,
) -> anyhow::Result<Vec<String>> {
    let n = stage.cluster.all().len();
    let mut why = Vec::new();
    // A bad Service valid on its own (its only EndpointSlice is refused) is programmed too.
    let valid_bad = input
        .named
        .iter()
        .filter(|&&k| KINDS[k % KINDS.len()] == hostile::BAD_SLICE)
        .count();
    if let Some(d) = stage.differences(&o.ferry, n + valid_bad)? {
        why.push(format!("good Services: {d}"));
    }
    let sample: Vec<_> = stage
        .cluster
        .sample(20, rng)
        .into_iter()
        .map(|i| stage.expect(i, None))
        .collect();
    let v = stage
        .net
        .client
        .block_on(async { Ok(served(&sample, 2).await) })?;
    if let Some(i) = v.iter().position(|s| *s != Served::New) {
        why.push(format!(
            "good Service {} served by {:?}",
            sample[i].target, v[i]
        ));
    }
    Ok(why)
}

/// Ferry on `stage`'s input (the API server holding the cluster and `extra`, or the manifests).
fn start(
    o: &Options,
    stage: &Stage,
    from: From,
    mode: Mode,
    extra: &[serde_json::Value],
) -> anyhow::Result<(Ferry, Option<FakeApiServer>)> {
    match from {
        From::Manifests => Ok((stage.start(&o.ferry, mode, &[])?, None)),
        From::Api => {
            let listener = ferry_lab::netns::run_in(stage.net.node.name(), || {
                TcpListener::bind("127.0.0.1:0")
            })??;
            let server = FakeApiServer::start(listener)?;
            for object in stage
                .cluster
                .objects()
                .into_iter()
                .chain(extra.iter().cloned())
            {
                server.apply(object);
            }
            let flags = stage.api_flags(mode, &server.url());
            let ferry = Ferry::start(&o.ferry, stage.net.node.name(), &flags, &stage.log)?;
            Ok((ferry, Some(server)))
        }
    }
}

/// `VmHWM` of a Ferry that synced the good objects and `extra` (MiB).
fn hwm(
    o: &Options,
    stage: &Stage,
    from: From,
    mode: Mode,
    extra: &[serde_json::Value],
) -> anyhow::Result<f64> {
    let (mut ferry, server) = start(o, stage, from, mode, extra)?;
    ferry.wait_syncs(1, Duration::from_secs(1200))?;
    settle(&mut ferry);
    let hwm = ferry.memory_mib("VmHWM:")?;
    ferry.stop()?;
    drop(server);
    Ok(hwm)
}
