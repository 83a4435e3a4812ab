//! A pooling API's whole answer (embeddings, rerank, score).

use super::chunk::{error_message, short};
use super::errors::ErrorCategory;
use super::record::{errored, RequestOutcome};
use crate::types::Api;

/// A pooling API's answer: its results (`data` for embeddings and score,
/// `results` for rerank) and the prompt tokens its usage gives. An error
/// object is an `error_event`; an answer without results `unexpected_body`;
/// a body that is not JSON `invalid_json`.
pub(super) fn pooled_answer(api: Api, body: &[u8]) -> Result<PooledUsage, RequestOutcome> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        errored(
            ErrorCategory::InvalidJson,
            format!(
                "the {api} answer is not JSON ({e}): {}",
                short(&String::from_utf8_lossy(&body[..body.len().min(200)]))
            ),
        )
    })?;
    if v.get("error").is_some_and(|e| !e.is_null())
        || v.get("object").and_then(|o| o.as_str()) == Some("error")
    {
        return Err(errored(
            ErrorCategory::ErrorEvent,
            error_message(&String::from_utf8_lossy(body)),
        ));
    }
    let key = if api == Api::Rerank {
        "results"
    } else {
        "data"
    };
    match v.get(key).and_then(|d| d.as_array()) {
        Some(items) if !items.is_empty() => {}
        _ => {
            return Err(errored(
                ErrorCategory::UnexpectedBody,
                format!("the {api} answer has no `{key}` results"),
            ))
        }
    }
    Ok(pooled_usage(v.get("usage")))
}

/// The prompt tokens a pooling answer's `usage` gives (`prompt_tokens`,
/// else `total_tokens`), checked as a stream's usage is: a count that is
/// not a whole number of tokens up to [`super::chunk::MAX_USAGE_TOKENS`]
/// (2^64−1, 1e19) is set aside, and why is the request's usage note.
pub(super) fn pooled_usage(usage: Option<&serde_json::Value>) -> PooledUsage {
    let Some(serde_json::Value::Object(m)) = usage else {
        return PooledUsage::default();
    };
    let key = if m.get("prompt_tokens").is_some_and(|v| !v.is_null()) {
        "prompt_tokens"
    } else {
        "total_tokens"
    };
    match super::chunk::usage_count(m, key, key) {
        Ok(tokens) => PooledUsage { tokens, note: None },
        Err(why) => PooledUsage {
            tokens: None,
            note: Some(why),
        },
    }
}

/// A pooling answer's prompt tokens, or why its usage was set aside.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct PooledUsage {
    pub tokens: Option<u64>,
    pub note: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_answers_are_results_or_a_categorised_failure() {
        let tokens = |api, body: &[u8]| pooled_answer(api, body).ok().and_then(|u| u.tokens);
        let ok =
            br#"{"data":[{"embedding":[0.1]}],"usage":{"prompt_tokens":12,"total_tokens":12}}"#;
        assert_eq!(tokens(Api::Embeddings, ok), Some(12));
        let rerank =
            br#"{"results":[{"index":0,"relevance_score":0.5}],"usage":{"total_tokens":7}}"#;
        assert_eq!(tokens(Api::Rerank, rerank), Some(7));
        let category = |api, body: &[u8]| match pooled_answer(api, body) {
            Err(RequestOutcome::Errored { category, .. }) => Some(category),
            _ => None,
        };
        assert_eq!(
            category(Api::Rerank, ok),
            Some(ErrorCategory::UnexpectedBody)
        );
        assert_eq!(
            category(Api::Score, br#"{"object":"error","message":"boom"}"#),
            Some(ErrorCategory::ErrorEvent)
        );
        assert_eq!(
            category(Api::Score, b"<html>"),
            Some(ErrorCategory::InvalidJson)
        );
        assert_eq!(
            category(Api::Embeddings, br#"{"data":[]}"#),
            Some(ErrorCategory::UnexpectedBody)
        );
        assert_eq!(
            crate::client::api_of_endpoint("/v1/embeddings"),
            Some(Api::Embeddings)
        );
        assert_eq!(crate::client::api_of_endpoint("/rerank"), Some(Api::Rerank));
        assert_eq!(
            crate::client::api_of_endpoint("/v1/score"),
            Some(Api::Score)
        );
    }

    /// Usage of 2^64−1 or 1e19 made 3.2e19 tokens a second with no warning
    /// (the chat reader's check was missing here): set aside with a note.
    #[test]
    fn an_absurd_pooled_usage_is_set_aside_with_a_note() {
        for (usage, says) in [
            (
                "18446744073709551615",
                "more tokens than one request can have",
            ),
            ("1e19", "not a whole number of tokens"),
            ("-3", "not a whole number of tokens"),
            ("\"12\"", "not a number"),
        ] {
            let body = format!(
                r#"{{"data":[{{"embedding":[0.1]}}],"usage":{{"prompt_tokens":{usage}}}}}"#
            );
            let u = pooled_answer(Api::Embeddings, body.as_bytes())
                .ok()
                .unwrap();
            assert_eq!(u.tokens, None, "{usage}");
            assert!(u.note.as_deref().unwrap().contains(says), "{usage}: {u:?}");
        }
        let body = br#"{"results":[{"index":0}],"usage":{"prompt_tokens":null,"total_tokens":9}}"#;
        let u = pooled_answer(Api::Rerank, body).ok().unwrap();
        assert_eq!((u.tokens, u.note), (Some(9), None));
    }
}
