//! The card on the network, as BMac is (hw/DESIGN.md §7): the host sends each section as one UDP datagram to the
//! card's address and the card answers with each block's result.
//!
//! UDP may lose, duplicate and reorder datagrams; the card's protocol processor must see each section once and in
//! order. So every data datagram carries a sequence number. The card's receive buffer (the card's end,
//! `ferrofabric_bmac_sim::serve_card`) hands sections to the protocol processor strictly in sequence order, holds
//! early ones (up to [`REORDER_WINDOW`]) and asks for the missing ones with a NACK; the host ([`UdpCard`]) keeps
//! what it sent until a block result shows the card has it, retransmits on a NACK, and polls while it waits, which also finds lost tails and lost results. A block whose
//! result does not come within the host's deadline is the host's to validate (the committer switches the card off).
//!
//! Datagrams (all integers big-endian; the first byte says which):
//!
//! | host → card | bytes after the kind byte |
//! | --- | --- |
//! | `DATA` 0xD0 | seq u32, then the section's L7 bytes (§2.2–2.5) |
//! | `POLL` 0xD1 | block u64 (the result awaited), last seq sent u32 |
//! | `REG_READ` 0xD2 | register address u16 (§4) |
//! | `HELLO` 0xD3 | — (resets the card: empty caches, KV store and policy table; sequence from 0) |
//! | `FETCH` 0xD4 | block u64 (a result asked for by a host that does not feed the card, [`UdpCardReader`]) |
//! | `IDENT` 0xD5 | — (asks the card's N×M without resetting it; answered by `HELLO_ACK`) |
//!
//! | card → host | bytes after the kind byte |
//! | --- | --- |
//! | `NACK` 0xE0 | first missing seq u32, count u16 |
//! | `RESULT` 0xE1 | block u64, block valid u8, LATENCY u32, cycle u64, tx count u16, one code byte per tx |
//! | `REG_VALUE` 0xE2 | address u16, value u32 |
//! | `HELLO_ACK` 0xE3 | N u8, M u8 |
//! | `FAULT` 0xE4 | a UTF-8 message: the card failed (simulation timeout, sticky STATUS error) |
//! | `PENDING` 0xE5 | block u64 (the one fetched), 1 if a result is kept u8, the newest kept result's block u64 |
//!
//! A card has one sender, the host that last sent `HELLO`: the committer ([`UdpCard`]) or a relay beside the
//! orderer that feeds the card for it (hw/DESIGN.md §7). Any number of hosts may `FETCH` results and read registers.

use std::collections::{BTreeMap, VecDeque};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use std::any::Any;

use ferrofabric_bmac::wire::{Section, SectionType, L7_LEN};
use ferrofabric_bmac::{CardLink, CardResult, LinkError};

/// Kind byte of a `DATA` datagram (host → card).
pub const DATA: u8 = 0xD0;
/// Kind byte of a `POLL` datagram (host → card).
pub const POLL: u8 = 0xD1;
/// Kind byte of a `REG_READ` datagram (host → card).
pub const REG_READ: u8 = 0xD2;
/// Kind byte of a `HELLO` datagram (host → card).
pub const HELLO: u8 = 0xD3;
/// Kind byte of a `FETCH` datagram (host → card).
pub const FETCH: u8 = 0xD4;
/// Kind byte of an `IDENT` datagram (host → card).
pub const IDENT: u8 = 0xD5;
/// Kind byte of a `NACK` datagram (card → host).
pub const NACK: u8 = 0xE0;
/// Kind byte of a `RESULT` datagram (card → host).
pub const RESULT: u8 = 0xE1;
/// Kind byte of a `REG_VALUE` datagram (card → host).
pub const REG_VALUE: u8 = 0xE2;
/// Kind byte of a `HELLO_ACK` datagram (card → host).
pub const HELLO_ACK: u8 = 0xE3;
/// Kind byte of a `FAULT` datagram (card → host).
pub const FAULT: u8 = 0xE4;
/// Kind byte of a `PENDING` datagram (card → host).
pub const PENDING: u8 = 0xE5;

/// Datagrams past the next expected one that the card's receive buffer holds; later ones are dropped (and asked
/// for again once the gap closes).
pub const REORDER_WINDOW: u32 = 8192;

/// Most datagrams one NACK asks for.
pub const NACK_MAX: u32 = 256;

/// How often the card repeats a NACK for a gap that has not closed, and the host a `FETCH` or `REG_READ`.
pub const RETRY: Duration = Duration::from_millis(20);

/// How often the host polls the card while it waits for a block result.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// Why the link to a card on the network failed.
#[derive(Debug, thiserror::Error)]
pub enum NetCardError {
    /// The socket failed.
    #[error("card link: {0}")]
    Io(#[from] std::io::Error),
    /// No answer within the deadline.
    #[error("card link: no {0} within {1:?}")]
    Timeout(&'static str, Duration),
    /// The card reported a failure, or sent something the protocol does not allow.
    #[error("card: {0}")]
    Card(String),
}

/// Whether a receive ended without a datagram: its timeout passed, the socket had nothing (non-blocking), or a
/// signal interrupted the wait. The caller just looks again.
pub fn nothing_arrived(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

/// A `RESULT` datagram: block u64, block valid u8, LATENCY u32, cycle u64, tx count u16, one code byte per tx.
pub fn encode_result(r: &CardResult) -> Vec<u8> {
    let mut d = Vec::with_capacity(24 + r.codes.len());
    d.push(RESULT);
    d.extend_from_slice(&r.number.to_be_bytes());
    d.push(u8::from(r.block_valid));
    d.extend_from_slice(&r.latency.to_be_bytes());
    d.extend_from_slice(&r.at_cycle.to_be_bytes());
    d.extend_from_slice(&(r.codes.len() as u16).to_be_bytes());
    d.extend_from_slice(&r.codes);
    d
}

/// The result in a `RESULT` datagram ([`encode_result`]); `None` if it is malformed.
pub fn decode_result(d: &[u8]) -> Option<CardResult> {
    let fixed = d.get(..24)?;
    let n = usize::from(u16::from_be_bytes([fixed[22], fixed[23]]));
    let codes = d.get(24..24 + n)?.to_vec();
    Some(CardResult {
        number: u64::from_be_bytes(fixed[1..9].try_into().ok()?),
        block_valid: fixed[9] != 0,
        latency: u32::from_be_bytes(fixed[10..14].try_into().ok()?),
        at_cycle: u64::from_be_bytes(fixed[14..22].try_into().ok()?),
        codes,
    })
}

/// A deliberately bad link, for tests and drills on loopback: the first transmission of every `drop_every`-th data
/// datagram is lost, and every `swap_every`-th one is sent after the one that follows it (0: never).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Impairment {
    /// Drop the first transmission of data datagrams whose seq % `drop_every` == `drop_every` - 1.
    pub drop_every: u32,
    /// Hold back data datagrams whose seq % `swap_every` == 0 until the next one is sent.
    pub swap_every: u32,
}

/// What the link did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Data datagrams sent the first time.
    pub datagrams: u64,
    /// Of those, dropped by the [`Impairment`].
    pub dropped: u64,
    /// Data datagrams sent again on a NACK.
    pub retransmitted: u64,
    /// NACKs received.
    pub nacks: u64,
    /// Polls sent while waiting for a result.
    pub polls: u64,
}

/// The host's end of the link to a card on the network (the module docs' protocol).
pub struct UdpCard {
    socket: UdpSocket,
    config: (u32, u32),
    seq: u32,
    /// Data datagrams not yet known to have reached the card, by seq.
    unacked: BTreeMap<u32, Vec<u8>>,
    /// Blocks whose METADATA was sent, with that datagram's seq: their results, in order.
    awaiting: VecDeque<(u64, u32)>,
    results: VecDeque<CardResult>,
    deadline: Duration,
    impairment: Impairment,
    held: Option<Vec<u8>>,
    stats: LinkStats,
}

impl UdpCard {
    /// Connects to the card at `card` and resets it (`HELLO`); a block result must then come within `deadline` of
    /// the wait for it.
    ///
    /// Errors: the socket fails, or the card does not answer within 5 s.
    pub fn connect(card: SocketAddr, deadline: Duration) -> Result<UdpCard, NetCardError> {
        let (socket, config) = handshake(card, HELLO)?;
        Ok(UdpCard {
            socket,
            config,
            seq: 0,
            unacked: BTreeMap::new(),
            awaiting: VecDeque::new(),
            results: VecDeque::new(),
            deadline,
            impairment: Impairment::default(),
            held: None,
            stats: LinkStats::default(),
        })
    }

    /// The card's N×M.
    pub fn config(&self) -> (u32, u32) {
        self.config
    }

    /// How long [`UdpCard::next_result`] waits for a block result from now on.
    pub fn set_deadline(&mut self, deadline: Duration) {
        self.deadline = deadline;
    }

    /// Makes the link lose and reorder datagrams from now on.
    pub fn set_impairment(&mut self, impairment: Impairment) {
        self.impairment = impairment;
    }

    /// What the link did so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Sends one section (its L7 bytes, [`Section::to_l7`]).
    ///
    /// Errors: the socket fails.
    pub fn send(&mut self, l7: &[u8]) -> Result<(), NetCardError> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let mut d = Vec::with_capacity(5 + l7.len());
        d.push(DATA);
        d.extend_from_slice(&seq.to_be_bytes());
        d.extend_from_slice(l7);
        if l7.len() >= L7_LEN && l7[1] == SectionType::Metadata as u8 {
            let block = u64::from_be_bytes(l7[4..12].try_into().unwrap_or_default());
            self.awaiting.push_back((block, seq));
        }
        self.unacked.insert(seq, d.clone());
        self.stats.datagrams += 1;
        let Impairment { drop_every, swap_every } = self.impairment;
        if drop_every > 0 && seq % drop_every == drop_every - 1 {
            self.stats.dropped += 1;
            return Ok(());
        }
        if swap_every > 0 && seq.is_multiple_of(swap_every) && self.held.is_none() {
            self.held = Some(d);
            return Ok(());
        }
        self.socket.send(&d)?;
        self.flush_held()
    }

    fn flush_held(&mut self) -> Result<(), NetCardError> {
        if let Some(d) = self.held.take() {
            self.socket.send(&d)?;
        }
        Ok(())
    }

    /// Waits for the result of the oldest block sent and not yet answered, retransmitting what the card asks for.
    ///
    /// Errors: no block is awaited, the card failed (`FAULT`), or no result came within the deadline.
    pub fn next_result(&mut self) -> Result<CardResult, NetCardError> {
        self.flush_held()?;
        let &(block, meta_seq) =
            self.awaiting.front().ok_or_else(|| NetCardError::Card("no block result is awaited".into()))?;
        let started = Instant::now();
        let mut polled = Instant::now();
        self.socket.set_read_timeout(Some(RETRY))?;
        let mut buf = vec![0u8; 65_536];
        loop {
            if let Some(r) = self.results.pop_front() {
                self.awaiting.pop_front();
                // The card feeds in sequence order: everything up to the block's METADATA has reached it.
                self.unacked = self.unacked.split_off(&meta_seq.wrapping_add(1));
                return Ok(r);
            }
            if started.elapsed() > self.deadline {
                return Err(NetCardError::Timeout("block result", self.deadline));
            }
            match self.socket.recv(&mut buf) {
                Ok(len) => self.answer(&buf[..len], block)?,
                Err(e) if nothing_arrived(&e) => {}
                Err(e) => return Err(e.into()),
            }
            if polled.elapsed() >= POLL_EVERY {
                polled = Instant::now();
                self.stats.polls += 1;
                let mut d = vec![POLL];
                d.extend_from_slice(&block.to_be_bytes());
                d.extend_from_slice(&self.seq.wrapping_sub(1).to_be_bytes());
                self.socket.send(&d)?;
            }
        }
    }

    /// Handles one datagram from the card while waiting for `block`'s result.
    fn answer(&mut self, d: &[u8], block: u64) -> Result<(), NetCardError> {
        match d.first().copied() {
            Some(RESULT) => match decode_result(d) {
                Some(r) if r.number == block && self.results.is_empty() => self.results.push_back(r),
                Some(_) => {} // a result sent again that was already taken
                None => return Err(NetCardError::Card("malformed RESULT".into())),
            },
            Some(NACK) if d.len() == 7 => {
                self.stats.nacks += 1;
                let from = u32::from_be_bytes([d[1], d[2], d[3], d[4]]);
                let count = u32::from(u16::from_be_bytes([d[5], d[6]]));
                for seq in (0..count).map(|i| from.wrapping_add(i)) {
                    if let Some(again) = self.unacked.get(&seq) {
                        self.socket.send(again)?;
                        self.stats.retransmitted += 1;
                    }
                }
            }
            Some(FAULT) => return Err(NetCardError::Card(String::from_utf8_lossy(&d[1..]).into_owned())),
            _ => {}
        }
        Ok(())
    }

    /// Reads one of the card's registers (§4).
    ///
    /// Errors: the card failed, or did not answer within the deadline.
    pub fn read_reg(&mut self, addr: u16) -> Result<u32, NetCardError> {
        read_register(&self.socket, addr, self.deadline)
    }
}

/// A socket connected to the card at `card`, and the card's N×M from its `HELLO_ACK` to `kind` (`HELLO`, which
/// resets the card, or `IDENT`, which does not).
///
/// Errors: the socket fails, or the card does not answer within 5 s.
fn handshake(card: SocketAddr, kind: u8) -> Result<(UdpSocket, (u32, u32)), NetCardError> {
    let local: SocketAddr =
        if card.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
    let socket = UdpSocket::bind(local)?;
    socket.connect(card)?;
    socket.set_read_timeout(Some(Duration::from_millis(250)))?;
    let mut buf = [0u8; 64];
    for _ in 0..20 {
        socket.send(&[kind])?;
        match socket.recv(&mut buf) {
            Ok(3) if buf[0] == HELLO_ACK => return Ok((socket, (u32::from(buf[1]), u32::from(buf[2])))),
            Ok(_) => {}
            Err(e) if nothing_arrived(&e) => {}
            // Nothing listens there yet (ICMP port unreachable): try again.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => std::thread::sleep(Duration::from_millis(250)),
            Err(e) => return Err(e.into()),
        }
    }
    Err(NetCardError::Timeout("HELLO_ACK", Duration::from_secs(5)))
}

/// Reads one of the card's registers (§4) over `socket`, asking again every [`RETRY`] until `deadline`.
fn read_register(socket: &UdpSocket, addr: u16, deadline: Duration) -> Result<u32, NetCardError> {
    socket.set_read_timeout(Some(RETRY))?;
    let started = Instant::now();
    let mut buf = vec![0u8; 65_536];
    while started.elapsed() < deadline {
        socket.send(&[&[REG_READ][..], &addr.to_be_bytes()].concat())?;
        match socket.recv(&mut buf) {
            Ok(7) if buf[0] == REG_VALUE && buf[1..3] == addr.to_be_bytes() => {
                return Ok(u32::from_be_bytes([buf[3], buf[4], buf[5], buf[6]]))
            }
            Ok(len) if buf[0] == FAULT => {
                return Err(NetCardError::Card(String::from_utf8_lossy(&buf[1..len]).into_owned()))
            }
            Ok(_) => {}
            Err(e) if nothing_arrived(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(NetCardError::Timeout("register value", deadline))
}

/// The end of a host that reads a card's results but does not feed it: the committer, when a relay beside the
/// orderer sends the card its blocks (hw/DESIGN.md §7). It never resets the card; it fetches each block's result
/// by number.
pub struct UdpCardReader {
    socket: UdpSocket,
    config: (u32, u32),
    deadline: Duration,
}

impl UdpCardReader {
    /// Reaches the card at `card` without resetting it (`IDENT`); a block result must then come within
    /// `deadline` of the wait for it.
    ///
    /// Errors: the socket fails, or the card does not answer within 5 s.
    pub fn connect(card: SocketAddr, deadline: Duration) -> Result<UdpCardReader, NetCardError> {
        let (socket, config) = handshake(card, IDENT)?;
        Ok(UdpCardReader { socket, config, deadline })
    }

    /// The card's N×M.
    pub fn config(&self) -> (u32, u32) {
        self.config
    }

    /// The card's result for `block`, asked for every `RETRY` while it is not there. `Ok(None)`: the card will
    /// not have it, because it already has a result for a later block, so `block` was forgotten (more than
    /// 4,096 card blocks ago) or never reached it; the host validates that block itself.
    ///
    /// Errors: the socket fails, the card sends a malformed result, or the card has no result for `block` or a
    /// later one within the deadline (its sender is behind or gone, or the card failed).
    pub fn result_of(&mut self, block: u64) -> Result<Option<CardResult>, NetCardError> {
        self.socket.set_read_timeout(Some(RETRY))?;
        let started = Instant::now();
        let mut buf = vec![0u8; 65_536];
        let mut fetch = vec![FETCH];
        fetch.extend_from_slice(&block.to_be_bytes());
        let mut asked: Option<Instant> = None;
        while started.elapsed() <= self.deadline {
            if asked.is_none_or(|t| t.elapsed() >= RETRY) {
                self.socket.send(&fetch)?;
                asked = Some(Instant::now());
            }
            let len = match self.socket.recv(&mut buf) {
                Ok(len) => len,
                Err(e) if nothing_arrived(&e) => continue,
                Err(e) => return Err(e.into()),
            };
            let d = &buf[..len];
            match d.first().copied() {
                Some(RESULT) => match decode_result(d) {
                    Some(r) if r.number == block => return Ok(Some(r)),
                    Some(_) => {} // the answer to an earlier fetch
                    None => return Err(NetCardError::Card("malformed RESULT".into())),
                },
                Some(PENDING) if len == 18 && d[1..9] == block.to_be_bytes() => {
                    let newest = u64::from_be_bytes(d[10..18].try_into().unwrap_or_default());
                    if d[9] == 1 && newest > block {
                        return Ok(None);
                    }
                }
                _ => {}
            }
        }
        Err(NetCardError::Timeout("block result", self.deadline))
    }
}

impl CardLink for UdpCard {
    fn kind(&self) -> &'static str {
        "card on udp"
    }

    fn config(&self) -> (u32, u32) {
        self.config
    }

    fn send_section(&mut self, section: &Section) -> Result<(), LinkError> {
        self.send(&section.to_l7()?).map_err(LinkError::new)
    }

    fn result_of(&mut self, _number: u64) -> Result<Option<CardResult>, LinkError> {
        self.next_result().map(Some).map_err(LinkError::new)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl CardLink for UdpCardReader {
    fn kind(&self) -> &'static str {
        "relayed card on udp"
    }

    fn config(&self) -> (u32, u32) {
        self.config
    }

    /// Sends nothing: the relay sends the same sections, from its own copy of the ledger.
    fn send_section(&mut self, _section: &Section) -> Result<(), LinkError> {
        Ok(())
    }

    fn result_of(&mut self, number: u64) -> Result<Option<CardResult>, LinkError> {
        UdpCardReader::result_of(self, number).map_err(LinkError::new)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
