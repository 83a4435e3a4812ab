//! A stage of a pooling API (embeddings, rerank, score): its throughput in
//! inputs and tokens, from its achieved rate.

use crate::types::{Pooling, StageReport};

/// `batch` inputs a request.
pub fn figures(s: &StageReport, batch: u64) -> Pooling {
    let rate = s.rates.completed_per_s;
    let tokens = s.tokens.prompt_mean_server.unwrap_or(s.tokens.prompt_mean);
    Pooling {
        inputs_per_request: batch,
        inputs_per_s: rate * batch as f64,
        tokens_per_s: rate * tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_and_tokens_follow_the_achieved_rate() {
        let mut s = StageReport::default();
        s.rates.completed_per_s = 10.0;
        s.tokens.prompt_mean = 500.0;
        let p = figures(&s, 8);
        assert_eq!(
            (p.inputs_per_request, p.inputs_per_s, p.tokens_per_s),
            (8, 80.0, 5000.0)
        );
        // The server's count wins when it gave one.
        s.tokens.prompt_mean_server = Some(520.0);
        assert_eq!(figures(&s, 8).tokens_per_s, 5200.0);
    }
}
