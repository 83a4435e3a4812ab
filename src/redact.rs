//! Keeping credentials out of every output.
//!
//! A run knows four kinds of secret: the API key, the values of `--header`
//! flags, a password in a URL (`http://user:pass@host`), and the values of a
//! URL's query (`?token=…`). Each is
//! replaced by `***` wherever it could surface: the target URL as shown,
//! error messages (a server may echo what it was sent), the pre-flight error,
//! reports and the checkpoint.
//!
//! The client registers its secrets here once ([`register`]); any output
//! path can then [`scrub`] a string. [`redact_url`] needs no registration:
//! it hides the password of any URL it is given.

use std::sync::RwLock;

use base64::Engine as _;

/// What replaces a secret.
pub const MASK: &str = "***";

/// Secrets shorter than this are not searched for: masking every `a` or `1`
/// in a report would destroy it and protect nothing.
const MIN_SECRET_LEN: usize = 3;

/// A set of secret strings and the forms they may take on the wire.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Redactor {
    /// Longest first, so that a secret containing another is masked whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// Adds a secret (and, for URL passwords, its percent-decoded form).
    pub fn add(&mut self, secret: &str) {
        let s = secret.trim();
        if s.len() < MIN_SECRET_LEN || s == MASK || self.secrets.iter().any(|x| x == s) {
            return;
        }
        self.secrets.push(s.to_string());
        self.secrets
            .sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    }

    /// Adds the credentials of a URL's userinfo: the password in every form a
    /// server could echo it (raw, percent-decoded, and the Basic credential).
    pub fn add_url(&mut self, url: &str) {
        let Ok(u) = reqwest::Url::parse(url) else {
            return;
        };
        // Query values: a server may echo them without the URL around them.
        for (_, v) in u.query_pairs() {
            self.add(&v);
        }
        let Some(pass) = u.password() else {
            return;
        };
        self.add(pass);
        let decoded = percent_decode(pass);
        self.add(&decoded);
        let basic = format!("{}:{}", percent_decode(u.username()), decoded);
        self.add(&base64::engine::general_purpose::STANDARD.encode(basic));
    }

    /// Adds a header value; for `Bearer x` / `Basic x` also the credential alone.
    pub fn add_header_value(&mut self, value: &str) {
        self.add(value);
        if let Some((scheme, cred)) = value.trim().split_once(' ') {
            if matches!(
                scheme.to_ascii_lowercase().as_str(),
                "bearer" | "basic" | "token" | "apikey"
            ) {
                self.add(cred);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `s` with every known secret and every URL password masked.
    pub fn redact(&self, s: &str) -> String {
        let mut out = redact_urls_in(s);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }

    /// Every secret this redactor masks (for tests and merging).
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }
}

static GLOBAL: RwLock<Redactor> = RwLock::new(Redactor {
    secrets: Vec::new(),
});

/// Makes `r`'s secrets known to [`scrub`] for the rest of the process.
pub fn register(r: &Redactor) {
    if let Ok(mut g) = GLOBAL.write() {
        for s in r.secrets() {
            g.add(s);
        }
    }
}

/// `s` with every registered secret and every URL password masked.
pub fn scrub(s: &str) -> String {
    match GLOBAL.read() {
        Ok(g) => g.redact(s),
        Err(_) => redact_urls_in(s),
    }
}

/// A URL with its password masked: `http://user:***@host/`. Strings that are
/// not URLs are returned with any embedded URL password masked.
pub fn redact_url(url: &str) -> String {
    redact_urls_in(url)
}

/// Masks the password of every `scheme://user:pass@` in free text, without
/// parsing (messages quote URLs in all sorts of ways).
fn redact_urls_in(s: &str) -> String {
    if !s.contains("://") {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first '/', '?', '#', whitespace or quote.
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.split_once(':') {
                    Some((user, _pass)) => {
                        out.push_str(user);
                        out.push(':');
                        out.push_str(MASK);
                    }
                    // A lone user name can be a token too (`https://TOKEN@host`).
                    None if userinfo.len() >= 16 => out.push_str(MASK),
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
        // The path is kept; the values of the query are masked (`?token=…`,
        // `?sig=…`: query strings carry credentials as often as not).
        let stop = |c: char| matches!(c, '"' | '\'' | '<' | '>' | '`' | '#') || c.is_whitespace();
        let path_end = rest
            .find(|c: char| c == '?' || stop(c))
            .unwrap_or(rest.len());
        out.push_str(&rest[..path_end]);
        rest = &rest[path_end..];
        if let Some(query) = rest.strip_prefix('?') {
            let q_end = query.find(stop).unwrap_or(query.len());
            out.push('?');
            out.push_str(&mask_query(&query[..q_end]));
            rest = &query[q_end..];
        }
    }
    out.push_str(rest);
    out
}

/// `a=1&b=2` → `a=***&b=***` (names kept, so a reader knows what was there).
fn mask_query(q: &str) -> String {
    q.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !v.is_empty() => format!("{k}={MASK}"),
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_masked_and_their_names_kept() {
        assert_eq!(
            redact_url("http://h:9/metrics?token=mqsecret&x=1"),
            "http://h:9/metrics?token=***&x=***"
        );
        assert_eq!(
            redact_url("GET http://u:p@h/v1/models?api_key=k9: 404 \"http://h/?a=b\""),
            // (a value runs to the next space or quote: the colon goes with it)
            "GET http://u:***@h/v1/models?api_key=*** 404 \"http://h/?a=***\""
        );
        // No query, or an empty value: nothing to mask.
        assert_eq!(redact_url("http://h/x?flag"), "http://h/x?flag");
        assert_eq!(redact_url("http://h/x#frag"), "http://h/x#frag");
        let mut r = Redactor::default();
        r.add_url("http://h/metrics?token=mqsecret");
        assert_eq!(
            r.redact("the server said: bad token mqsecret"),
            "the server said: bad token ***"
        );
    }

    #[test]
    fn url_passwords_are_masked_and_the_user_kept() {
        assert_eq!(
            redact_url("http://user:s3cret@h:8000/v1"),
            "http://user:***@h:8000/v1"
        );
        assert_eq!(redact_url("http://h:8000"), "http://h:8000");
        assert_eq!(
            redact_url("cannot reach https://a:b%40c@gw.example/x: refused"),
            "cannot reach https://a:***@gw.example/x: refused"
        );
        // Two URLs in one message; an @ in the path is not userinfo.
        assert_eq!(
            redact_url("http://u:p1@a/ then http://b/@x"),
            "http://u:***@a/ then http://b/@x"
        );
        // A long bare user name is a token.
        assert_eq!(
            redact_url("https://ghp_abcdefghijklmnop@h/"),
            "https://***@h/"
        );
    }

    #[test]
    fn every_form_of_a_secret_is_masked() {
        let mut r = Redactor::default();
        r.add_url("http://alice:p%40ss-word@h:1");
        r.add_header_value("Bearer sk-live-123456");
        r.add("hunter2");
        let basic = base64::engine::general_purpose::STANDARD.encode("alice:p@ss-word");
        let text = format!(
            "echo: p%40ss-word p@ss-word Basic {basic} sk-live-123456 hunter2 http://alice:p%40ss-word@h:1/v1"
        );
        let out = r.redact(&text);
        for s in [
            "p%40ss-word",
            "p@ss-word",
            basic.as_str(),
            "sk-live-123456",
            "hunter2",
        ] {
            assert!(!out.contains(s), "{s} leaked in {out}");
        }
        assert!(out.contains("http://alice:***@h:1/v1"), "{out}");
    }

    #[test]
    fn tiny_secrets_are_not_searched_for() {
        let mut r = Redactor::default();
        r.add("a");
        r.add("");
        assert!(r.is_empty());
        assert_eq!(r.redact("a cat"), "a cat");
    }

    #[test]
    fn longer_secrets_are_masked_before_their_parts() {
        let mut r = Redactor::default();
        r.add("abc");
        r.add("abcdef");
        assert_eq!(r.redact("x abcdef y abc"), "x *** y ***");
    }

    #[test]
    fn registered_secrets_are_scrubbed_process_wide() {
        let mut r = Redactor::default();
        r.add("registered-secret-xyz");
        register(&r);
        assert_eq!(scrub("k=registered-secret-xyz"), "k=***");
    }

    #[test]
    fn percent_decoding_keeps_bad_escapes() {
        assert_eq!(percent_decode("a%41%zz%4"), "aA%zz%4");
    }
}
