#!/usr/bin/env node
// Drives a running `ferrofabric node` with Hyperledger Fabric's own Node SDK (fabric-network 2.2), exactly as a
// Fabric application would: a connection profile, an X.509 wallet identity (User1@org1.example.com), a Gateway (discovery
// off, or on with --discovery), submitTransaction (endorse at both orgs' peers -> Broadcast to the orderer -> wait for the commit
// event on the peers' DeliverFiltered streams) and evaluateTransaction.
//
// Usage: node smallbank.js DIR/node.json [--discovery]
//   --discovery: the SDK asks the peer's discovery service instead of reading peers and orderers from the profile.
//   node.json is what `ferrofabric node` writes when ready: {channel, crypto, connection_profile, ...}.
// Exit status 0 only if every check passed; each step prints one line.

'use strict';

const fs = require('fs');
const { Gateway, Wallets, DefaultEventHandlerStrategies } = require('fabric-network');
const { account, userCredentials } = require('./network');

const CHAINCODE = 'smallbank';
const USER = 'User1@org1.example.com';
const MSPID = 'Org1MSP';

function log(msg) {
	console.log(`[sdk] ${msg}`);
}

function fail(msg) {
	throw new Error(msg);
}

// The user's wallet identity.
function loadIdentity(cryptoDir) {
	return { credentials: userCredentials(cryptoDir, 'org1.example.com', USER), mspId: MSPID, type: 'X.509' };
}

async function expectQuery(contract, id, expected) {
	const got = (await contract.evaluateTransaction('query', id)).toString('utf8');
	if (got !== expected) {
		fail(`query ${id}: expected ${expected}, got ${got}`);
	}
	log(`query ${id} -> ${got}`);
}

// One submit that must commit VALID: submitTransaction only resolves after the commit event of every event-source
// peer (NETWORK_SCOPE_ALLFORTX) said VALID. Returns the txid.
async function submit(contract, committed, fcn, ...args) {
	const tx = contract.createTransaction(fcn);
	const txid = tx.getTransactionId();
	const started = Date.now();
	const result = await tx.submit(...args);
	log(`submit ${fcn}(${args.join(', ')}) committed VALID in ${Date.now() - started} ms (tx ${txid})`);
	committed.push(txid);
	return result;
}

async function main() {
	const nodeJson = process.argv[2];
	const discovery = process.argv.includes('--discovery');
	if (!nodeJson) {
		fail('usage: node smallbank.js DIR/node.json');
	}
	const node = JSON.parse(fs.readFileSync(nodeJson, 'utf8'));
	const ccpPath = node.connection_profile || fail(`${nodeJson} has no connection_profile`);
	const ccp = JSON.parse(fs.readFileSync(ccpPath, 'utf8'));
	const channel = node.channel || 'mychannel';
	log(`connection profile ${ccpPath}, channel ${channel}`);

	const wallet = await Wallets.newInMemoryWallet();
	await wallet.put(USER, loadIdentity(node.crypto || fail(`${nodeJson} has no crypto`)));

	const gateway = new Gateway();
	await gateway.connect(ccp, {
		wallet,
		identity: USER,
		// With --discovery the SDK asks the peer's discovery service for the MSPs, orderers, peers and endorsement
		// layouts instead of taking them from the connection profile.
		discovery: { enabled: discovery, asLocalhost: false },
		eventHandlerOptions: {
			strategy: DefaultEventHandlerStrategies.NETWORK_SCOPE_ALLFORTX,
			endorseTimeout: 30,
			commitTimeout: 60,
		},
		queryHandlerOptions: { timeout: 30 },
	});
	try {
		const network = await gateway.getNetwork(channel);
		const contract = network.getContract(CHAINCODE);

		// Every filtered block the SDK receives, to check the validation codes independently of the submit
		// promises: txid -> [validation code per peer that reported it].
		const seen = new Map();
		await network.addBlockListener(async (event) => {
			for (const t of event.getTransactionEvents()) {
				const codes = seen.get(t.transactionId) || [];
				codes.push(t.status);
				seen.set(t.transactionId, codes);
			}
		}, { type: 'filtered' });

		const run = `${process.pid}-${Date.now()}`;
		const a = `a-${run}`;
		const b = `b-${run}`;
		const committed = [];

		await submit(contract, committed, 'create_account', a, 'alice', '1000', '500');
		await submit(contract, committed, 'create_account', b, 'bob', '200', '50');
		await expectQuery(contract, a, account(a, 'alice', 500, 1000));
		await submit(contract, committed, 'deposit_checking', '100', a); // a.checking 1100
		await submit(contract, committed, 'send_payment', '300', b, a); // a.checking 800, b.checking 500
		await submit(contract, committed, 'transact_savings', '25', b); // b.savings 75
		await submit(contract, committed, 'amalgamate', b, a); // b.checking 1000, a.savings 0
		await submit(contract, committed, 'write_check', '50', a); // a.checking 750
		await expectQuery(contract, a, account(a, 'alice', 0, 750));
		await expectQuery(contract, b, account(b, 'bob', 75, 1000));

		// A proposal the chaincode refuses (status 500 at both endorsers): no endorsement, so the SDK must reject
		// before anything is ordered.
		const missing = `missing-${run}`;
		try {
			await contract.submitTransaction('send_payment', '1', b, missing);
			fail('send_payment from a missing account was committed');
		} catch (err) {
			if (!/No valid responses from any peers/.test(err.message) ||
				!err.message.includes(`Could not find specified account ${missing}`)) {
				throw new Error(`send_payment from a missing account: unexpected error: ${err.message}`);
			}
			log('submit send_payment from a missing account rejected at endorsement, as expected');
		}

		// Two transactions endorsed against the same version of account a, ordered together: the committer must
		// mark the second MVCC_READ_CONFLICT and the SDK must reject its submit with that code.
		const first = contract.createTransaction('deposit_checking');
		const second = contract.createTransaction('deposit_checking');
		const outcomes = await Promise.allSettled([first.submit('1', a), second.submit('2', a)]);
		const valid = outcomes.filter((o) => o.status === 'fulfilled').length;
		const conflicts = outcomes.filter((o) => o.status === 'rejected');
		for (const c of conflicts) {
			if (c.reason.transactionCode !== 'MVCC_READ_CONFLICT') {
				throw new Error(`conflicting deposit: expected MVCC_READ_CONFLICT, got: ${c.reason.transactionCode} ` +
					`(${c.reason.message})`);
			}
		}
		if (valid !== 1 || conflicts.length !== 1) {
			fail(`conflicting deposits: expected 1 valid and 1 MVCC_READ_CONFLICT, got ${valid} valid`);
		}
		const winner = outcomes[0].status === 'fulfilled' ? first : second;
		const loser = winner === first ? second : first;
		committed.push(winner.getTransactionId());
		log(`conflicting deposits: ${winner.getTransactionId()} VALID, ${loser.getTransactionId()} ` +
			'MVCC_READ_CONFLICT (submit rejected), as expected');
		await expectQuery(contract, a, account(a, 'alice', 0, winner === first ? 751 : 752));

		// The block listener saw every committed transaction as VALID and the loser as MVCC_READ_CONFLICT.
		const deadline = Date.now() + 10000;
		const pending = () => [...committed, loser.getTransactionId()].filter((t) => !seen.has(t));
		while (pending().length > 0 && Date.now() < deadline) {
			await new Promise((r) => setTimeout(r, 100));
		}
		if (pending().length > 0) {
			fail(`block listener never saw transactions ${pending().join(', ')}`);
		}
		for (const t of committed) {
			if (!seen.get(t).every((c) => c === 'VALID')) {
				fail(`transaction ${t}: filtered blocks reported ${seen.get(t)}`);
			}
		}
		if (!seen.get(loser.getTransactionId()).every((c) => c === 'MVCC_READ_CONFLICT')) {
			fail(`transaction ${loser.getTransactionId()}: filtered blocks reported ${seen.get(loser.getTransactionId())}`);
		}
		log(`filtered block events: ${committed.length} transactions VALID, 1 MVCC_READ_CONFLICT`);
	} finally {
		gateway.disconnect();
	}
	log('PASS');
}

main().then(() => process.exit(0), (err) => {
	console.error(`[sdk] FAIL: ${err && err.stack ? err.stack : err}`);
	process.exit(1);
});
