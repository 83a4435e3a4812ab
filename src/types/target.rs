//! What a run is against: the report's `target`, and its name as the
//! screens show it.

use serde::{Deserialize, Serialize};

use super::kinds::Api;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Target {
    /// Base URL, or `built-in simulator` with its address (a
    /// [`TargetName`] in full).
    pub url: String,
    pub model: String,
    pub api: Api,
    /// True when the run used the built-in simulator ("target: built-in simulator").
    pub builtin_simulator: bool,
}

/// What a run is against, as the screens name it: a server by its
/// address, the built-in simulator by its name with its address beside
/// (`built-in simulator (http://127.0.0.1:40123)`, the report's
/// `target.url`). Carried apart so that a narrow screen shows the name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetName {
    /// The server's address, or `built-in simulator`.
    pub name: String,
    /// The built-in simulator's address; None for a server (its name is
    /// its address).
    pub address: Option<String>,
}

impl TargetName {
    /// The target at `address`: the built-in simulator or a server.
    pub fn of(simulator: bool, address: String) -> TargetName {
        match simulator {
            true => TargetName {
                name: "built-in simulator".into(),
                address: Some(address),
            },
            false => TargetName {
                name: address,
                address: None,
            },
        }
    }
}

/// In full: `built-in simulator (http://127.0.0.1:40123)`, or the server's
/// address.
impl std::fmt::Display for TargetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.address {
            Some(a) => write!(f, "{} ({a})", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A server at this address (what a viewer of a run from before the two
/// were carried apart reads the whole of).
impl From<&str> for TargetName {
    fn from(address: &str) -> TargetName {
        TargetName::of(false, address.into())
    }
}
