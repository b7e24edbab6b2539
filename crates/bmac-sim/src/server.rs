//! The card's end of the link to a card on the network (hw/DESIGN.md §7): a co-simulated card behind a UDP
//! socket, speaking the datagram protocol of `ferrofabric_bmac_boards::udp` (whose module docs list the
//! datagrams). Its receive buffer hands sections to the protocol processor strictly in sequence order, holds early
//! ones (up to [`REORDER_WINDOW`]) and asks for the missing ones with a NACK.

use std::collections::{BTreeMap, VecDeque};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ferrofabric_bmac::wire::{frame_of_l7, SectionType, L7_LEN};
use ferrofabric_bmac::CardResult;
use ferrofabric_bmac_boards::udp::{
    encode_result, nothing_arrived, DATA, FAULT, FETCH, HELLO, HELLO_ACK, IDENT, NACK, NACK_MAX, PENDING, POLL,
    REG_READ, REG_VALUE, RETRY,
};
use ferrofabric_bmac_boards::REORDER_WINDOW;

use crate::card::Card;
use crate::sim::SimError;

/// Block results the card keeps to send again when a host polls for one it lost, or fetches one it did not feed.
/// Each is a few hundred bytes; 4,096 let a committer fed by a relay lag that many card blocks behind.
const RESULTS_KEPT: usize = 4096;

/// Cycles the card runs between two looks at its socket while it has work (a few milliseconds of simulation).
const BURST: u64 = 2_000;

/// Why the card's end stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The socket failed.
    #[error("card socket: {0}")]
    Io(#[from] std::io::Error),
    /// The card's simulation could not start (the model is not built).
    #[error(transparent)]
    Sim(#[from] SimError),
}

/// Runs an N×M co-simulated card behind `socket` until `stop` is set (checked at least every 20 ms): the card side
/// of the protocol of `ferrofabric_bmac_boards::udp`. A `HELLO` resets the card; results go to the address of the
/// last `HELLO`.
///
/// Errors: the model is not built, or the socket fails. A card failure is reported to the host as `FAULT` and the
/// card waits for the next `HELLO`.
pub fn serve(socket: &UdpSocket, n: u32, m: u32, stop: &AtomicBool) -> Result<(), ServeError> {
    let mut s = Server { card: Card::new(n, m)?, n, m, rx: Receive::default(), peer: None, results: VecDeque::new() };
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        let busy = s.rx.fed_blocks > s.rx.results_out && !s.rx.failed;
        // Idle, wait for a datagram; busy, take only what has arrived. Either way, take everything that is there
        // before the card runs again, so that nothing queues up behind a burst of cycles.
        socket.set_nonblocking(busy)?;
        socket.set_read_timeout(Some(RETRY))?;
        loop {
            match socket.recv_from(&mut buf) {
                Ok((len, from)) => s.datagram(socket, &buf[..len], from)?,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if nothing_arrived(&e) => {
                    s.rx.renack(socket, s.peer)?;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
            socket.set_nonblocking(true)?;
        }
        if busy {
            let polled = s.card.poll_result(BURST);
            s.publish(socket, polled)?;
        }
    }
    Ok(())
}

/// The card side: the simulated card, its receive buffer, the results it keeps.
struct Server {
    card: Card,
    n: u32,
    m: u32,
    rx: Receive,
    peer: Option<SocketAddr>,
    results: VecDeque<(u64, Vec<u8>)>,
}

/// The receive buffer: sections go to the protocol processor in sequence order.
#[derive(Default)]
struct Receive {
    next: u32,
    early: BTreeMap<u32, Vec<u8>>,
    /// When the gap at `next` was last NACKed.
    nacked: Option<(u32, Instant)>,
    fed_blocks: u64,
    results_out: u64,
    /// The card failed: nothing more is fed until a `HELLO`.
    failed: bool,
}

impl Receive {
    /// NACKs the gap at `next` if datagrams past it are held and it was not asked for within [`RETRY`].
    fn renack(&mut self, socket: &UdpSocket, peer: Option<SocketAddr>) -> std::io::Result<()> {
        match peer {
            Some(peer) if !self.early.is_empty() => self.nack(socket, peer, u32::MAX),
            _ => Ok(()),
        }
    }

    /// NACKs the datagrams missing from `next` on: up to the first one held, and below `end` (the sender's next
    /// sequence number, when it said so), at most [`NACK_MAX`]; at most once per [`RETRY`] for the same gap.
    fn nack(&mut self, socket: &UdpSocket, peer: SocketAddr, end: u32) -> std::io::Result<()> {
        if matches!(self.nacked, Some((at, t)) if at == self.next && t.elapsed() < RETRY) {
            return Ok(());
        }
        self.nacked = Some((self.next, Instant::now()));
        let upto = self.early.keys().next().map_or(end, |&held| held.min(end));
        let count = upto.saturating_sub(self.next).clamp(1, NACK_MAX) as u16;
        let mut d = vec![NACK];
        d.extend_from_slice(&self.next.to_be_bytes());
        d.extend_from_slice(&count.to_be_bytes());
        socket.send_to(&d, peer).map(drop)
    }
}

impl Server {
    fn datagram(&mut self, socket: &UdpSocket, d: &[u8], from: SocketAddr) -> Result<(), ServeError> {
        match (d.first().copied(), d.len()) {
            (Some(HELLO), _) => {
                self.card = Card::new(self.n, self.m)?;
                self.rx = Receive::default();
                self.results.clear();
                self.peer = Some(from);
                socket.send_to(&[HELLO_ACK, self.n as u8, self.m as u8], from)?;
            }
            (Some(DATA), len) if len > 5 => {
                let seq = u32::from_be_bytes([d[1], d[2], d[3], d[4]]);
                if self.rx.failed || seq < self.rx.next {
                    return Ok(()); // a duplicate, or a card waiting for its reset
                }
                if seq > self.rx.next {
                    if seq - self.rx.next < REORDER_WINDOW {
                        self.rx.early.insert(seq, d[5..].to_vec());
                    }
                    if let Some(peer) = self.peer {
                        self.rx.nack(socket, peer, u32::MAX)?;
                    }
                    return Ok(());
                }
                let mut l7 = d[5..].to_vec();
                loop {
                    let fed = self.feed(&l7);
                    self.publish(socket, fed.map(|()| None))?;
                    if self.rx.failed {
                        return Ok(());
                    }
                    self.rx.next += 1;
                    match self.rx.early.remove(&self.rx.next) {
                        Some(next) => l7 = next,
                        None => break,
                    }
                }
            }
            (Some(POLL), 13) => {
                let block = u64::from_be_bytes([d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]]);
                let last = u32::from_be_bytes([d[9], d[10], d[11], d[12]]);
                if let Some((_, r)) = self.results.iter().find(|(b, _)| *b == block) {
                    socket.send_to(r, from)?;
                } else if self.rx.next <= last {
                    self.rx.nack(socket, from, last.saturating_add(1))?;
                }
            }
            (Some(FETCH), 9) => {
                let block = u64::from_be_bytes([d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]]);
                match self.results.iter().find(|(b, _)| *b == block) {
                    Some((_, r)) => socket.send_to(r, from).map(drop)?,
                    None => {
                        let newest = self.results.back().map(|(b, _)| *b);
                        let mut p = vec![PENDING];
                        p.extend_from_slice(&block.to_be_bytes());
                        p.push(u8::from(newest.is_some()));
                        p.extend_from_slice(&newest.unwrap_or(0).to_be_bytes());
                        socket.send_to(&p, from)?;
                    }
                }
            }
            (Some(IDENT), 1) => {
                socket.send_to(&[HELLO_ACK, self.n as u8, self.m as u8], from)?;
            }
            (Some(REG_READ), 3) => {
                let addr = u16::from_be_bytes([d[1], d[2]]);
                let value = self.card.sim().read_reg(addr);
                let reply = match value {
                    Ok(v) => [&[REG_VALUE][..], &addr.to_be_bytes(), &v.to_be_bytes()].concat(),
                    Err(e) => [&[FAULT][..], e.to_string().as_bytes()].concat(),
                };
                socket.send_to(&reply, from)?;
            }
            _ => tracing::debug!(%from, len = d.len(), "not a card datagram; dropped"),
        }
        Ok(())
    }

    /// Hands one section to the protocol processor.
    fn feed(&mut self, l7: &[u8]) -> Result<(), SimError> {
        let Ok(frame) = frame_of_l7(l7) else {
            // Too large for the card's MAC: dropped there, as a real card would; the protocol processor never sees
            // it, so its block never completes and the host's deadline applies.
            tracing::warn!(len = l7.len(), "datagram larger than a frame; dropped");
            return Ok(());
        };
        if l7.len() >= L7_LEN && l7[1] == SectionType::Metadata as u8 {
            self.rx.fed_blocks += 1;
        }
        self.card.send(&frame)
    }

    /// Sends every result the card's driver has read (and `polled`) to the host; a failure as `FAULT`.
    fn publish(&mut self, socket: &UdpSocket, polled: Result<Option<CardResult>, SimError>) -> Result<(), ServeError> {
        let failure = polled.as_ref().err().map(ToString::to_string);
        let mut out: Vec<CardResult> = std::iter::from_fn(|| self.card.take_result()).collect();
        out.extend(polled.ok().flatten());
        for r in out {
            let d = encode_result(&r);
            if let Some(peer) = self.peer {
                socket.send_to(&d, peer)?;
            }
            self.rx.results_out += 1;
            self.results.push_back((r.number, d));
            if self.results.len() > RESULTS_KEPT {
                self.results.pop_front();
            }
        }
        if let (Some(why), Some(peer)) = (failure, self.peer) {
            tracing::error!(reason = %why, "the card failed; waiting for a HELLO");
            self.rx.failed = true;
            socket.send_to(&[&[FAULT][..], why.as_bytes()].concat(), peer)?;
        }
        Ok(())
    }
}
