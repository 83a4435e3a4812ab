//! The one redirect policy of every request llmsweep makes: the load
//! client's, the pre-flight's `/v1/models`, and the server-metrics scraper's.
//!
//! reqwest never follows a redirect itself (it would carry headers, and a
//! `Referer` naming the old URL with its query, to wherever it is sent).
//! [`send`] follows one only as `--follow-redirects` allows; the origin's
//! own headers (API key, `--header` values) go only to that origin, other
//! origins get the plain headers; no request carries a `Referer`.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, LOCATION};
use reqwest::{Method, Url};

use super::config::FollowRedirects;
use super::trace::TraceIds;

/// At most this many redirects per request, when following them.
pub const MAX_REDIRECTS: usize = 10;

/// An HTTP client builder that follows no redirect and sends no `Referer`:
/// every client llmsweep builds starts here.
pub fn builder(insecure: bool) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .referer(false)
        .danger_accept_invalid_certs(insecure)
}

/// Where a request may go, and what it carries there.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    /// The origin the request is meant for.
    pub origin: &'a Url,
    /// Headers for that origin (credentials among them).
    pub own: &'a HeaderMap,
    /// Headers for any other origin (nothing secret).
    pub plain: &'a HeaderMap,
    pub follow: FollowRedirects,
}

/// Why [`send`] has no response.
#[derive(Debug)]
pub enum Fail {
    Http(reqwest::Error),
    /// A redirect the policy does not follow; the message names its target.
    Refused {
        code: u16,
        message: String,
    },
}

/// Sends a request, following redirects as the route allows, with a
/// request's trace ids, if any, as headers (no secret: sent to every origin
/// a redirect leads to).
pub async fn send(
    http: &reqwest::Client,
    route: Route<'_>,
    method: Method,
    first: &Url,
    body: Option<&Bytes>,
    timeout: Option<Duration>,
    ids: Option<&TraceIds>,
) -> Result<reqwest::Response, Fail> {
    let mut url = first.clone();
    let mut hops = 0;
    loop {
        let headers = if same_origin(&url, route.origin) {
            route.own
        } else {
            route.plain
        };
        let mut rb = http
            .request(method.clone(), url.clone())
            .headers(headers.clone());
        // Made for each hop and moved in: no copy of a header value.
        for (name, value) in ids.iter().flat_map(|ids| ids.headers()) {
            rb = rb.header(name, value);
        }
        if let Some(b) = body {
            rb = rb.body(b.clone());
        }
        if let Some(t) = timeout {
            rb = rb.timeout(t);
        }
        let resp = rb.send().await.map_err(Fail::Http)?;
        let status = resp.status();
        if !status.is_redirection() {
            return Ok(resp);
        }
        let code = status.as_u16();
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_string);
        let next = location.as_deref().and_then(|l| url.join(l).ok());
        let refuse = |why: &str| Fail::Refused {
            code,
            message: format!(
                "HTTP {status} to {}: {why}",
                location.as_deref().unwrap_or("(no Location header)")
            ),
        };
        let Some(next) = next else {
            return Err(refuse("no usable Location, not followed"));
        };
        let allowed = match route.follow {
            FollowRedirects::None => {
                return Err(refuse(
                    "not followed (--follow-redirects same-origin or any to follow)",
                ))
            }
            FollowRedirects::SameOrigin => same_origin(&next, route.origin),
            FollowRedirects::Any => true,
        };
        if !allowed {
            return Err(refuse(
                "another origin, not followed (--follow-redirects any to follow)",
            ));
        }
        hops += 1;
        if hops > MAX_REDIRECTS {
            return Err(refuse(&format!("more than {MAX_REDIRECTS} redirects")));
        }
        url = next;
    }
}

/// Same scheme, host and port.
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}
