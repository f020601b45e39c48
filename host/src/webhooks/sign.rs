//! Standard Webhooks signatures: `webhook-signature: v1,<base64 of HMAC-SHA256(secret,
//! "<webhook-id>.<webhook-timestamp>.<body>")>`. A secret `whsec_<base64>` is the decoded bytes
//! (the standard's form); any other text is its own bytes.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key bytes of `secret`.
pub fn key(secret: &str) -> Vec<u8> {
    secret
        .strip_prefix("whsec_")
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec())
}

/// The `webhook-signature` header value for delivery `id` sent at `timestamp` (Unix seconds)
/// with `body`.
pub fn signature(secret: &str, id: &str, timestamp: u64, body: &str) -> String {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let mut mac = match Hmac::<Sha256>::new_from_slice(&key(secret)) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification (its reference libraries' test).
    #[test]
    fn the_standard_webhooks_example_verifies() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
