//! Panics of hooks, guards and bodies are contained: a call still ends in exactly one result.

use futures::FutureExt;

/// Turns a caught panic payload into text.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Awaits a future, turning a panic into `Err(message)`.
pub async fn contain<T>(future: impl std::future::Future<Output = T>) -> Result<T, String> {
    std::panic::AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .map_err(|payload| panic_message(payload.as_ref()))
}
