//! Test doubles for `queue`: memory in a `Vec`, a doorbell that records, and a device
//! model that fetches SQ entries up to the published tail and completes them in order
//! with the phase bit, refusing to overrun the client's CQ head (a real device would
//! overwrite an unread completion; the model fails the test instead).

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
};

use super::{Doorbell, Layout, RingMem};

/// Ring memory shared between the client side and the model device.
#[derive(Debug, Clone)]
pub struct VecMem(pub Rc<RefCell<Vec<u8>>>);

impl VecMem {
    pub fn new(len: usize) -> Self {
        Self(Rc::new(RefCell::new(vec![0; len])))
    }
}

fn out() -> std::io::Error {
    std::io::Error::other("outside the memory")
}

impl RingMem for VecMem {
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let m = self.0.borrow();
        let at = usize::try_from(offset).map_err(|_| out())?;
        buf.copy_from_slice(m.get(at..at + buf.len()).ok_or_else(out)?);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let mut m = self.0.borrow_mut();
        let at = usize::try_from(offset).map_err(|_| out())?;
        m.get_mut(at..at + data.len())
            .ok_or_else(out)?
            .copy_from_slice(data);
        Ok(())
    }

    fn write_u32(&self, offset: u64, value: u32) -> std::io::Result<()> {
        if !offset.is_multiple_of(4) {
            return Err(out());
        }
        self.write(offset, &value.to_le_bytes())
    }
}

/// Doorbell values as the device last saw them, and how often each was rung.
#[derive(Debug, Clone, Default)]
pub struct Bells {
    pub sq_tail: Rc<Cell<u32>>,
    pub cq_head: Rc<Cell<u32>>,
    pub sq_rings: Rc<Cell<u32>>,
    pub cq_rings: Rc<Cell<u32>>,
}

impl Doorbell for Bells {
    fn sq_tail(&mut self, tail: u32) -> std::io::Result<()> {
        self.sq_tail.set(tail);
        self.sq_rings.set(self.sq_rings.get() + 1);
        Ok(())
    }

    fn cq_head(&mut self, head: u32) -> std::io::Result<()> {
        self.cq_head.set(head);
        self.cq_rings.set(self.cq_rings.get() + 1);
        Ok(())
    }
}

/// A device that completes commands in the order it fetched them.
#[derive(Debug)]
pub struct Device {
    pub mem: VecMem,
    pub bells: Bells,
    pub layout: Layout,
    sq_head: u32,
    cq_tail: u32,
    phase: bool,
    /// Fetched, not yet completed: the entries' bytes.
    pending: std::collections::VecDeque<Vec<u8>>,
    /// Every entry fetched, in order.
    pub fetched: Vec<Vec<u8>>,
}

impl Device {
    pub fn new(mem: VecMem, bells: Bells, layout: Layout) -> Self {
        Self {
            mem,
            bells,
            layout,
            sq_head: 0,
            cq_tail: 0,
            phase: true,
            pending: Default::default(),
            fetched: Vec::new(),
        }
    }

    /// Fetches every published entry.
    pub fn fetch(&mut self) {
        let l = self.layout;
        while self.sq_head != self.bells.sq_tail.get() {
            let mut e = vec![0; l.sq_entry_bytes as usize];
            let at = l.sq_at + u64::from(self.sq_head) * u64::from(l.sq_entry_bytes);
            self.mem.read(at, &mut e).expect("SQ memory");
            self.sq_head = (self.sq_head + 1) % l.sq_entries;
            self.fetched.push(e.clone());
            self.pending.push_back(e);
        }
    }

    /// Completes up to `n` fetched commands: each completion's bytes are made by
    /// `complete` from the command's, then the phase bit is set to the device's phase.
    /// Returns how many it completed.
    pub fn complete(&mut self, n: usize, complete: impl Fn(&[u8]) -> Vec<u8>) -> usize {
        let l = self.layout;
        let mut done = 0;
        while done < n {
            let Some(cmd) = self.pending.pop_front() else {
                break;
            };
            let next = (self.cq_tail + 1) % l.cq_entries;
            assert_ne!(
                next,
                self.bells.cq_head.get(),
                "the device would overrun an unread completion"
            );
            let mut e = complete(&cmd);
            e.resize(l.cq_entry_bytes as usize, 0);
            let (byte, bit) = (l.phase_byte as usize, l.phase_bit);
            e[byte] = (e[byte] & !(1 << bit)) | (u8::from(self.phase) << bit);
            let at = l.cq_at + u64::from(self.cq_tail) * u64::from(l.cq_entry_bytes);
            self.mem.write(at, &e).expect("CQ memory");
            self.cq_tail = next;
            if self.cq_tail == 0 {
                self.phase = !self.phase;
            }
            done += 1;
        }
        done
    }

    /// Fetched commands not completed yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}
