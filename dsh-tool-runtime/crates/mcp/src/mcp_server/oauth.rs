//! Streamable HTTP as an OAuth 2.1 protected resource: JWT access tokens (RFC 9068) checked
//! against the authorization server's published keys, the protected-resource metadata of
//! RFC 9728, and the challenges of RFC 6750 as the MCP authorization specification (2025-06-18
//! on) asks for them.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde::Deserialize;
use url::Url;

use super::McpServeError;
use super::oauth_keys::{Found, IssuerKeys, NO_TLS};
use super::response::Body;
use crate::durable::Principal;

/// The well-known path of protected-resource metadata (RFC 9728 §3).
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// A served MCP server as an OAuth 2.1 protected resource
/// ([`McpHttpAuth::OAuth`](super::McpHttpAuth::OAuth)): every request carries `Authorization:
/// Bearer <JWT access token>` issued for it by the authorization server `issuer`.
///
/// A token passes when (RFC 9068, RFC 7519):
/// - its header's `typ` is `at+jwt` (or `application/at+jwt`, any case), as RFC 9068 §4 asks,
///   so that an ID token or another JWT the issuer signed for this audience is not taken for
///   an access token; [`McpOAuthResource::accept_plain_jwt`] also lets `JWT` and no `typ`
///   through, for issuers that do not mark their access tokens;
/// - its signature verifies with a key of the issuer's JSON Web Key Set, found by the header's
///   `kid`, with an asymmetric algorithm (RS256/384/512, PS256/384/512, ES256/384, EdDSA; a
///   key's own `alg`, when it names one, must match). The set comes from
///   [`McpOAuthResource::jwks_uri`], else from the `jwks_uri` of the issuer's metadata (RFC
///   8414 `/.well-known/oauth-authorization-server`, then OpenID Connect
///   `/.well-known/openid-configuration`). It is fetched on the first request, again after 10
///   minutes, and again when a token names an unknown key (at most once per 30 s); each
///   document is read up to 256 KiB, each fetch within 10 s, and at most 64 keys are kept.
///   One fetch runs at a time, outside any lock: a request whose key is cached is answered
///   from the cache meanwhile, so a token naming a made-up key while the issuer is slow delays
///   only itself. After a failed fetch none starts for 5 s, doubled after each failure in a
///   row up to 5 minutes (each failure logged once); an issuer's metadata is read from the
///   next well-known place only when the first answers `404`;
/// - `iss` equals `issuer` exactly;
/// - `aud` (a string or an array) holds `resource` exactly (RFC 8707: the token was asked
///   for this server);
/// - `exp` is present and not past, `nbf` (when present) not ahead, each give or take
///   [`McpOAuthResource::leeway`];
/// - its scopes (`scope`, space-separated, or `scp`, an array or a string) include every one
///   of [`McpOAuthResource::scopes`].
///
/// Answers: without a token, `401` with `WWW-Authenticate: Bearer resource_metadata="<URL>"`
/// (and `scope="…"` when scopes are required); with a token that fails, `401` with `Bearer
/// error="invalid_token", error_description="…", resource_metadata="…"`; with a valid token
/// lacking a scope, `403` with `Bearer error="insufficient_scope", scope="<all required>",
/// resource_metadata="…"`; when the issuer's keys cannot be fetched, `503`, each failed fetch
/// logged as a `tracing` warning saying why. The RFC 9728
/// metadata document is served without authentication at
/// [`McpOAuthResource::metadata_url`] and at `/.well-known/oauth-protected-resource`. Tokens are
/// never logged.
///
/// ```
/// use dsh_tool_mcp::mcp_server::{McpHttpAuth, McpOAuthResource};
///
/// let auth = McpHttpAuth::OAuth(
///     McpOAuthResource::new("https://login.example.com", "https://tools.example.com/mcp")
///         .jwks_uri("http://127.0.0.1:8081/keys")
///         .scope("tools.call"),
/// );
/// # let _ = auth;
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpOAuthResource {
    /// The authorization server's issuer identifier, as tokens carry it in `iss` (an `http`
    /// or `https` URL). The keys are read over plain `http` (no TLS is built in): an `https`
    /// issuer needs an `http` [`McpOAuthResource::jwks_uri`], e.g. a TLS-terminating proxy on
    /// loopback.
    pub issuer: String,
    /// This server's canonical URL as clients reach it (e.g. `https://tools.example.com/mcp`):
    /// the audience tokens must name and the `resource` of the metadata.
    pub resource: String,
    /// Where the issuer's JSON Web Key Set is read; `None` (the default) discovers it from the
    /// issuer's metadata.
    pub jwks_uri: Option<String>,
    /// Scopes every token must hold (default: none); announced as `scopes_supported`.
    pub scopes: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf` (default 30 s; whole seconds count).
    pub leeway: Duration,
    /// Accepts tokens whose `typ` is `JWT` or absent besides `at+jwt` (default `false`): for
    /// authorization servers that do not follow RFC 9068 §2.1 in typing their access tokens.
    /// Then an ID token of the same issuer with this server as its audience passes too.
    pub accept_plain_jwt: bool,
}

impl McpOAuthResource {
    /// Tokens of `issuer` for the resource `resource`, no scope required, keys discovered.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> McpOAuthResource {
        McpOAuthResource {
            issuer: issuer.into(),
            resource: resource.into(),
            jwks_uri: None,
            scopes: Vec::new(),
            leeway: Duration::from_secs(30),
            accept_plain_jwt: false,
        }
    }

    /// Sets [`McpOAuthResource::jwks_uri`].
    pub fn jwks_uri(mut self, uri: impl Into<String>) -> Self {
        self.jwks_uri = Some(uri.into());
        self
    }

    /// Adds a required scope to [`McpOAuthResource::scopes`].
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scopes.push(scope.into());
        self
    }

    /// Sets [`McpOAuthResource::leeway`].
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Sets [`McpOAuthResource::accept_plain_jwt`].
    pub fn accept_plain_jwt(mut self, accept: bool) -> Self {
        self.accept_plain_jwt = accept;
        self
    }

    /// Where the protected-resource metadata of [`McpOAuthResource::resource`] is served (RFC
    /// 9728 §3.1): the well-known path inserted between its host and its path, e.g.
    /// `https://tools.example.com/.well-known/oauth-protected-resource/mcp`; `None` when the
    /// resource is not a URL.
    pub fn metadata_url(&self) -> Option<String> {
        let resource = Url::parse(&self.resource).ok()?;
        let path = resource.path().trim_end_matches('/');
        let mut url = resource.clone();
        url.set_path(&format!("{METADATA_PATH}{path}"));
        url.set_query(None);
        Some(url.to_string())
    }

    /// Whether these settings can protect a server.
    ///
    /// # Errors
    /// [`McpServeError::InvalidOAuth`] naming the setting: `issuer`, `resource` or `jwks_uri`
    /// not an absolute `http`/`https` URL (the resource also without a fragment), a scope
    /// that is not an RFC 6749 scope token (printable ASCII but space, `"` and `\`), or keys
    /// that would be read over `https` (a `jwks_uri`, or without one the issuer's metadata):
    /// the HTTP client is built without TLS, so they could never be fetched.
    pub fn check(&self) -> Result<(), McpServeError> {
        let invalid = |what: String| Err(McpServeError::InvalidOAuth(what));
        let web_url = |text: &str| {
            Url::parse(text)
                .ok()
                .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
        };
        match web_url(&self.issuer) {
            None => return invalid(format!("issuer {:?} is not an http(s) URL", self.issuer)),
            Some(url) if url.scheme() == "https" && self.jwks_uri.is_none() => {
                return invalid(format!("issuer {:?}: {NO_TLS}", self.issuer));
            }
            Some(_) => {}
        }
        match web_url(&self.resource) {
            Some(url) if url.fragment().is_none() => {}
            _ => {
                return invalid(format!(
                    "resource {:?} is not an http(s) URL without a fragment",
                    self.resource
                ));
            }
        }
        if let Some(jwks) = &self.jwks_uri {
            match web_url(jwks) {
                None => return invalid(format!("jwks_uri {jwks:?} is not an http(s) URL")),
                Some(url) if url.scheme() == "https" => {
                    return invalid(format!("jwks_uri {jwks:?}: {NO_TLS}"));
                }
                Some(_) => {}
            }
        }
        for scope in &self.scopes {
            let token = !scope.is_empty()
                && scope
                    .bytes()
                    .all(|byte| matches!(byte, 0x21 | 0x23..=0x5B | 0x5D..=0x7E));
            if !token {
                return invalid(format!("scope {scope:?} is not an RFC 6749 scope token"));
            }
        }
        Ok(())
    }
}

/// The claims read from a token beyond those `jsonwebtoken` checks.
#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    scope: Option<String>,
    scp: Option<Scopes>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Scopes {
    List(Vec<String>),
    Text(String),
}

impl Claims {
    fn scopes(&self) -> HashSet<&str> {
        let mut held: HashSet<&str> = HashSet::new();
        if let Some(scope) = &self.scope {
            held.extend(scope.split_whitespace());
        }
        match &self.scp {
            Some(Scopes::List(list)) => held.extend(list.iter().map(String::as_str)),
            Some(Scopes::Text(text)) => held.extend(text.split_whitespace()),
            None => {}
        }
        held
    }
}

/// Why a request did not pass.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Passes, for the token's subject: its `sub` as its issuer's.
    Pass(Principal),
    /// `401 invalid_token`, with a description safe to show (it never holds the token).
    Invalid(&'static str),
    /// `403 insufficient_scope`.
    InsufficientScope,
    /// The keys could not be had: `503`.
    KeysUnavailable,
}

/// The check of every request under [`McpOAuthResource`], shared by all connections.
pub(crate) struct Verifier {
    config: McpOAuthResource,
    keys: IssuerKeys,
    /// `resource_metadata="…"`, quoted, ready for every challenge.
    metadata_param: String,
    /// The metadata document, served as it is.
    metadata: Bytes,
    /// The paths the metadata is served at.
    metadata_paths: [String; 2],
}

impl Verifier {
    /// # Errors
    /// As [`McpOAuthResource::check`].
    pub(crate) fn new(config: &McpOAuthResource) -> Result<Verifier, McpServeError> {
        config.check()?;
        let metadata_url = config.metadata_url().unwrap_or_default();
        let metadata_path = Url::parse(&metadata_url)
            .map(|url| url.path().to_owned())
            .unwrap_or_default();
        let mut document = serde_json::json!({
            "resource": config.resource,
            "authorization_servers": [config.issuer],
            "bearer_methods_supported": ["header"],
        });
        if !config.scopes.is_empty() {
            document["scopes_supported"] = serde_json::json!(config.scopes);
        }
        Ok(Verifier {
            config: config.clone(),
            keys: IssuerKeys::new(&config.issuer, config.jwks_uri.as_deref())?,
            metadata_param: format!("resource_metadata=\"{metadata_url}\""),
            metadata: Bytes::from(document.to_string()),
            metadata_paths: [METADATA_PATH.to_owned(), metadata_path],
        })
    }

    /// The metadata document when `path` is where it is served.
    pub(crate) fn metadata_response(&self, path: &str) -> Option<Response<Body>> {
        if !self.metadata_paths.iter().any(|served| served == path) {
            return None;
        }
        let mut response = Response::new(Full::new(self.metadata.clone()).boxed());
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=3600"));
        Some(response)
    }

    /// The token's subject when a request that carries `token` (`None`: no bearer token) may
    /// pass, else the whole answer to it.
    pub(crate) async fn admit(&self, token: Option<&[u8]>) -> Result<Principal, Response<Body>> {
        let Some(token) = token else {
            let mut challenge = format!("Bearer {}", self.metadata_param);
            if !self.config.scopes.is_empty() {
                let _ = write!(challenge, ", scope=\"{}\"", self.config.scopes.join(" "));
            }
            return Err(answer(
                StatusCode::UNAUTHORIZED,
                &challenge,
                "Unauthorized: send an OAuth access token as \"Authorization: Bearer <token>\"\n",
            ));
        };
        match self.verify(token).await {
            Verdict::Pass(subject) => Ok(subject),
            Verdict::Invalid(why) => Err(answer(
                StatusCode::UNAUTHORIZED,
                &format!(
                    "Bearer error=\"invalid_token\", error_description=\"{why}\", {}",
                    self.metadata_param
                ),
                &format!("Unauthorized: {why}\n"),
            )),
            Verdict::InsufficientScope => {
                let scope = self.config.scopes.join(" ");
                Err(answer(
                    StatusCode::FORBIDDEN,
                    &format!(
                        "Bearer error=\"insufficient_scope\", scope=\"{scope}\", \
                         error_description=\"the token lacks a required scope\", {}",
                        self.metadata_param
                    ),
                    &format!("Forbidden: the token must hold the scopes \"{scope}\"\n"),
                ))
            }
            Verdict::KeysUnavailable => Err(answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "",
                "Service Unavailable: the authorization server's keys cannot be fetched; retry later\n",
            )),
        }
    }

    /// Checks one token as [`McpOAuthResource`] describes.
    pub(crate) async fn verify(&self, token: &[u8]) -> Verdict {
        let Ok(header) = jsonwebtoken::decode_header(token) else {
            return Verdict::Invalid("the token is not a JWT");
        };
        if !asymmetric(header.alg) {
            return Verdict::Invalid("the token's algorithm is not accepted");
        }
        if !typed_as_access_token(header.typ.as_deref(), self.config.accept_plain_jwt) {
            return Verdict::Invalid("the token is not typed as an access token (typ at+jwt)");
        }
        let key = match self.keys.key(header.kid.as_deref()).await {
            Found::Key(key) => key,
            Found::Unknown => return Verdict::Invalid("the token's signing key is unknown"),
            Found::Unavailable => return Verdict::KeysUnavailable,
        };
        if key
            .common
            .key_algorithm
            .is_some_and(|alg| Algorithm::try_from(alg).ok() != Some(header.alg))
        {
            return Verdict::Invalid("the token's algorithm does not match its key");
        }
        let Ok(decoding) = DecodingKey::from_jwk(&key) else {
            return Verdict::Invalid("the token's signing key is unusable");
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        let claims = match jsonwebtoken::decode::<Claims>(token, &decoding, &validation) {
            Ok(data) => data.claims,
            Err(error) => {
                return Verdict::Invalid(match error.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::ImmatureSignature => "the token is not valid yet",
                    ErrorKind::InvalidIssuer => "the token is from another issuer",
                    ErrorKind::InvalidAudience => "the token is not for this resource",
                    ErrorKind::InvalidSignature => "the token's signature does not verify",
                    ErrorKind::MissingRequiredClaim(_) => "the token lacks exp, iss or aud",
                    ErrorKind::InvalidAlgorithm => "the token's algorithm does not match its key",
                    _ => "the token is malformed",
                });
            }
        };
        // RFC 9068 §2.2: `sub` is required; decisions over MCP are bound to it.
        let Some(subject) = claims.sub.as_deref().filter(|sub| !sub.is_empty()) else {
            return Verdict::Invalid("the token has no subject (sub)");
        };
        let held = claims.scopes();
        if self
            .config
            .scopes
            .iter()
            .all(|scope| held.contains(scope.as_str()))
        {
            Verdict::Pass(Principal::oauth_subject(&self.config.issuer, subject))
        } else {
            Verdict::InsufficientScope
        }
    }
}

/// Whether a token's `typ` marks it as a JWT access token (RFC 9068 §4: `at+jwt`, or the
/// media type `application/at+jwt` of which RFC 7515 §4.1.9 lets the prefix go, compared
/// without regard to case); `JWT` and no `typ` too when `plain` allows them.
fn typed_as_access_token(typ: Option<&str>, plain: bool) -> bool {
    let Some(typ) = typ else {
        return plain;
    };
    let short = match typ.split_at_checked("application/".len()) {
        Some((prefix, rest)) if prefix.eq_ignore_ascii_case("application/") => rest,
        _ => typ,
    };
    short.eq_ignore_ascii_case("at+jwt") || (plain && short.eq_ignore_ascii_case("jwt"))
}

/// The signature algorithms accepted: asymmetric only, so that no public key can be used as
/// an HMAC secret.
fn asymmetric(alg: Algorithm) -> bool {
    !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

fn answer(status: StatusCode, challenge: &str, text: &str) -> Response<Body> {
    super::response::refusal_response(status, challenge, text)
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod issuer_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp_server::oauth_keys::metadata_candidates;

    #[test]
    fn metadata_urls_follow_rfc_9728_and_rfc_8414() {
        let config = McpOAuthResource::new("http://as.example", "https://tools.example/mcp");
        assert_eq!(
            config.metadata_url().as_deref(),
            Some("https://tools.example/.well-known/oauth-protected-resource/mcp")
        );
        let root = McpOAuthResource::new("http://as.example", "https://tools.example:8443/");
        assert_eq!(
            root.metadata_url().as_deref(),
            Some("https://tools.example:8443/.well-known/oauth-protected-resource")
        );
        assert_eq!(
            metadata_candidates("https://as.example/tenant/1"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant/1",
                "https://as.example/.well-known/openid-configuration/tenant/1",
                "https://as.example/tenant/1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_candidates("http://127.0.0.1:9000"),
            [
                "http://127.0.0.1:9000/.well-known/oauth-authorization-server",
                "http://127.0.0.1:9000/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn settings_are_checked_before_serving() {
        let good = McpOAuthResource::new("http://127.0.0.1:9000", "https://tools.example/mcp")
            .scope("tools:call")
            .jwks_uri("http://127.0.0.1:9000/keys");
        assert!(good.check().is_ok());
        // An https issuer is fine when its keys are read over http.
        let keys_over_http =
            McpOAuthResource::new("https://as.example", "https://tools.example/mcp")
                .jwks_uri("http://127.0.0.1:9000/keys");
        assert!(keys_over_http.check().is_ok());
        for https in [
            McpOAuthResource::new("https://as.example", "https://tools.example/mcp"),
            good.clone().jwks_uri("https://as.example/keys"),
        ] {
            assert!(
                matches!(https.check(), Err(McpServeError::InvalidOAuth(why)) if why.contains("https needs TLS, which this build does not include")),
                "{https:?}"
            );
        }
        for bad in [
            McpOAuthResource::new("as.example", "https://tools.example/mcp"),
            McpOAuthResource::new("http://as.example", "ftp://tools.example/mcp"),
            McpOAuthResource::new("http://as.example", "https://tools.example/mcp#x"),
            good.clone().scope("two words"),
            good.clone().scope(""),
            good.clone().jwks_uri("keys.json"),
        ] {
            assert!(
                matches!(bad.check(), Err(McpServeError::InvalidOAuth(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn scopes_are_read_from_scope_and_scp() {
        let claims: Claims =
            serde_json::from_value(serde_json::json!({"scope": "a b", "scp": ["c"]})).unwrap();
        assert_eq!(claims.scopes(), HashSet::from(["a", "b", "c"]));
        let claims: Claims = serde_json::from_value(serde_json::json!({"scp": "d e"})).unwrap();
        assert_eq!(claims.scopes(), HashSet::from(["d", "e"]));
    }
}
