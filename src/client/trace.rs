//! The ids every load request carries, so its record in requests.jsonl can
//! be found in the server's logs and traces: a W3C `traceparent` (version
//! 00, a random 16-byte trace id, an 8-byte span id, flags 01: sampled) and
//! an `x-request-id`, the trace id's 32 hex digits. vLLM takes
//! `X-Request-Id` as the request's id (`chatcmpl-<id>` in its log; with
//! `--enable-request-id-headers` it answers it back), and an OpenTelemetry
//! collector joins its spans on the trace id, so one value finds both.
//!
//! Drawn per request from the thread's generator: two integers, written as
//! hex into stack buffers; only the header values themselves are allocated.

use reqwest::header::{HeaderName, HeaderValue};

/// `traceparent`'s header name.
pub const TRACEPARENT: &str = "traceparent";
/// `x-request-id`'s header name.
pub const REQUEST_ID: &str = "x-request-id";

/// A request's trace id and span id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIds {
    /// Never zero (W3C: an all-zero trace id is invalid).
    pub trace: u128,
    /// Never zero.
    pub span: u64,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_into(out: &mut [u8], mut v: u128) {
    for b in out.iter_mut().rev() {
        *b = HEX[(v & 0xf) as usize];
        v >>= 4;
    }
}

impl TraceIds {
    /// Fresh random ids.
    pub fn random() -> Self {
        let trace: u128 = rand::random();
        let span: u64 = rand::random();
        TraceIds {
            trace: trace.max(1),
            span: span.max(1),
        }
    }

    /// The trace id's 32 lowercase hex digits: the request's `x-request-id`.
    pub fn request_id_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        hex_into(&mut b, self.trace);
        b
    }

    /// `00-<trace id>-<span id>-01`.
    pub fn traceparent_bytes(&self) -> [u8; 55] {
        let mut b = [b'-'; 55];
        b[..2].copy_from_slice(b"00");
        hex_into(&mut b[3..35], self.trace);
        hex_into(&mut b[36..52], u128::from(self.span));
        b[53..].copy_from_slice(b"01");
        b
    }

    pub fn request_id(&self) -> String {
        String::from_utf8_lossy(&self.request_id_bytes()).into_owned()
    }

    pub fn traceparent(&self) -> String {
        String::from_utf8_lossy(&self.traceparent_bytes()).into_owned()
    }

    /// The two headers, names first.
    pub fn headers(&self) -> [(HeaderName, HeaderValue); 2] {
        // Hex digits and dashes: always a valid header value.
        let value =
            |b: &[u8]| HeaderValue::from_bytes(b).unwrap_or_else(|_| HeaderValue::from_static("0"));
        [
            (
                HeaderName::from_static(TRACEPARENT),
                value(&self.traceparent_bytes()),
            ),
            (
                HeaderName::from_static(REQUEST_ID),
                value(&self.request_id_bytes()),
            ),
        ]
    }
}

/// Whether `s` is a W3C traceparent of version 00 whose ids are not zero.
pub fn valid_traceparent(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |r: &[u8]| r.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let nonzero = |r: &[u8]| r.iter().any(|&c| c != b'0');
    b.len() == 55
        && b[..2] == *b"00"
        && b[2] == b'-'
        && b[35] == b'-'
        && b[52] == b'-'
        && hex(&b[3..35])
        && nonzero(&b[3..35])
        && hex(&b[36..52])
        && nonzero(&b[36..52])
        && hex(&b[53..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_written_as_w3c_says() {
        let ids = TraceIds {
            trace: 0x4bf92f3577b34da6a3ce929d0e0e4736,
            span: 0x00f067aa0ba902b7,
        };
        assert_eq!(
            ids.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(ids.request_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(valid_traceparent(&ids.traceparent()));
        let [(n1, v1), (n2, v2)] = ids.headers();
        assert_eq!(
            (n1.as_str(), v1.to_str().unwrap()),
            (TRACEPARENT, &*ids.traceparent())
        );
        assert_eq!(
            (n2.as_str(), v2.to_str().unwrap()),
            (REQUEST_ID, &*ids.request_id())
        );
    }

    #[test]
    fn random_ids_differ_and_are_never_zero() {
        let a = TraceIds::random();
        let b = TraceIds::random();
        assert_ne!(a, b);
        assert!(valid_traceparent(&a.traceparent()));
        let zero = TraceIds { trace: 0, span: 0 };
        assert!(!valid_traceparent(&zero.traceparent()));
        assert!(!valid_traceparent(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        assert!(!valid_traceparent(
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"
        ));
    }
}
