//! The statistics comparisons rest on: median, the mean's 95% confidence interval
//! (Student's t) and Welch's two-sided t-test.

use statrs::distribution::{ContinuousCDF, StudentsT};

pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn mean_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = if xs.len() > 1 { xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (m, v)
}

/// The mean and its 95% confidence interval (Student's t with n-1 degrees of freedom).
pub fn mean_ci95(xs: &[f64]) -> (f64, (f64, f64)) {
    let (m, v) = mean_var(xs);
    if xs.len() < 2 || v == 0.0 {
        return (m, (m, m));
    }
    let t = StudentsT::new(0.0, 1.0, (xs.len() - 1) as f64).map_or(f64::NAN, |d| d.inverse_cdf(0.975));
    let h = t * (v / xs.len() as f64).sqrt();
    (m, (m - h, m + h))
}

/// Welch's two-sided t-test p-value for a difference of means (1.0 when it cannot be
/// computed: fewer than two runs on a side).
pub fn welch_p(a: &[f64], b: &[f64]) -> f64 {
    if a.len() < 2 || b.len() < 2 {
        return 1.0;
    }
    let ((ma, va), (mb, vb)) = (mean_var(a), mean_var(b));
    let (sa, sb) = (va / a.len() as f64, vb / b.len() as f64);
    if sa + sb == 0.0 {
        return if ma == mb { 1.0 } else { 0.0 };
    }
    let t = (ma - mb) / (sa + sb).sqrt();
    let df = (sa + sb).powi(2) / (sa * sa / (a.len() - 1) as f64 + sb * sb / (b.len() - 1) as f64);
    match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => (2.0 * (1.0 - d.cdf(t.abs()))).clamp(0.0, 1.0),
        Err(_) => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_by_hand() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        // Mean 2, sd 1, n 3: t(0.975, 2) = 4.302653 -> half width 4.302653 / sqrt(3).
        let (m, (lo, hi)) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((hi - 2.0 - 4.302653 / 3f64.sqrt()).abs() < 1e-5, "{lo} {hi}");
        // Welch by hand: a = 1,2,3 b = 4,5,6: t = -3 / sqrt(2/3), df = 4, p = 0.0213.
        assert!((welch_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]) - 0.02131).abs() < 1e-4);
        assert_eq!(welch_p(&[1.0], &[2.0, 3.0]), 1.0, "one run: no test");
        assert_eq!(welch_p(&[2.0, 2.0], &[2.0, 2.0]), 1.0);
    }
}
