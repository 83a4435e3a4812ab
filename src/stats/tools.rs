//! A stage's tool calls: how many the measured completions streamed, the
//! share answered with one, and calls a second at the achieved rate.

use crate::types::{StageReport, ToolCalls};

/// `tools`: the tool definitions each request carried (0: not known).
pub fn figures(s: &StageReport, tools: u32) -> ToolCalls {
    let measured = s.requests.measured as f64;
    let per = |n: u64| {
        if measured > 0.0 {
            n as f64 / measured
        } else {
            0.0
        }
    };
    ToolCalls {
        tools_per_request: u64::from(tools),
        calls: s.tokens.tool_calls,
        share: per(s.tokens.tool_call_requests),
        per_s: s.rates.completed_per_s * per(s.tokens.tool_calls),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_share_and_rate_come_from_the_measured_completions() {
        let mut s = StageReport::default();
        s.requests.measured = 20;
        s.rates.completed_per_s = 4.0;
        s.tokens.tool_calls = 8;
        s.tokens.tool_call_requests = 6;
        let t = figures(&s, 3);
        assert_eq!((t.tools_per_request, t.calls), (3, 8));
        assert_eq!((t.share, t.per_s), (0.3, 1.6));
        assert_eq!(figures(&StageReport::default(), 0).share, 0.0);
    }
}
