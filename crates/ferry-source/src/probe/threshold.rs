//! Turning probe results into a readiness verdict, as kubelet's probe worker does.

/// What one probe run found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The check passed (HTTP 200–399, a TCP connection accepted, gRPC `SERVING`).
    Success,
    /// The check failed, with kubelet-style text (`HTTP probe failed with statuscode: 503`).
    Failure(String),
    /// The probe could not be run (e.g. its named port is on no container port): like kubelet,
    /// the result is thrown away and the verdict stays as it was.
    Error(String),
}

impl Outcome {
    /// `success`, `failure` or `error`: the `result` label of the probe counters.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure(_) => "failure",
            Outcome::Error(_) => "error",
        }
    }
}

/// Consecutive results of one container's probe and the verdict they made.
///
/// kubelet's rule (`pkg/kubelet/prober/worker.go`): count the run of equal results; a run of
/// `successThreshold` successes makes the container ready, a run of `failureThreshold` failures
/// makes it not ready; shorter runs leave the verdict as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    success_threshold: u32,
    failure_threshold: u32,
    last: Option<bool>,
    run: u32,
    verdict: Option<bool>,
}

impl Thresholds {
    /// No result yet, no verdict.
    pub fn new(success_threshold: u32, failure_threshold: u32) -> Self {
        Self {
            success_threshold: success_threshold.max(1),
            failure_threshold: failure_threshold.max(1),
            last: None,
            run: 0,
            verdict: None,
        }
    }

    /// Counts one result; returns the new verdict when it changed.
    pub fn record(&mut self, outcome: &Outcome) -> Option<bool> {
        let passed = match outcome {
            Outcome::Success => true,
            Outcome::Failure(_) => false,
            Outcome::Error(_) => return None,
        };
        if self.last == Some(passed) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(passed);
            self.run = 1;
        }
        let threshold = if passed {
            self.success_threshold
        } else {
            self.failure_threshold
        };
        if self.run < threshold || self.verdict == Some(passed) {
            return None;
        }
        self.verdict = Some(passed);
        self.verdict
    }

    /// The verdict so far (`None` before the first threshold is reached).
    pub fn verdict(&self) -> Option<bool> {
        self.verdict
    }

    /// Equal results in a row, the last one included.
    pub fn run(&self) -> u32 {
        self.run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail() -> Outcome {
        Outcome::Failure("HTTP probe failed with statuscode: 503".into())
    }

    /// (success, failure thresholds), results, verdict changes after each result.
    type Case = ((u32, u32), Vec<Outcome>, Vec<Option<bool>>);

    #[test]
    fn thresholds_follow_kubelet() {
        let cases: Vec<Case> = vec![
            ((1, 3), vec![Outcome::Success], vec![Some(true)]),
            (
                (1, 3),
                vec![Outcome::Success, fail(), fail(), fail(), fail()],
                vec![Some(true), None, None, Some(false), None],
            ),
            (
                (1, 3),
                vec![Outcome::Success, fail(), fail(), Outcome::Success, fail()],
                vec![Some(true), None, None, None, None],
            ),
            (
                (2, 1),
                vec![fail(), Outcome::Success, Outcome::Success, Outcome::Success],
                vec![Some(false), None, Some(true), None],
            ),
            // Errors are thrown away: they neither count nor break a run.
            (
                (1, 2),
                vec![fail(), Outcome::Error("no port".into()), fail()],
                vec![None, None, Some(false)],
            ),
        ];
        for ((success, failure), results, want) in cases {
            let mut t = Thresholds::new(success, failure);
            let got: Vec<Option<bool>> = results.iter().map(|r| t.record(r)).collect();
            assert_eq!(
                got, want,
                "thresholds {success}/{failure}, results {results:?}"
            );
        }
    }
}
