//! The userspace mode at scale: N services × M endpoints (the scale benchmark's synthetic
//! cluster), compiled, their redirect table installed by nftables mode's applier, and one
//! listener per service port opened by the engine; then one endpoint change. Runs inside a
//! network namespace of its own; prints one line of figures.

use std::time::{Duration, Instant};

use anyhow::ensure;

use ferry_bench::cluster::ClusterSpec;
use ferry_bench::compile::{build_state, compile_config, node_context};
use ferry_compile::userspace::{self, PortRange, ProxyPorts};
use ferry_compile::{NodeCompiler, Plan, ServicePlan};
use ferry_dataplane::nft::NftDataplane;
use ferry_dataplane::userspace::ephemeral::ephemeral_ports;
use ferry_dataplane::userspace::{ProxiedPort, ProxyConfig, UserspaceProxy};
use ferry_model::{NodeView, Object};

use crate::proxy::rss_kib;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn proxied(plans: impl IntoIterator<Item = ServicePlan>, ports: &ProxyPorts) -> Vec<ProxiedPort> {
    plans
        .into_iter()
        .map(|plan| ProxiedPort {
            proxy_port: ports.get(&plan.name),
            localhost_node_port: false,
            plan,
        })
        .collect()
}

/// Proxy ports for every service port of the plan, in the default range as the agent chooses
/// it (clear of this namespace's ephemeral ports); fails naming the first service port left
/// without one.
fn proxy_ports(plan: &Plan) -> anyhow::Result<ProxyPorts> {
    let range = PortRange::clear_of(ephemeral_ports()?);
    let mut ports = ProxyPorts::new(range);
    for name in plan.services.keys() {
        ports.assign(name)?;
    }
    Ok(ports)
}

/// Prints `compile_ms rules_ms engine_ms resync_ms change_ms rss_kib_before rss_kib_after
/// listeners range`.
pub fn scale(services: usize, endpoints: usize) -> anyhow::Result<()> {
    let spec = ClusterSpec::new(services, endpoints)?;
    let mut state = build_state(spec.objects());
    let (ctx, cfg) = (node_context(), compile_config()?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let rss_before = rss_kib();

    let t = Instant::now();
    let plan = Plan::build(&NodeView::build(&state, &ctx), &cfg);
    let ports = proxy_ports(&plan)?;
    let rules = userspace::render(&plan, &ports);
    let compile = t.elapsed();

    let t = Instant::now();
    let mut dp = NftDataplane::new();
    dp.apply_full(rules.ruleset)?;
    let apply = t.elapsed();

    let mut engine = UserspaceProxy::new(ProxyConfig::default(), rt.handle().clone());
    let t = Instant::now();
    let served = proxied(plan.services.values().cloned(), &ports);
    let report = engine.sync_full(plan.family, plan.local.cidrs(), served);
    let sync = t.elapsed();
    ensure!(
        report.failed.is_empty(),
        "{} listeners failed",
        report.failed.len()
    );
    let listeners = engine.listeners().len();
    let range = ports.range();
    // The periodic full resync: every port updated in place, no listener reopened.
    let t = Instant::now();
    let served = proxied(plan.services.values().cloned(), &ports);
    engine.sync_full(plan.family, plan.local.cidrs(), served);
    let resync = t.elapsed();
    drop(plan);

    // One endpoint replaced: the service's plans again, and the engine updates them in place.
    let (i, slice) = spec.changed_slice(0);
    state.apply(Object::from(slice));
    let name = spec.service(i).name;
    let t = Instant::now();
    let plans = NodeCompiler::new(&state, &ctx, &cfg).service_plans(&state, &name);
    let report = engine.sync_service(ctx.family, &[], &name, proxied(plans, &ports));
    let change = t.elapsed();
    ensure!(report.updated == 1, "updated {} ports", report.updated);
    println!(
        "{:.1} {:.1} {:.1} {:.1} {:.3} {} {} {listeners} {range}",
        ms(compile),
        ms(apply),
        ms(sync),
        ms(resync),
        ms(change),
        rss_before,
        rss_kib()
    );
    Ok(())
}
