//! Presentation in one test binary: call and result cards, the replay page, and the replay of
//! a real run in a headless browser.

#[path = "../../src/bin/dsh-tools/toolset.rs"]
mod toolset;

mod cards;
#[cfg(feature = "code-mode")]
mod replay_browser;
mod replay_page;
