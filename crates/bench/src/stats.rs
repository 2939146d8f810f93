//! Summary statistics of repeated runs, as the thesis reports them: mean with a 95%
//! confidence interval (Student's t), plus median and minimum (robust to the slow phases of a
//! shared machine).

/// Summary of one sample (seconds, bytes, ...).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub mean: f64,
    /// Half-width of the 95% confidence interval of the mean (0 with fewer than two values).
    pub ci95: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// Two-sided 97.5% quantiles of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

fn t_quantile(degrees_of_freedom: usize) -> f64 {
    match degrees_of_freedom {
        0 => f64::NAN,
        d if d <= T_975.len() => T_975[d - 1],
        // Beyond 30 degrees of freedom the normal quantile is within 2%.
        _ => 1.96,
    }
}

/// Summarizes `values`; `None` when empty.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let count = values.len();
    let mean = values.iter().sum::<f64>() / count as f64;
    let ci95 = if count < 2 {
        0.0
    } else {
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (count - 1) as f64;
        t_quantile(count - 1) * (variance / count as f64).sqrt()
    };
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = if count % 2 == 1 {
        sorted[count / 2]
    } else {
        (sorted[count / 2 - 1] + sorted[count / 2]) / 2.0
    };
    Some(Summary {
        count,
        mean,
        ci95,
        median,
        min: sorted[0],
        max: sorted[count - 1],
    })
}

/// Median of the ratios `a[i] / b[i]` of runs made in the same round: insensitive to the
/// machine's slow phases as long as they last longer than a round.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<f64> {
    let ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    summarize(&ratios).map(|s| s.median)
}

/// A ratio with its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioCi {
    /// Geometric mean of the paired ratios.
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    /// Pairs it was computed from.
    pub pairs: usize,
}

/// The geometric mean of the paired ratios `a[i] / b[i]` with a 95% confidence interval:
/// Student's t on the logarithms, so the interval is symmetric on a log axis and never below
/// zero. `None` without a pair (or with a non-positive value); with one pair the interval is
/// the point.
pub fn ratio_ci(a: &[f64], b: &[f64]) -> Option<RatioCi> {
    let logs: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x > &0.0 && y > &0.0).then(|| (x / y).ln()))
        .collect::<Option<_>>()?;
    let s = summarize(&logs)?;
    Some(RatioCi {
        ratio: s.mean.exp(),
        low: (s.mean - s.ci95).exp(),
        high: (s.mean + s.ci95).exp(),
        pairs: s.count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let s = summarize(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.median, 2.5);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 4.0);
        // sd = 1.291, se = 0.6455, t(3) = 3.182
        assert!((s.ci95 - 2.054).abs() < 0.01, "{}", s.ci95);
        assert_eq!(summarize(&[5.0]).unwrap().ci95, 0.0);
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn paired_ratio_ignores_common_slowdowns() {
        let fast = [1.0, 2.0, 1.0];
        let slow = [2.0, 4.0, 2.0];
        assert_eq!(paired_ratio(&slow, &fast), Some(2.0));
    }

    #[test]
    fn ratio_ci_is_the_geometric_mean_with_a_t_interval_on_logs() {
        // Ratios 2 and 8: geometric mean 4; logs ln 2 and ln 8 = 3 ln 2, mean 2 ln 2, sd of two
        // values sqrt(2) ln 2, se ln 2, t(1) = 12.706: interval 4 * 2^(-/+12.706).
        let r = ratio_ci(&[2.0, 8.0], &[1.0, 1.0]).unwrap();
        assert!((r.ratio - 4.0).abs() < 1e-12);
        assert!((r.low - 4.0 * 2f64.powf(-12.706)).abs() < 1e-9);
        assert!((r.high / (4.0 * 2f64.powf(12.706)) - 1.0).abs() < 1e-9);
        assert_eq!(r.pairs, 2);
        let one = ratio_ci(&[3.0], &[2.0]).unwrap();
        for v in [one.ratio, one.low, one.high] {
            assert!((v - 1.5).abs() < 1e-12, "{one:?}");
        }
        assert!(ratio_ci(&[1.0], &[0.0]).is_none());
        assert!(ratio_ci(&[], &[]).is_none());
    }
}
