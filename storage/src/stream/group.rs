//! Consumer groups: the group's last delivered ID and read counter, its
//! pending entries list (PEL), and its consumers, each with its own PEL.
//!
//! A pending entry is owned by one consumer: it appears in the group's PEL
//! (with its delivery time and count, and its owner's name) and in the
//! owner's PEL, as Redis shares one NACK between the two trees.

use super::StreamId;
use std::collections::{BTreeMap, BTreeSet};

/// A delivered, not yet acknowledged entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// Last delivery, unix ms.
    pub delivery_time: i64,
    pub delivery_count: u64,
    pub consumer: Vec<u8>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Last time the consumer was active, unix ms.
    pub seen_time: i64,
    pub pel: BTreeSet<StreamId>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    pub last_id: StreamId,
    /// Entries read by the group, or `ENTRIES_READ_INVALID`.
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Self {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// The consumer `name`, created if missing; true if created.
    pub fn consumer(&mut self, name: &[u8], now: i64) -> (&mut Consumer, bool) {
        // Looked up first: the name is copied only for a new consumer.
        let created = !self.consumers.contains_key(name);
        if created {
            let c = Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            };
            self.consumers.insert(name.to_vec(), c);
        }
        (self.consumers.get_mut(name).expect("present"), created)
    }

    /// Deletes consumer `name`, dropping its pending entries; the number
    /// it had, or `None` if there is no such consumer.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Acknowledges `id`; true if it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Makes `consumer` the owner of pending entry `id` (created if
    /// absent) with the given delivery time and count.
    pub fn assign(&mut self, id: StreamId, consumer: &[u8], time: i64, count: u64, now: i64) {
        if let Some(old) = self.pel.get(&id) {
            if old.consumer.as_slice() != consumer {
                let prev = old.consumer.clone();
                if let Some(c) = self.consumers.get_mut(&prev) {
                    c.pel.remove(&id);
                }
            }
        }
        self.consumer(consumer, now).0.pel.insert(id);
        self.pel.insert(
            id,
            Nack {
                delivery_time: time,
                delivery_count: count,
                consumer: consumer.to_vec(),
            },
        );
    }

    pub fn heap_size(&self) -> usize {
        let nack = std::mem::size_of::<(StreamId, Nack)>() + 16;
        let mut n: usize = self.pel.values().map(|k| nack + k.consumer.len()).sum();
        for (name, c) in &self.consumers {
            n += name.len() + std::mem::size_of::<Consumer>() + 32 + c.pel.len() * 24;
        }
        n
    }
}
