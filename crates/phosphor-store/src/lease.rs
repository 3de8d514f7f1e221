//! Leases on a session: the lock that serialises work on it across every process sharing a store
//! ([`SessionStore::lock_session`](crate::SessionStore::lock_session)), and the claim a proxy
//! takes while a request works on it ([`SessionStore::try_claim`](crate::SessionStore::try_claim)).
//!
//! A lease is released by [`Lease::release`], or by dropping it. On Postgres a lease is an advisory
//! lock held by one connection: dropping it without `release` closes that connection, and the
//! server frees the lock with it, as it does when the process holding it dies. So a crashed holder
//! never wedges a session.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

/// What a store does to give a lease back.
#[async_trait]
pub(crate) trait Release: Send + Sync {
    /// Gives the lease back and waits until it is given back.
    async fn release(self: Box<Self>);
}

/// A lease on a session: a lock or a claim. Released on [`Lease::release`] or on drop.
#[must_use = "a lease is released as soon as it is dropped"]
pub struct Lease {
    inner: Option<Box<dyn Release>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("held", &self.inner.is_some()).finish()
    }
}

impl Lease {
    /// A lease that holds nothing (a store that a single process owns needs no lock of its own).
    pub fn none() -> Lease {
        Lease { inner: None }
    }

    pub(crate) fn new(inner: impl Release + 'static) -> Lease {
        Lease { inner: Some(Box::new(inner)) }
    }

    /// Gives the lease back, and waits until another process can take it.
    pub async fn release(mut self) {
        if let Some(inner) = self.inner.take() {
            inner.release().await;
        }
    }
}

/// Claims held in this process: the claims of a store that only this process opens (SQLite).
#[derive(Debug, Clone, Default)]
pub(crate) struct LocalClaims(Arc<Mutex<HashSet<String>>>);

impl LocalClaims {
    /// The claim of `key`, unless it is held.
    pub(crate) fn try_claim(&self, key: &str) -> Option<Lease> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.insert(key.to_owned())
            .then(|| Lease::new(LocalClaim { claims: self.clone(), key: key.to_owned() }))
    }
}

struct LocalClaim {
    claims: LocalClaims,
    key: String,
}

impl Drop for LocalClaim {
    fn drop(&mut self) {
        self.claims.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
    }
}

#[async_trait]
impl Release for LocalClaim {
    async fn release(self: Box<Self>) {}
}
