//! A stage's token counts: by outcome for every request, and for the
//! measured completions the prompt and output totals, the server's own
//! prompt count and cache hits, and where each output count came from.

use std::collections::BTreeMap;

use crate::client::{RequestOutcome, RequestRecord};
use crate::types::{ByOutcome, Tokens};

#[derive(Debug, Default)]
pub(super) struct TokenCounts {
    /// Every request's tokens, by how it ended.
    by_outcome: ByOutcome,
    pub(super) prompt_total: u64,
    pub(super) output_total: u64,
    server_prompt_total: u64,
    server_prompt_n: u64,
    /// Prompt tokens the server reported as served from its cache.
    cached_prompt_total: u64,
    cached_prompt_n: u64,
    /// Measured completions by where their output count came from.
    sources: BTreeMap<String, u64>,
    /// Tool calls of the measured completions, and the completions with any.
    tool_calls: u64,
    tool_call_requests: u64,
}

impl TokenCounts {
    /// Any request that ended.
    pub(super) fn on_ended(&mut self, r: &RequestRecord) {
        let totals = match &r.outcome {
            RequestOutcome::Completed => &mut self.by_outcome.completed,
            RequestOutcome::Incomplete => &mut self.by_outcome.incomplete,
            RequestOutcome::Errored { .. } => &mut self.by_outcome.errored,
        };
        totals.requests += 1;
        totals.prompt_total = totals.prompt_total.saturating_add(r.prompt_tokens);
        totals.output_total = totals.output_total.saturating_add(r.output_tokens);
    }

    /// A measured completion.
    pub(super) fn on_measured(&mut self, r: &RequestRecord) {
        if let Some(c) = r.server_cached_prompt_tokens {
            self.cached_prompt_total = self.cached_prompt_total.saturating_add(c);
            self.cached_prompt_n += 1;
        }
        self.prompt_total = self.prompt_total.saturating_add(r.prompt_tokens);
        if let Some(p) = r.server_prompt_tokens {
            self.server_prompt_total = self.server_prompt_total.saturating_add(p);
            self.server_prompt_n += 1;
        }
        self.output_total = self.output_total.saturating_add(r.output_tokens);
        self.tool_calls += u64::from(r.tool_calls);
        self.tool_call_requests += u64::from(r.tool_calls > 0);
        *self
            .sources
            .entry(r.output_source.name().to_string())
            .or_default() += 1;
    }

    /// Totals and means over the `measured` completions.
    pub(super) fn figures(&self, measured: u64) -> Tokens {
        let n = measured as f64;
        let mean = |total: u64| if n > 0.0 { total as f64 / n } else { 0.0 };
        Tokens {
            prompt_mean: mean(self.prompt_total),
            prompt_mean_server: (self.server_prompt_n > 0)
                .then(|| self.server_prompt_total as f64 / self.server_prompt_n as f64),
            output_mean: mean(self.output_total),
            prompt_total: self.prompt_total,
            output_total: self.output_total,
            output_source: self.sources.clone(),
            by_outcome: self.by_outcome,
            prompt_cached_total: (self.cached_prompt_n > 0).then_some(self.cached_prompt_total),
            tool_calls: self.tool_calls,
            tool_call_requests: self.tool_call_requests,
        }
    }
}
