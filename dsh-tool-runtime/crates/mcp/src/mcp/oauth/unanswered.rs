//! A token request or metadata discovery that got no answer is sent once more.
//!
//! Every OAuth request goes on a new connection (`http_client`), so a server closing a
//! kept-alive connection as a request arrives no longer fails one; a connection can still be
//! reset or closed before its answer (a proxy dropping it, a server restarting). hyper does not
//! send such a request again because it was sent. Between a registration and its code's
//! exchange lies the person's authorization, so the exchange is the request most exposed.
//!
//! The retry opens a new connection. It is safe for both grants: a client-credentials request
//! has no effect beyond the token it answers, and an authorization code the server did receive
//! is refused the second time (RFC 6749 §4.1.2, the tokens of a reused code revoked), so a
//! retry never yields two grants.
//!
//! Metadata discovery meets the same failures (the connection reset by peer, or closed before
//! its answer). Its requests are GETs, idempotent (RFC 9110 §9.2.2), so the whole discovery is
//! run once more after one of them got no answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::transport::auth::{AuthError, StateStore, StoredAuthorizationState};

/// What oauth2 reports when the HTTP client returned no response at all (its
/// `RequestTokenError::Request`): the connection failed, closed before an answer, or timed out.
/// An answer the server sent, even an error, reads otherwise.
const NO_ANSWER: &str = "Request failed";

/// `true` when `error` is a token request that got no answer from the server.
pub(crate) fn unanswered(error: &AuthError) -> bool {
    match error {
        AuthError::TokenExchangeFailed(why) => why == NO_ANSWER,
        AuthError::ClientCredentialsError(why) => {
            why.strip_prefix("Token exchange failed: ") == Some(NO_ANSWER)
        }
        _ => false,
    }
}

/// `true` when `error` is a metadata discovery request that got no answer: its connection
/// failed, was reset or closed before the whole answer came (reqwest reports a body that broke
/// off while read as a decoding error around the body error). An answer the server sent (a
/// status, a body that did not parse) or a timeout (a second one would double the bound) is
/// not.
pub(crate) fn discovery_unanswered(error: &AuthError) -> bool {
    let broke_off = |error: &reqwest::Error| {
        error.is_decode()
            && std::error::Error::source(error)
                .and_then(|source| source.downcast_ref::<reqwest::Error>())
                .is_some_and(reqwest::Error::is_body)
    };
    match error {
        AuthError::DiscoveryRequestFailed { source, .. } => source
            .downcast_ref::<reqwest::Error>()
            .is_some_and(|error| {
                (error.is_connect() || error.is_request() || error.is_body() || broke_off(error))
                    && !error.is_timeout()
            }),
        _ => false,
    }
}

/// `discover` once more when its first run got no answer (see [`discovery_unanswered`]).
pub(crate) async fn discovered<T, F, Fut>(mut discover: F) -> Result<T, AuthError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, AuthError>>,
{
    match discover().await {
        Err(error) if discovery_unanswered(&error) => discover().await,
        answer => answer,
    }
}

/// The login's pending authorization states (PKCE verifier, requested scopes, expected
/// issuer), by CSRF token. rmcp deletes a state as it sends the code's exchange; the state is
/// kept aside then, and [`RetainedStates::restore`] puts it back for the one retry of an
/// exchange that got no answer. Only the login's own code calls `restore`, with the CSRF token
/// of the redirect it is exchanging: a state is never restored for another redirect.
#[derive(Clone, Default)]
pub(crate) struct RetainedStates {
    inner: Arc<Mutex<States>>,
}

#[derive(Default)]
struct States {
    pending: HashMap<String, StoredAuthorizationState>,
    /// The states rmcp deleted, at most one per login in flight: [`RetainedStates::settle`]
    /// drops each once its exchange is over.
    consumed: HashMap<String, StoredAuthorizationState>,
}

impl RetainedStates {
    fn states(&self) -> std::sync::MutexGuard<'_, States> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the state of `csrf_token` pending again after its exchange got no answer; `false`
    /// when there is none to restore.
    pub(crate) fn restore(&self, csrf_token: &str) -> bool {
        let mut states = self.states();
        match states.consumed.remove(csrf_token) {
            Some(state) => {
                states.pending.insert(csrf_token.to_owned(), state);
                true
            }
            None => false,
        }
    }

    /// The exchange of `csrf_token` is over: its state is gone for good.
    pub(crate) fn settle(&self, csrf_token: &str) {
        let mut states = self.states();
        states.consumed.remove(csrf_token);
        states.pending.remove(csrf_token);
    }
}

#[async_trait::async_trait]
impl StateStore for RetainedStates {
    async fn save(
        &self,
        csrf_token: &str,
        state: StoredAuthorizationState,
    ) -> Result<(), AuthError> {
        self.states().pending.insert(csrf_token.to_owned(), state);
        Ok(())
    }

    async fn load(&self, csrf_token: &str) -> Result<Option<StoredAuthorizationState>, AuthError> {
        Ok(self.states().pending.get(csrf_token).cloned())
    }

    async fn delete(&self, csrf_token: &str) -> Result<(), AuthError> {
        let mut states = self.states();
        if let Some(state) = states.pending.remove(csrf_token) {
            states.consumed.insert(csrf_token.to_owned(), state);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_request_without_an_answer_is_unanswered() {
        assert!(unanswered(&AuthError::TokenExchangeFailed(
            "Request failed".into()
        )));
        assert!(unanswered(&AuthError::ClientCredentialsError(
            "Token exchange failed: Request failed".into()
        )));
        // The server answered: an error response, or one that did not parse.
        assert!(!unanswered(&AuthError::TokenExchangeFailed(
            "Server returned error response: invalid_grant".into()
        )));
        assert!(!unanswered(&AuthError::ClientCredentialsError(
            "Token exchange parse error: expected value".into()
        )));
        assert!(!unanswered(&AuthError::AuthorizationRequired));
    }

    #[tokio::test]
    async fn a_consumed_state_comes_back_once_and_only_for_its_own_token() {
        let states = RetainedStates::default();
        let state = StoredAuthorizationState::new(
            &oauth2::PkceCodeVerifier::new("v".repeat(43)),
            &oauth2::CsrfToken::new("csrf".into()),
        );
        states.save("csrf", state).await.unwrap();
        states.delete("csrf").await.unwrap();
        assert!(states.load("csrf").await.unwrap().is_none());
        assert!(
            !states.restore("other"),
            "restored another redirect's state"
        );
        assert!(states.restore("csrf"));
        assert!(states.load("csrf").await.unwrap().is_some());
        states.delete("csrf").await.unwrap();
        states.settle("csrf");
        assert!(!states.restore("csrf"), "restored a settled state");
        assert!(states.load("csrf").await.unwrap().is_none());
    }
}
