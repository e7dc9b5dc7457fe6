//! An intrusive doubly linked list over the indices `0..n`, used as an LRU queue.
//!
//! Invariants: an index is in the list at most once; `len` equals the number of linked
//! indices; `prev`/`next` of an unlinked index are `NIL`.
//!
//! Cost: `push_back`, `push_front`, `pop_front`, `remove` and `contains` are O(1); memory is
//! two `u32` and a flag per index, allocated once.

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub(crate) struct LruList {
    prev: Vec<u32>,
    next: Vec<u32>,
    linked: Vec<bool>,
    head: u32,
    tail: u32,
    len: usize,
}

impl LruList {
    /// An empty list over indices `0..n`.
    pub fn new(n: usize) -> Self {
        assert!(n < NIL as usize, "too many entries for u32 indices");
        Self {
            prev: vec![NIL; n],
            next: vec![NIL; n],
            linked: vec![false; n],
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn contains(&self, i: u32) -> bool {
        self.linked[i as usize]
    }

    /// Appends `i` as the most recently used entry.
    pub fn push_back(&mut self, i: u32) {
        assert!(!self.linked[i as usize], "index {i} already linked");
        let iu = i as usize;
        self.linked[iu] = true;
        self.prev[iu] = self.tail;
        self.next[iu] = NIL;
        if self.tail == NIL {
            self.head = i;
        } else {
            self.next[self.tail as usize] = i;
        }
        self.tail = i;
        self.len += 1;
    }

    /// Inserts `i` as the least recently used entry (the next to be popped).
    pub fn push_front(&mut self, i: u32) {
        assert!(!self.linked[i as usize], "index {i} already linked");
        let iu = i as usize;
        self.linked[iu] = true;
        self.next[iu] = self.head;
        self.prev[iu] = NIL;
        if self.head == NIL {
            self.tail = i;
        } else {
            self.prev[self.head as usize] = i;
        }
        self.head = i;
        self.len += 1;
    }

    /// Removes and returns the least recently used entry.
    pub fn pop_front(&mut self) -> Option<u32> {
        if self.head == NIL {
            return None;
        }
        let i = self.head;
        self.remove(i);
        Some(i)
    }

    /// Unlinks `i`, which must be linked.
    pub fn remove(&mut self, i: u32) {
        let iu = i as usize;
        assert!(self.linked[iu], "index {i} not linked");
        let (p, n) = (self.prev[iu], self.next[iu]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[iu] = NIL;
        self.next[iu] = NIL;
        self.linked[iu] = false;
        self.len -= 1;
    }

    /// Entries from least to most recently used. O(len).
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let i = cur;
            cur = self.next[i as usize];
            Some(i)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_removal() {
        let mut l = LruList::new(5);
        for i in 0..5 {
            l.push_back(i);
        }
        l.remove(2);
        l.push_front(2);
        l.remove(4);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![2, 0, 1, 3]);
        assert_eq!(l.pop_front(), Some(2));
        assert_eq!(l.len(), 3);
        assert!(!l.contains(2) && l.contains(3));
        while l.pop_front().is_some() {}
        assert_eq!(l.len(), 0);
        l.push_front(4);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![4]);
    }
}
