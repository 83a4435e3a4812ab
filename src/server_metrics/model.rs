//! The report fields that carry the server's side of a stage: they live in
//! the data model (`crate::model::server`); re-exported here.

pub use crate::model::server::*;
