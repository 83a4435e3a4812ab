//! A stage of chat requests with images: images and bytes sent, from its
//! achieved rate, and the prompt tokens the server counted for them.

use crate::types::{ImagesSent, StageReport};

/// `count` images a request, `bytes` of data URLs a request.
pub fn figures(s: &StageReport, count: u32, bytes: f64) -> ImagesSent {
    let rate = s.rates.completed_per_s;
    ImagesSent {
        per_request: u64::from(count),
        bytes_per_request: bytes,
        per_s: rate * f64::from(count),
        bytes_per_s: rate * bytes,
        server_prompt_tokens_per_request: s.tokens.prompt_mean_server,
        text_tokens_per_request: s.tokens.prompt_mean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_and_bytes_follow_the_achieved_rate() {
        let mut s = StageReport::default();
        s.rates.completed_per_s = 4.0;
        s.tokens.prompt_mean = 128.0;
        s.tokens.prompt_mean_server = Some(1280.0);
        let i = figures(&s, 2, 1000.0);
        assert_eq!((i.per_request, i.per_s, i.bytes_per_s), (2, 8.0, 4000.0));
        assert_eq!(i.server_prompt_tokens_per_request, Some(1280.0));
        assert_eq!(i.text_tokens_per_request, 128.0);
    }
}
