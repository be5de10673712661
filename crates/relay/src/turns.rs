//! Connections take turns: a queue per connection, served by deficit round
//! robin, so a connection with much work waiting (many queries, large
//! messages) never makes another connection's small piece of work wait
//! for all of it. Used by the ingest workers (work measured in bytes) and,
//! grouped by client address ([`AddressTurns`]), the query pool (in slices).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::msg::ConnId;

/// Work waiting per connection, taken in turns.
#[derive(Debug)]
pub struct Turns<T> {
    queues: HashMap<ConnId, Waiting<T>>,
    /// Connections with work, in the order they get their next turn.
    turn: VecDeque<ConnId>,
    /// What a connection may spend per turn (it saves up for larger items).
    quantum: u64,
    len: usize,
}

#[derive(Debug)]
struct Waiting<T> {
    items: VecDeque<(T, u64)>,
    /// Cost a connection has saved up and not yet spent.
    deficit: u64,
}

impl<T> Turns<T> {
    /// Empty; each turn lets a connection spend `quantum` (at least 1).
    pub fn new(quantum: u64) -> Turns<T> {
        Turns {
            queues: HashMap::new(),
            turn: VecDeque::new(),
            quantum: quantum.max(1),
            len: 0,
        }
    }

    /// Queues `item` of `cost` behind the connection's earlier items.
    pub fn push(&mut self, conn: ConnId, item: T, cost: u64) {
        let waiting = self.queues.entry(conn).or_insert_with(|| Waiting {
            items: VecDeque::new(),
            deficit: 0,
        });
        if waiting.items.is_empty() {
            self.turn.push_back(conn);
        }
        waiting.items.push_back((item, cost));
        self.len += 1;
    }

    /// The next item by turns: connections in order, each taking its
    /// next item once it has saved up its cost.
    pub fn pop(&mut self) -> Option<T> {
        self.pop_with_cost().map(|(item, _)| item)
    }

    /// [`Turns::pop`], with the item's cost.
    fn pop_with_cost(&mut self) -> Option<(T, u64)> {
        loop {
            let conn = self.turn.pop_front()?;
            let waiting = self
                .queues
                .get_mut(&conn)
                .expect("a connection in turn has work");
            let cost = waiting
                .items
                .front()
                .expect("a connection in turn has work")
                .1;
            // Saving up many turns at once for an item far larger than the
            // quantum, when it is alone, costs no loop per quantum.
            let turns_needed = cost.saturating_sub(waiting.deficit).div_ceil(self.quantum);
            if turns_needed > 1 && self.turn.is_empty() {
                waiting.deficit += (turns_needed - 1) * self.quantum;
            }
            waiting.deficit += self.quantum;
            if waiting.deficit < cost {
                self.turn.push_back(conn);
                continue;
            }
            let (item, cost) = waiting.items.pop_front().expect("checked");
            waiting.deficit -= cost;
            if waiting.items.is_empty() {
                self.queues.remove(&conn);
            } else {
                self.turn.push_back(conn);
            }
            self.len -= 1;
            return Some((item, cost));
        }
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Client addresses take turns, and the connections of one address take
/// turns within its share ([`Turns`]): a client with twenty connections
/// gets one turn among the clients, not twenty.
///
/// An address spends its quantum per turn on whatever item its connections
/// have next, and may overdraw: an item larger than what it saved up is
/// taken at once, and the address then sits out the turns that paid for it.
/// So a small item of another client waits for at most one item per other
/// client, never for a client's whole backlog.
#[derive(Debug)]
pub struct AddressTurns<A, T> {
    by_address: HashMap<A, Share<T>>,
    /// Addresses with work, in the order they get their next turn.
    turn: VecDeque<A>,
    quantum: u64,
    len: usize,
}

#[derive(Debug)]
struct Share<T> {
    connections: Turns<T>,
    /// Saved up (positive) or overdrawn (negative) cost.
    deficit: i64,
}

impl<A: Copy + Eq + Hash, T> AddressTurns<A, T> {
    /// Empty; each turn lets an address spend `quantum` (at least 1), and
    /// each of its connections `quantum` within it.
    pub fn new(quantum: u64) -> AddressTurns<A, T> {
        AddressTurns {
            by_address: HashMap::new(),
            turn: VecDeque::new(),
            quantum: quantum.max(1),
            len: 0,
        }
    }

    /// Queues `item` of `cost` behind the connection's earlier items.
    pub fn push(&mut self, address: A, conn: ConnId, item: T, cost: u64) {
        let share = self.by_address.entry(address).or_insert_with(|| Share {
            connections: Turns::new(self.quantum),
            deficit: 0,
        });
        if share.connections.is_empty() {
            self.turn.push_back(address);
        }
        share.connections.push(conn, item, cost);
        self.len += 1;
    }

    /// The next item by turns: addresses in order, then the address's
    /// connections in order.
    pub fn pop(&mut self) -> Option<T> {
        let quantum = i64::try_from(self.quantum).unwrap_or(i64::MAX);
        loop {
            let address = self.turn.pop_front()?;
            let share = self
                .by_address
                .get_mut(&address)
                .expect("an address in turn has work");
            share.deficit = share.deficit.saturating_add(quantum);
            if share.deficit <= 0 {
                // Still paying for an earlier large item. Alone, it need
                // not wait a loop per quantum.
                if self.turn.is_empty() {
                    share.deficit = quantum;
                } else {
                    self.turn.push_back(address);
                    continue;
                }
            }
            let (item, cost) = share
                .connections
                .pop_with_cost()
                .expect("an address in turn has work");
            share.deficit = share
                .deficit
                .saturating_sub(i64::try_from(cost).unwrap_or(i64::MAX));
            if share.connections.is_empty() {
                // An address that leaves keeps no credit, and no debt.
                self.by_address.remove(&address);
            } else {
                self.turn.push_back(address);
            }
            self.len -= 1;
            return Some(item);
        }
    }

    /// Charges `address` for `extra` cost its last item turned out to
    /// have beyond what it was queued with (work whose cost is known only
    /// once done), while it has work waiting; an address that left keeps
    /// no debt.
    pub fn charge(&mut self, address: A, extra: u64) {
        if let Some(share) = self.by_address.get_mut(&address) {
            share.deficit = share
                .deficit
                .saturating_sub(i64::try_from(extra).unwrap_or(i64::MAX));
        }
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::{AddressTurns, Turns};

    #[test]
    fn a_client_with_many_connections_gets_one_turn_among_clients() {
        let mut t = AddressTurns::new(1);
        // Address 9 opens four connections with three jobs each; address 1
        // has one job behind them.
        for conn in 10..14 {
            for i in 0..3 {
                t.push(9, conn, format!("a{conn}.{i}"), 1);
            }
        }
        t.push(1, 1, "probe".to_string(), 1);
        assert_eq!(t.len(), 13);
        let order: Vec<String> = std::iter::from_fn(|| t.pop()).collect();
        // Second, not thirteenth.
        assert_eq!(order[1], "probe");
        // Within the address, its connections take turns in order.
        let theirs: Vec<&str> = order
            .iter()
            .filter(|s| *s != "probe")
            .map(String::as_str)
            .collect();
        assert_eq!(&theirs[..5], ["a10.0", "a11.0", "a12.0", "a13.0", "a10.1"]);
        assert!(t.is_empty());
    }

    #[test]
    fn addresses_alternate_and_each_connection_keeps_its_order() {
        let mut t = AddressTurns::new(1);
        for i in 0..6u64 {
            t.push('x', i % 2, ('x', i % 2, i), 1);
            t.push('y', 7, ('y', 7, i), 1);
        }
        let got: Vec<(char, u64, u64)> = std::iter::from_fn(|| t.pop()).collect();
        let addresses: String = got.iter().map(|g| g.0).collect();
        assert_eq!(addresses, "xyxyxyxyxyxy");
        for conn in [0, 1, 7] {
            let mine: Vec<u64> = got.iter().filter(|g| g.1 == conn).map(|g| g.2).collect();
            let mut sorted = mine.clone();
            sorted.sort_unstable();
            assert_eq!(mine, sorted);
        }
    }

    #[test]
    fn a_client_of_large_items_pays_for_them_in_turns() {
        let mut t = AddressTurns::new(64);
        // One address, four connections of megabyte messages; another's
        // small messages arrive behind them.
        for conn in 0..4 {
            t.push("attacker", conn, format!("big{conn}"), 1 << 20);
        }
        for i in 0..3 {
            t.push("probe", 9, format!("small{i}"), 100);
        }
        let order: Vec<String> = std::iter::from_fn(|| t.pop()).collect();
        // At most one large item goes before each small one, and the
        // small ones are all through before the second large one.
        assert_eq!(order[..4], ["big0", "small0", "small1", "small2"]);
        assert_eq!(order.len(), 7);
        // Alone, an overdrawn address does not wait a turn per quantum.
        t.push("attacker", 0, "again".to_string(), 1 << 20);
        t.push("attacker", 1, "and again".to_string(), 1 << 20);
        assert_eq!(t.pop().as_deref(), Some("again"));
        assert_eq!(t.pop().as_deref(), Some("and again"));
        assert!(t.is_empty());
    }

    #[test]
    fn connections_take_turns_whatever_they_queued() {
        let mut t = Turns::new(1);
        for i in 0..5 {
            t.push(1, format!("a{i}"), 1);
        }
        t.push(2, "b0".to_string(), 1);
        t.push(3, "c0".to_string(), 1);
        let order: Vec<String> = std::iter::from_fn(|| t.pop()).collect();
        assert_eq!(order, ["a0", "b0", "c0", "a1", "a2", "a3", "a4"]);
        assert!(t.is_empty());
    }

    #[test]
    fn a_small_item_does_not_wait_for_large_ones() {
        let mut t = Turns::new(64);
        for i in 0..4 {
            t.push(1, format!("big{i}"), 1_000);
        }
        t.push(2, "small".to_string(), 10);
        let order: Vec<String> = std::iter::from_fn(|| t.pop()).collect();
        assert_eq!(order[0], "small");
        assert_eq!(order.len(), 5);
        // Alone, a large item is taken at once.
        t.push(1, "alone".to_string(), 1_000_000);
        assert_eq!(t.pop().as_deref(), Some("alone"));
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn each_connection_keeps_its_own_order() {
        let mut t = Turns::new(100);
        let mut expected = Vec::new();
        for i in 0..50u64 {
            let conn = i % 3;
            t.push(conn, (conn, i), 37 * (i % 5) + 1);
            expected.push((conn, i));
        }
        let got: Vec<(u64, u64)> = std::iter::from_fn(|| t.pop()).collect();
        assert_eq!(got.len(), 50);
        for conn in 0..3 {
            let mine: Vec<_> = got.iter().filter(|(c, _)| *c == conn).collect();
            let want: Vec<_> = expected.iter().filter(|(c, _)| *c == conn).collect();
            assert_eq!(mine, want);
        }
    }
}
