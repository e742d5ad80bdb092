//! The reliability suites' randomized trials: trial counts, seeds that replay a failure, and
//! the temp names a killed write leaves behind.

use std::io::Write as _;
use std::time::Duration;

/// Trials per randomized scenario: `AGENT_RELIABILITY_TRIALS` (the long mode), else `default`.
pub fn reliability_trials(default: usize) -> usize {
    match std::env::var("AGENT_RELIABILITY_TRIALS") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("AGENT_RELIABILITY_TRIALS={v:?} is not a number")),
        Err(_) => default,
    }
}

/// The seeds of a randomized scenario: `AGENT_RELIABILITY_SEED` alone (to replay a failure),
/// else `base + i` for each of `trials` trials.
pub fn reliability_seeds(base: u64, trials: usize) -> Vec<u64> {
    if let Ok(v) = std::env::var("AGENT_RELIABILITY_SEED") {
        let v = v.trim();
        let seed = v
            .strip_prefix("0x")
            .map_or_else(|| v.parse(), |hex| u64::from_str_radix(hex, 16))
            .unwrap_or_else(|_| panic!("AGENT_RELIABILITY_SEED={v:?} is not a number"));
        return vec![seed];
    }
    (0..trials as u64).map(|i| base + i).collect()
}

/// A seeded generator: a trial replays exactly from its seed (with this Cargo.lock).
#[derive(Debug, Clone)]
pub struct SeededRng(rand::rngs::StdRng);

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        Self(rand::SeedableRng::seed_from_u64(seed))
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        rand::Rng::random_range(&mut self.0, 0..n)
    }

    /// Uniform in `0..=max`, in microseconds.
    pub fn duration_up_to(&mut self, max: Duration) -> Duration {
        let micros = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(rand::Rng::random_range(&mut self.0, 0..=micros))
    }
}

/// Prints the seed of a randomized trial if the trial panics, with the command that replays it.
pub struct SeedReport {
    pub scenario: &'static str,
    pub seed: u64,
}

impl Drop for SeedReport {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = writeln!(
                std::io::stderr(),
                "{}: trial with seed {} failed; replay it with AGENT_RELIABILITY_SEED={} \
                 cargo test --test integration {}",
                self.scenario,
                self.seed,
                self.seed,
                self.scenario
            );
        }
    }
}

/// Whether `name` is a temp file of the agent's atomic writes (`.<name>.tmp.<pid>.<hex>`):
/// a killed writer leaves these behind, and no reader may take one for state.
pub fn is_state_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some(infix) = rest.rfind(".tmp.") else {
        return false;
    };
    let Some((pid, random)) = rest[infix + 5..].split_once('.') else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && !random.is_empty()
        && random.bytes().all(|b| b.is_ascii_hexdigit())
}
