//! Whose conversations a request reaches: a tenant per provider API key, named by a keyed
//! hash of the key, so that the key itself is never stored and two keys never share a
//! conversation.
//!
//! # Format
//!
//! The secret is the store's secret [`SECRET_NAME`] ([`ctxlog::Store::secret`]: 32 random
//! bytes created with the gateway's first start on the store and read by every later
//! gateway and every replica): in a store directory the file `<root>/.gateway-secret` (64
//! lowercase hex digits, mode 0600), in PostgreSQL the row `gateway` of the store schema's
//! `secrets` table. A tenant is `gw-` followed by the first 32 hex digits of
//! HMAC-SHA256(secret, TENANT NUL KEY), where TENANT is the `--tokens` tenant of the request
//! (empty without tokens) and KEY the API key as sent; its store is the store's
//! [`StoreLocation::for_tenant`] (`<root>/.tenants/<tenant>/`, or the schema
//! `<schema>_<tenant>`). Rotating the secret (deleting the file or the row, with every
//! gateway on the store stopped) starts every key on a new, empty tenant; the old tenant
//! stores stay until removed.
//!
//! A Responses response id is `resp_ctxlog.CONVERSATION.SEQ.MAC`: the conversation, the
//! seq of the input the response answered, and the first 32 hex digits of
//! HMAC-SHA256(secret, "response" NUL TENANT NUL CONVERSATION NUL SEQ), TENANT being the
//! tenant's name (`gw-…`). An id is read back only by a gateway on the same store (or a
//! replica with the same secret), for the tenant it was given to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use ctxlog::{Store, StoreConfig, StoreLocation};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The name of the store secret the gateway keys tenants and response ids with.
pub const SECRET_NAME: &str = "gateway";

/// The tenants' stores, opened on first use.
pub(crate) struct Tenants {
    location: StoreLocation,
    config: StoreConfig,
    /// Each tenant store's [`ctxlog::StoreBuilder::recognition_cache`].
    recognition_cache: usize,
    secret: [u8; 32],
    stores: Mutex<HashMap<String, Arc<Store>>>,
}

impl std::fmt::Debug for Tenants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenants")
            .field("location", &self.location.display())
            .finish_non_exhaustive()
    }
}

impl Tenants {
    /// The tenants of the store at `location`, reading (or creating) its secret.
    ///
    /// # Errors
    /// The store cannot be opened (its configuration), or its secret cannot be read or
    /// created (an unreachable database, a secret that does not read back).
    pub(crate) fn open(
        location: StoreLocation,
        config: StoreConfig,
        recognition_cache: usize,
    ) -> anyhow::Result<Tenants> {
        let root = ctxlog::StoreBuilder::new(location.clone())
            .config(config.clone())
            .build()?;
        let secret = root.secret(SECRET_NAME).with_context(|| {
            format!(
                "cannot read or create the gateway's secret in {}",
                location.display()
            )
        })?;
        Ok(Tenants {
            location,
            config,
            recognition_cache,
            secret,
            stores: Mutex::new(HashMap::new()),
        })
    }

    /// The tenant of `token_tenant` (the `--tokens` tenant, "" without tokens) and API key
    /// `key`, and its store.
    pub(crate) fn store(
        &self,
        token_tenant: &str,
        key: &[u8],
    ) -> ctxlog::Result<(String, Arc<Store>)> {
        let name = tenant_name(&self.secret, token_tenant, key);
        self.store_of(&name).map(|store| (name, store))
    }

    /// The Responses id of the response to the input ending at seq `seq` of `conversation`
    /// in `tenant` (see the module's format).
    pub(crate) fn response_id(&self, tenant: &str, conversation: &str, seq: u64) -> String {
        let mac = response_mac(&self.secret, tenant, conversation, seq);
        format!("{RESPONSE_ID_PREFIX}{conversation}.{seq}.{mac}")
    }

    /// The conversation and seq a Responses id of `tenant` names; `None` for an id this
    /// gateway's store did not give that tenant.
    pub(crate) fn read_response_id(&self, tenant: &str, id: &str) -> Option<(String, u64)> {
        let mut parts = id.strip_prefix(RESPONSE_ID_PREFIX)?.split('.');
        let (conversation, seq, mac) = (parts.next()?, parts.next()?, parts.next()?);
        let seq: u64 = seq.parse().ok()?;
        let expected = response_mac(&self.secret, tenant, conversation, seq);
        (parts.next().is_none() && expected.as_bytes().ct_eq(mac.as_bytes()))
            .then(|| (conversation.to_owned(), seq))
    }

    fn store_of(&self, name: &str) -> ctxlog::Result<Arc<Store>> {
        let name = name.to_owned();
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = stores.get(&name) {
            return Ok(store.clone());
        }
        let store = ctxlog::StoreBuilder::new(self.location.for_tenant(&name))
            .config(self.config.clone())
            .recognition_cache(self.recognition_cache)
            .build()?;
        let store = Arc::new(store);
        stores.insert(name, store.clone());
        Ok(store)
    }
}

/// How a gateway response id starts.
pub(crate) const RESPONSE_ID_PREFIX: &str = "resp_ctxlog.";

/// The check of a response id: the first 16 bytes (hex) of HMAC-SHA256(secret,
/// "response" NUL TENANT NUL CONVERSATION NUL SEQ).
fn response_mac(secret: &[u8; 32], tenant: &str, conversation: &str, seq: u64) -> String {
    let message = format!("response\0{tenant}\0{conversation}\0{seq}");
    let mac = hmac_sha256(secret, message.as_bytes());
    ctxlog_backend::to_hex(&mac[..16])
}

/// HMAC-SHA256 under the store's secret.
fn hmac_sha256(secret: &[u8; 32], message: &[u8]) -> Vec<u8> {
    // HMAC pads a key shorter than the hash's 64-byte block with zeros (RFC 2104): given so.
    let mut key = [0u8; 64];
    key[..32].copy_from_slice(secret);
    let mut mac = <Hmac<Sha256> as KeyInit>::new(&key.into());
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

/// Equality in time independent of where the bytes differ.
trait CtEq {
    fn ct_eq(&self, other: &Self) -> bool;
}

impl CtEq for [u8] {
    fn ct_eq(&self, other: &[u8]) -> bool {
        self.len() == other.len() && self.iter().zip(other).fold(0, |d, (a, b)| d | (a ^ b)) == 0
    }
}

/// The tenant name of a key (see the module's format).
pub(crate) fn tenant_name(secret: &[u8; 32], token_tenant: &str, key: &[u8]) -> String {
    let mut message = token_tenant.as_bytes().to_vec();
    message.push(0);
    message.extend_from_slice(key);
    let mac = hmac_sha256(secret, &message);
    format!("gw-{}", ctxlog_backend::to_hex(&mac[..16]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_tenant_name_is_the_documented_hmac_of_tenant_nul_key() {
        // HMAC-SHA256 of "TENANT\0KEY" under the secret, first 16 bytes in hex (computed
        // apart, with Python's hmac): a change here would move every key to a new tenant.
        let secret = [7u8; 32];
        assert_eq!(
            tenant_name(&secret, "", b"sk-a"),
            "gw-7b9ce7e7d7837633f1f28eb97c51f32f"
        );
        assert_eq!(
            tenant_name(&secret, "team", b"sk-a"),
            "gw-69ec1ca65b40b7a3a8b93707ff4305ad"
        );
    }

    #[test]
    fn keys_and_token_tenants_get_their_own_tenants() {
        let secret = [7u8; 32];
        let a = tenant_name(&secret, "", b"sk-a");
        assert_eq!(a, tenant_name(&secret, "", b"sk-a"));
        assert_ne!(a, tenant_name(&secret, "", b"sk-b"));
        assert_ne!(a, tenant_name(&secret, "team", b"sk-a"));
        assert_ne!(a, tenant_name(&[8u8; 32], "", b"sk-a"));
        assert!(ctxlog::ConversationName::new(&a).is_ok());
    }

    #[test]
    fn a_response_id_reads_back_only_in_its_tenant() {
        let dir = tempfile::tempdir().unwrap();
        let tenants = Tenants::open(
            StoreLocation::dir(dir.path()),
            StoreConfig::default(),
            ctxlog::DEFAULT_RECOGNITION_CACHE,
        )
        .unwrap();
        let id = tenants.response_id("gw-a", "chat-1", 42);
        assert!(id.starts_with(RESPONSE_ID_PREFIX), "{id}");
        assert_eq!(
            tenants.read_response_id("gw-a", &id),
            Some(("chat-1".to_owned(), 42))
        );
        assert_eq!(tenants.read_response_id("gw-b", &id), None);
        let forged = id.replace(".42.", ".43.");
        assert_eq!(tenants.read_response_id("gw-a", &forged), None);
        assert_eq!(tenants.read_response_id("gw-a", "resp_123"), None);
    }

    #[test]
    fn the_secret_is_the_stores_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            Tenants::open(
                StoreLocation::dir(dir.path()),
                StoreConfig::default(),
                ctxlog::DEFAULT_RECOGNITION_CACHE,
            )
        };
        let first = open().unwrap().secret;
        assert_eq!(first, open().unwrap().secret);
        let file = dir.path().join(".gateway-secret");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            ctxlog_backend::to_hex(&first)
        );
        std::fs::write(&file, "nope").unwrap();
        let err = open().unwrap_err();
        assert!(format!("{err:#}").contains("delete the file"), "{err:#}");
    }
}
