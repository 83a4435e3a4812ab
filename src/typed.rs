//! Numbers the user typed, echoed back in errors. A leaf: imports nothing
//! of the crate, so every check (flags, profile files, plans, rates,
//! percentiles) can use it.

/// The slowest rate llmsweep schedules: one request every 1,000 s.
pub const MIN_RATE: f64 = 0.001;
/// The fastest: far beyond what one process can send, but finite.
pub const MAX_RATE: f64 = 1e6;

/// Checks a user-given rate (requests per second, or streams).
pub fn validate_rate(r: f64) -> Result<f64, String> {
    if r.is_finite() && (MIN_RATE..=MAX_RATE).contains(&r) {
        Ok(r)
    } else {
        Err(format!(
            "rate {} is not possible: use a number of requests per second from {MIN_RATE} to {MAX_RATE:.0}",
            number(r)
        ))
    }
}

/// A number as a user would type it: ordinary numbers as they are (`0.5`,
/// `30`, `-2`), very large or very small ones in exponent form (`1e300`,
/// `1e-300`) rather than hundreds of digits. The shortest form that reads
/// back as the same number.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() || a == 0.0 || (1e-4..1e9).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// `msg` with every number written out in more than 15 digits (as serde
/// and TOML print a float: `1e300` as 301 digits) in the form [`number`]
/// gives. Other text, shorter numbers and things that only look like
/// numbers (`127.0.0.1`) are left as they are.
pub fn numbers_in(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let len = tail
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(tail.len());
        // A full stop after a number ends the sentence.
        let len = len - usize::from(tail[..len].ends_with('.'));
        let run = &tail[..len];
        let digits = run.bytes().filter(u8::is_ascii_digit).count();
        match run.parse::<f64>() {
            Ok(v) if digits > 15 => out.push_str(&number(v)),
            _ => out.push_str(run),
        }
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_typed() {
        for (v, shown) in [
            (1e300, "1e300"),
            (1e-300, "1e-300"),
            (-1e300, "-1e300"),
            (1.5e-7, "1.5e-7"),
            (f64::MAX, "1.7976931348623157e308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (0.0, "0"),
            (-1.0, "-1"),
            (0.5, "0.5"),
            (30.0, "30"),
            (0.001, "0.001"),
            (99.99, "99.99"),
            (123456789.0, "123456789"),
            (2.5e9, "2.5e9"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(number(v), shown, "{v:?}");
            // Shortest form that reads back as the same number.
            if v.is_finite() {
                assert_eq!(number(v).parse::<f64>().unwrap(), v);
            }
        }
    }

    #[test]
    fn long_numbers_in_a_message_are_shortened() {
        let huge = format!("{}", 1e300);
        let tiny = format!("{}", 1e-300);
        assert!(huge.len() > 300 && tiny.len() > 300);
        assert_eq!(
            numbers_in(&format!(
                "p.toml: line 2: invalid type: floating point `{huge}`, expected u64"
            )),
            "p.toml: line 2: invalid type: floating point `1e300`, expected u64"
        );
        assert_eq!(
            numbers_in(&format!("-{tiny} and {huge}.")),
            "-1e-300 and 1e300."
        );
        for kept in [
            "http://127.0.0.1:8000 at line 12, column 3",
            "rate 0.5 is not possible: 1000000",
            "123456789012345 (15 digits)",
            "",
            "no numbers",
        ] {
            assert_eq!(numbers_in(kept), kept);
        }
    }
}
