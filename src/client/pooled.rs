//! A pooling API's whole answer (embeddings, rerank, score).

use super::chunk::{error_message, short};
use super::errors::ErrorCategory;
use super::record::{errored, RequestOutcome};
use crate::types::Api;

/// A pooling API's answer: its results (`data` for embeddings and score,
/// `results` for rerank) and the prompt tokens its usage gives. An error
/// object is an `error_event`; an answer without results `unexpected_body`;
/// a body that is not JSON `invalid_json`.
pub(super) fn pooled_answer(api: Api, body: &[u8]) -> Result<Option<u64>, RequestOutcome> {
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
    let usage = v.get("usage");
    Ok(usage
        .and_then(|u| u.get("prompt_tokens").or_else(|| u.get("total_tokens")))
        .and_then(|n| n.as_u64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_answers_are_results_or_a_categorised_failure() {
        let ok =
            br#"{"data":[{"embedding":[0.1]}],"usage":{"prompt_tokens":12,"total_tokens":12}}"#;
        assert_eq!(pooled_answer(Api::Embeddings, ok).ok(), Some(Some(12)));
        let rerank =
            br#"{"results":[{"index":0,"relevance_score":0.5}],"usage":{"total_tokens":7}}"#;
        assert_eq!(pooled_answer(Api::Rerank, rerank).ok(), Some(Some(7)));
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
}
