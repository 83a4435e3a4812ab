//! The range a number setting must be in, carried by its type.
//!
//! A field declared `fps: Within<Fps>` takes its bound from `Fps` wherever
//! a value arrives: typed as a flag (clap parses it through
//! [`Within::parse`]), read from a profile file (its `Deserialize` checks
//! it, so the error names the file, the line and the key), merged, echoed.
//! The bound is declared once, here, next to the words that explain it.

use std::fmt;
use std::marker::PhantomData;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::engine::strategy::MAX_SECONDS;
use crate::typed;

/// A setting's range and how to say it.
pub trait Bound: Copy + fmt::Debug + PartialEq + Send + Sync + 'static {
    /// Whether a finite value is possible.
    fn holds(v: f64) -> bool;
    /// What to give instead, e.g. "use 0.5 to 30 redraws a second".
    fn hint() -> String;
}

/// A number known to be finite and within `B`.
#[derive(Clone, Copy, PartialEq)]
pub struct Within<B: Bound>(f64, PhantomData<B>);

impl<B: Bound> Within<B> {
    /// The value, or what to give instead.
    pub fn new(v: f64) -> Result<Self, String> {
        if v.is_finite() && B::holds(v) {
            Ok(Within(v, PhantomData))
        } else {
            Err(format!(
                "{} is not possible: {}",
                typed::number(v),
                B::hint()
            ))
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }

    /// As a flag takes it (`--fps 4`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{:?} is not a number", s.trim()))?;
        Self::new(v)
    }
}

impl<B: Bound> PartialEq<f64> for Within<B> {
    fn eq(&self, other: &f64) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
impl<B: Bound> From<f64> for Within<B> {
    /// Tests write settings as numbers; out of bounds panics there.
    fn from(v: f64) -> Self {
        Within::new(v).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl<B: Bound> fmt::Debug for Within<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl<B: Bound> fmt::Display for Within<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&typed::number(self.0))
    }
}

impl<B: Bound> Serialize for Within<B> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de, B: Bound> Deserialize<'de> for Within<B> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Within::new(f64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl<B: Bound> clap::builder::ValueParserFactory for Within<B> {
    type Parser = fn(&str) -> Result<Within<B>, String>;
    fn value_parser() -> Self::Parser {
        Within::<B>::parse
    }
}

/// Declares a bound: `bound!(Fps, |v| (0.5..=30.0).contains(&v), "use …")`.
macro_rules! bound {
    ($(#[$m:meta])* $name:ident, |$v:ident| $holds:expr, $hint:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name;
        impl Bound for $name {
            fn holds($v: f64) -> bool {
                $holds
            }
            fn hint() -> String {
                $hint.to_string()
            }
        }
    };
}

fn year() -> String {
    format!("use a number of seconds from 0 to {MAX_SECONDS:.0} (a year)")
}

bound!(
    /// A span of seconds: zero up to a year.
    Seconds,
    |v| (0.0..=MAX_SECONDS).contains(&v),
    year()
);
bound!(
    /// How long a request may take: a millisecond up to a year.
    Timeout,
    |v| (0.001..=MAX_SECONDS).contains(&v),
    format!("use 0.001 to {MAX_SECONDS:.0} seconds")
);
bound!(
    /// Dashboard redraws per second.
    Fps,
    |v| (0.5..=30.0).contains(&v),
    "use 0.5 to 30 redraws a second"
);
bound!(
    /// Gamma-distributed gaps' burstiness (1 = Poisson).
    Burstiness,
    |v| (1e-3..=1e6).contains(&v),
    "use a number from 0.001 to 1000000 (1 = Poisson)"
);
bound!(
    /// A trace's time factor.
    TimeScale,
    |v| (1e-3..=1e3).contains(&v),
    "use a factor from 0.001 to 1000 (0.5 replays a trace twice as fast)"
);
bound!(
    /// A share of requests, in percent.
    Percent,
    |v| v > 0.0 && v <= 100.0,
    "use a percentage in (0, 100]"
);
bound!(
    /// A search's precision, a fraction of the rate.
    Fraction,
    |v| v > 0.0 && v < 1.0,
    "use a fraction in (0, 1), e.g. 0.1"
);
bound!(
    /// Seconds between scrapes of the server's metrics.
    ScrapeInterval,
    |v| (0.1..=3600.0).contains(&v),
    "use 0.1 to 3600 seconds"
);

bound!(
    /// A price per GPU-hour, in dollars.
    Dollars,
    |v| v > 0.0 && v <= 1e6,
    "use dollars per GPU-hour above 0 and at most 1000000, e.g. 2.50"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_outside_its_bound_says_what_to_give() {
        assert_eq!(Within::<Fps>::parse("4").map(Within::get), Ok(4.0));
        let e = Within::<Fps>::parse("1e-300").unwrap_err();
        assert_eq!(e, "1e-300 is not possible: use 0.5 to 30 redraws a second");
        assert!(Within::<Seconds>::new(f64::NAN).is_err());
        assert!(Within::<Seconds>::new(f64::INFINITY).is_err());
        assert!(Within::<Seconds>::new(-1.0).is_err());
        assert!(Within::<Fraction>::new(1.0).is_err());
        assert!(Within::<Percent>::new(100.0).is_ok());
        assert!(Within::<Percent>::new(0.0).is_err());
        // The limit is named (1e308 was refused without it).
        assert_eq!(
            Within::<Dollars>::parse("1e308").unwrap_err(),
            "1e308 is not possible: use dollars per GPU-hour above 0 and at most 1000000, e.g. 2.50"
        );
        assert_eq!(
            Within::<Fps>::parse("soon").unwrap_err(),
            "\"soon\" is not a number"
        );
        let e = toml::from_str::<toml::Table>("fps = 100")
            .unwrap()
            .get("fps")
            .cloned()
            .unwrap()
            .try_into::<Within<Fps>>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("100 is not possible"), "{e}");
    }
}
