//! The card on the network (hw/DESIGN.md §7): the co-simulated card behind a real UDP socket on loopback, fed by the
//! host over a link that loses and reorders datagrams, gives every block the software validator's codes and commit
//! hash; a card that stops answering leaves its block to the host, which commits it.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use ferrofabric_bmac::{BlockPath, BlockProcessor, CardProcessor};
use ferrofabric_bmac_boards::{Impairment, UdpCard};
use ferrofabric_bmac_sim::serve_card;

#[test]
fn a_card_behind_udp_gives_the_software_codes_through_lost_and_reordered_datagrams() {
    let Some((n, m)) = config() else { return };
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || serve_card(&socket, n, m, &stop))
    };

    let blocks = fixture_blocks();
    let mut hw =
        CardProcessor::new(blocks[0].clone(), Box::new(UdpCard::connect(addr, Duration::from_secs(600)).unwrap()))
            .unwrap();
    assert_eq!(hw.name(), format!("card on udp {n}x{m}"));
    // Every 5th datagram lost the first time, every 3rd sent after the one behind it.
    hw.link_mut::<UdpCard>().unwrap().set_impairment(Impairment { drop_every: 5, swap_every: 3 });
    let (on_card, mut sw) = fixture_through(&mut hw, &blocks);
    assert_eq!(on_card, 2);
    let link = hw.link_mut::<UdpCard>().unwrap().stats();
    eprintln!("link: {link:?}");
    assert!(link.dropped > 0 && link.nacks > 0, "{link:?}");
    assert!(link.retransmitted >= link.dropped, "every lost datagram was sent again: {link:?}");

    // The card goes away: the next block gets no result (the link reports the card unreachable, or the deadline
    // passes), and the host commits it.
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap().unwrap();
    hw.link_mut::<UdpCard>().unwrap().set_deadline(Duration::from_secs(1));
    let want = sw.process(blocks[9].clone()).unwrap();
    let got = hw.commit(blocks[9].clone()).unwrap();
    assert!(hw.card_off().is_some_and(|why| why.contains("card link")), "{:?}", hw.card_off());
    assert!(matches!(got.path, BlockPath::Host(_)));
    assert_eq!((&got.result.codes, got.result.commit_hash), (&want.codes, want.commit_hash));
}
