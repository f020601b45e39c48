//! The one integration test binary of spaces-harnesses: each harness's recorded-output replays
//! (insta snapshots of the normalized events) and its edge cases live in `suite/<harness>.rs`;
//! `suite/contract.rs` runs one table of situations against every harness.

mod suite {
    mod acp;
    mod claude_code;
    mod contract;
    mod openai_codex;
    mod openai_codex_app_server;
}
