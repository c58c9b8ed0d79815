//! How long the lab waits. A slower machine (the software-emulated IPVS guest, about six
//! times slower than the host) stretches every wait and timeout by [`time_scale`], so the same
//! tests pass there without slowing the host down.

use std::time::Duration;

/// The environment variable holding the factor (a number, default 1).
pub const TIME_SCALE_ENV: &str = "FERRY_LAB_TIME_SCALE";

/// The factor every lab wait and timeout is multiplied by (`FERRY_LAB_TIME_SCALE`, at least 1).
pub fn time_scale() -> f64 {
    std::env::var(TIME_SCALE_ENV)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f >= 1.0)
        .unwrap_or(1.0)
}

/// `d` stretched by [`time_scale`].
pub fn scaled(d: Duration) -> Duration {
    d.mul_f64(time_scale())
}
