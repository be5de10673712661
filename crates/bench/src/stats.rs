//! Timing samples and their summary.

use std::time::Instant;

/// Summary of repeated samples of one measurement, in nanoseconds per item.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    /// Mean ns per item over the samples.
    pub mean_ns: f64,
    /// Median ns per item.
    pub median_ns: f64,
    /// Half-width of the 95% confidence interval of the mean (normal approximation).
    pub ci95_ns: f64,
    /// Number of samples.
    pub samples: usize,
}

impl Summary {
    /// Summarizes per-item times.
    pub fn from_samples(samples: &[f64]) -> Summary {
        let n = samples.len().max(1) as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let var = if samples.len() > 1 {
            samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let mut sorted = samples.to_vec();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let median = if sorted.is_empty() {
            0.0
        } else if sorted.len() % 2 == 1 {
            sorted[sorted.len() / 2]
        } else {
            (sorted[sorted.len() / 2 - 1] + sorted[sorted.len() / 2]) / 2.0
        };
        Summary {
            mean_ns: mean,
            median_ns: median,
            ci95_ns: 1.96 * (var / n).sqrt(),
            samples: samples.len(),
        }
    }
}

/// Times one call of `pass`, which processes `items` items; returns ns per item.
pub fn time_pass(items: usize, pass: impl FnOnce()) -> f64 {
    let start = Instant::now();
    pass();
    start.elapsed().as_nanos() as f64 / items.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_samples() {
        let s = Summary::from_samples(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.mean_ns, 2.5);
        assert_eq!(s.median_ns, 2.5);
        // sd = sqrt(5/3); ci = 1.96 * sd / 2
        assert!((s.ci95_ns - 1.96 * (5.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-12);
    }
}
