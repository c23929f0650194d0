//! Seconds as flags take them: one parser and one set of limits for every flag of
//! seconds (`forward --duration`, `record --duration`, `sweep --duration`, intervals and
//! delays), how a figure of seconds is printed back, and the replay speed factor.

/// Longest time any seconds flag accepts (one year): beyond it a Duration would overflow
/// its arithmetic long before a run could end.
pub const MAX_SECONDS: f64 = 31_536_000.0;

/// Shortest `--duration` other than 0 (run until stopped), seconds.
pub const MIN_DURATION: f64 = 0.01;

/// Parse a number of seconds (`--duration`, `-i`, `--delay`, `--seconds`): finite, from 0 to
/// [`MAX_SECONDS`]. Flags that need more than 0 say so where they are checked.
pub fn parse_seconds(s: &str) -> std::result::Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}`: expected a number of seconds such as 3 or 0.5"))?;
    if !v.is_finite() || !(0.0..=MAX_SECONDS).contains(&v) {
        return Err(format!("`{s}`: expected 0 to {MAX_SECONDS} seconds (one year)"));
    }
    Ok(v)
}

/// Parse the length of a run that must forward (`record --duration`): as
/// [`parse_seconds`], and at least [`MIN_DURATION`].
pub fn parse_run_seconds(s: &str) -> std::result::Result<f64, String> {
    let v = parse_seconds(s)?;
    if v < MIN_DURATION {
        return Err(format!(
            "`{}`: expected at least {MIN_DURATION} s (a shorter run records next to nothing)",
            seconds_text(v)
        ));
    }
    Ok(v)
}

/// A figure of seconds as a person reads it (`1e-300`, not 300 digits).
pub fn seconds_text(v: f64) -> String {
    if v.is_finite() && v.abs() < 1e7 && (v == 0.0 || v.abs() >= 1e-3) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Parse a replay speed factor: finite, from 0.01 to 1000.
pub fn parse_speed(s: &str) -> std::result::Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}`: expected a factor such as 2 or 0.5"))?;
    if !v.is_finite() || !(0.01..=1000.0).contains(&v) {
        return Err(format!("`{s}`: expected a factor from 0.01 to 1000"));
    }
    Ok(v)
}
