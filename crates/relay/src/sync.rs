//! NIP-77 negentropy sync sessions.
//!
//! A NEG-OPEN becomes a job on the query pool that collects the filter's
//! `(created_at, id)` items (no JSON is rendered); the items come back to the
//! connection's ingest worker, which owns the session from then on, so every
//! NEG-MSG round of a connection is answered in order, like its REQs.

use std::collections::HashMap;
use std::sync::Arc;

use negentropy::{Id, Negentropy, NegentropyStorageVector};
use nostrwire_event::message::write;

use crate::msg::{Conn, ConnId, Sub, SyncItems};
use crate::Shared;

type Session = Negentropy<'static, NegentropyStorageVector>;

/// Sync sessions of the connections one ingest worker owns.
#[derive(Debug, Default)]
pub struct Sessions {
    /// NEG-OPENs whose items are still being collected.
    pending: HashMap<ConnId, HashMap<String, Arc<Sub>>>,
    /// Sessions ready for NEG-MSG rounds.
    open: HashMap<ConnId, HashMap<String, Session>>,
}

fn send_err(conn: &Conn, id: &str, message: &str) {
    let mut out = Vec::new();
    write::neg_err(&mut out, id, message);
    conn.outbox.send_control(out);
}

fn send_msg(conn: &Conn, id: &str, message: &[u8]) {
    let mut out = Vec::with_capacity(2 * message.len() + 32);
    write::neg_msg(&mut out, id, message);
    conn.outbox.send(out);
}

impl Sessions {
    /// Sessions a connection has open or pending.
    pub fn count(&self, conn: ConnId) -> usize {
        self.pending.get(&conn).map_or(0, HashMap::len)
            + self.open.get(&conn).map_or(0, HashMap::len)
    }

    /// Registers a NEG-OPEN whose items are being collected by `sub`'s job;
    /// a session of the same id is replaced, as REQ ids are.
    pub fn opening(&mut self, conn: ConnId, sub: Arc<Sub>) {
        self.close(conn, &sub.id);
        self.pending
            .entry(conn)
            .or_default()
            .insert(sub.id.clone(), sub);
    }

    /// The items arrived: builds the session and answers the initial message.
    pub fn ready(&mut self, shared: &Shared, ready: SyncItems) {
        let SyncItems {
            conn,
            sub,
            message,
            items,
        } = ready;
        // Closed or replaced meanwhile: drop it silently.
        let Some(list) = self.pending.get_mut(&conn.id) else {
            return;
        };
        if !list.get(&sub.id).is_some_and(|p| Arc::ptr_eq(p, &sub)) {
            return;
        }
        list.remove(&sub.id);
        let items = match items {
            Ok(items) => items,
            Err(reason) => return send_err(&conn, &sub.id, &reason),
        };
        let mut storage = NegentropyStorageVector::with_capacity(items.len());
        for (created_at, id) in items {
            // Ids are 32 bytes by type, and sealing sorts and checks them.
            let _ = storage.insert(created_at, Id::from_byte_array(*id.as_bytes()));
        }
        let session = storage
            .seal()
            .and_then(|()| Negentropy::owned(storage, shared.config.limits.sync_frame_bytes));
        let mut session = match session {
            Ok(s) => s,
            Err(e) => return send_err(&conn, &sub.id, &format!("error: {e}")),
        };
        self.round(shared, &conn, &sub.id, &mut session, &message);
        if !conn.outbox.is_dead() {
            self.open
                .entry(conn.id)
                .or_default()
                .insert(sub.id.clone(), session);
        }
    }

    /// A NEG-MSG round on an open session.
    pub fn message(&mut self, shared: &Shared, conn: &Conn, id: &str, message: &[u8]) {
        let Some(mut session) = self.open.get_mut(&conn.id).and_then(|l| l.remove(id)) else {
            return send_err(conn, id, "closed: no such sync session");
        };
        if self.round(shared, conn, id, &mut session, message) {
            self.open
                .entry(conn.id)
                .or_default()
                .insert(id.to_string(), session);
        }
    }

    /// Answers one message; false if the session failed (NEG-ERR sent).
    fn round(
        &self,
        shared: &Shared,
        conn: &Conn,
        id: &str,
        session: &mut Session,
        message: &[u8],
    ) -> bool {
        match session.reconcile(message) {
            Ok(reply) => {
                shared.metrics.message("NEG-MSG-out");
                send_msg(conn, id, &reply);
                true
            }
            Err(e) => {
                send_err(conn, id, &format!("invalid: {e}"));
                false
            }
        }
    }

    /// NEG-CLOSE, or replacement: forgets the session and stops its job.
    pub fn close(&mut self, conn: ConnId, id: &str) {
        if let Some(sub) = self.pending.get_mut(&conn).and_then(|l| l.remove(id)) {
            sub.cancelled
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(list) = self.open.get_mut(&conn) {
            list.remove(id);
        }
    }

    /// The connection closed.
    pub fn close_conn(&mut self, conn: ConnId) {
        if let Some(list) = self.pending.remove(&conn) {
            for sub in list.values() {
                sub.cancelled
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        self.open.remove(&conn);
    }
}
