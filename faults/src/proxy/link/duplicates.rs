//! The duplicate requests one connection's upstream link sent and whose
//! responses its downstream link must remove: the only state a connection's
//! two links share.
//!
//! A duplicate goes out under a correlation id the proxy picks, negative so
//! it is no client's (Kafka's clients count theirs up from 0), and a Kafka
//! broker answers with the request's correlation id, so the downstream link
//! knows the answer by its id alone, wherever it comes in the stream. The id
//! is registered before the duplicate's first byte is written, and its
//! answer can only be read after that, so the downstream never misses one.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Duplicates {
    /// Ids sent and not yet answered, and the count of them, read without
    /// the lock on every direct read of the downstream.
    unanswered: Mutex<Vec<i32>>,
    pending: AtomicUsize,
    /// Duplicates sent on this connection so far.
    sent: Mutex<i32>,
}

impl Duplicates {
    /// A fresh correlation id for a duplicate about to be sent; its answer
    /// is expected from now on.
    pub fn mint(&self) -> i32 {
        let mut sent = self.sent.lock().expect("duplicates poisoned");
        // -1, -2, ...; after 2^31 duplicates on one connection, from -1 again.
        *sent = if *sent == i32::MIN { -1 } else { *sent - 1 };
        let id = *sent;
        self.unanswered
            .lock()
            .expect("duplicates poisoned")
            .push(id);
        self.pending.fetch_add(1, Ordering::SeqCst);
        id
    }

    /// Whether some duplicate's answer has not come yet.
    pub fn expected(&self) -> bool {
        self.pending.load(Ordering::SeqCst) > 0
    }

    /// Whether `correlation_id` answers a duplicate (forgotten from now on).
    pub fn take(&self, correlation_id: i32) -> bool {
        let mut unanswered = self.unanswered.lock().expect("duplicates poisoned");
        match unanswered.iter().position(|&id| id == correlation_id) {
            Some(at) => {
                unanswered.remove(at);
                self.pending.fetch_sub(1, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_duplicate_is_answered_once() {
        let duplicates = Duplicates::default();
        assert!(!duplicates.expected());
        let (a, b) = (duplicates.mint(), duplicates.mint());
        assert_eq!((a, b), (-1, -2));
        assert!(duplicates.expected());
        assert!(!duplicates.take(1), "a client's id is no duplicate's");
        assert!(duplicates.take(b));
        assert!(!duplicates.take(b), "answered already");
        assert!(duplicates.take(a));
        assert!(!duplicates.expected());
    }
}
