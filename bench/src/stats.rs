//! Summaries of repeated measurements.

use serde::Serialize;

/// Order statistics of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    pub min: f64,
    /// 90th percentile, nearest rank.
    pub p90: f64,
    pub max: f64,
}

impl Summary {
    /// Summarizes `samples`; `None` if there are none or one is NaN.
    pub fn of(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|x| x.is_nan()) {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        // Nearest rank: the smallest sample with at least 90% at or below.
        let p90 = s[(n * 9).div_ceil(10) - 1];
        Some(Self {
            n,
            median,
            min: s[0],
            p90,
            max: s[n - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_and_even_counts() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).expect("samples");
        assert_eq!(
            (s.n, s.median, s.min, s.p90, s.max),
            (3, 2.0, 1.0, 3.0, 3.0)
        );
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).expect("samples");
        assert_eq!(s.median, 2.5);
    }

    #[test]
    fn p90_nearest_rank() {
        let xs: Vec<f64> = (1..=30).map(f64::from).collect();
        assert_eq!(Summary::of(&xs).expect("samples").p90, 27.0);
        let xs: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(Summary::of(&xs).expect("samples").p90, 9.0);
        assert_eq!(Summary::of(&[5.0]).expect("samples").p90, 5.0);
    }

    #[test]
    fn empty_or_nan_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
    }
}
