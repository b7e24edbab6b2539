#!/usr/bin/env node
// Drives a running `ferrofabric node` with Fabric's current client API, @hyperledger/fabric-gateway (Node), which
// speaks only to a peer's Gateway service: smallbank submits (endorsed by the gateway through both orgs' peers, as
// the chaincode's AND policy needs), evaluates, commit status, an endorsement the chaincode refuses, an MVCC
// conflict and an endorsement-policy failure as Fabric reports them, and the `kv` chaincode's events.
//
// Usage: node gateway.js DIR/node.json
//   node.json is what `ferrofabric node` writes when ready: {channel, peers, crypto, ...}.
// Exit status 0 only if every check passed; each step prints one line.

'use strict';

const crypto = require('crypto');
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const { connect, hash, signers, CommitError, EndorseError, StatusCode } = require('@hyperledger/fabric-gateway');
const { account, userCredentials } = require('./network');

const USER = 'User1@org1.example.com';
const MSPID = 'Org1MSP';

function log(msg) {
	console.log(`[gateway] ${msg}`);
}

function fail(msg) {
	throw new Error(msg);
}

const utf8 = (bytes) => Buffer.from(bytes).toString('utf8');

async function expectQuery(contract, id, expected) {
	const got = utf8(await contract.evaluateTransaction('query', id));
	if (got !== expected) {
		fail(`evaluate query ${id}: expected ${expected}, got ${got}`);
	}
	log(`evaluate query ${id} -> ${got}`);
}

async function main() {
	const nodeJson = process.argv[2] || fail('usage: node gateway.js DIR/node.json');
	const node = JSON.parse(fs.readFileSync(nodeJson, 'utf8'));
	const channel = node.channel || 'mychannel';
	const peer = node.peers[MSPID] || fail(`${nodeJson} names no ${MSPID} peer`);
	const user = userCredentials(node.crypto, 'org1.example.com', USER);
	const certificate = Buffer.from(user.certificate);
	const privateKey = crypto.createPrivateKey(user.privateKey);

	// TLS when the node speaks it (node.json names the organisations' TLS CA bundle), as Fabric's test network.
	const credentials = node.tls_ca ? grpc.credentials.createSsl(fs.readFileSync(node.tls_ca)) : grpc.credentials.createInsecure();
	const client = new grpc.Client(peer, credentials);
	log(`connecting to ${node.tls_ca ? 'grpcs' : 'grpc'}://${peer}`);
	const gateway = connect({
		client,
		identity: { mspId: MSPID, credentials: certificate },
		signer: signers.newPrivateKeySigner(privateKey),
		hash: hash.sha256,
		evaluateOptions: () => ({ deadline: Date.now() + 30000 }),
		endorseOptions: () => ({ deadline: Date.now() + 30000 }),
		submitOptions: () => ({ deadline: Date.now() + 30000 }),
		commitStatusOptions: () => ({ deadline: Date.now() + 60000 }),
	});
	try {
		const network = gateway.getNetwork(channel);
		const smallbank = network.getContract('smallbank');
		const run = `${process.pid}-${Date.now()}`;
		const a = `a-${run}`;
		const b = `b-${run}`;

		// submitTransaction = Endorse (Org1's peer, then Org2's by the AND policy) -> Submit -> CommitStatus VALID.
		for (const [id, name, checking, savings] of [[a, 'alice', '1000', '500'], [b, 'bob', '200', '50']]) {
			const started = Date.now();
			await smallbank.submitTransaction('create_account', id, name, checking, savings);
			log(`submit create_account(${id}) committed VALID in ${Date.now() - started} ms`);
		}
		await expectQuery(smallbank, a, account(a, 'alice', 500, 1000));

		// submitAsync, then the commit status: code, block number, and both orgs' endorsements in the transaction.
		const submitted = await smallbank.submitAsync('send_payment', { arguments: ['300', b, a] });
		const status = await submitted.getStatus();
		if (!status.successful || status.code !== StatusCode.VALID) {
			fail(`send_payment: commit status ${status.code}`);
		}
		log(`submitAsync send_payment: CommitStatus VALID in block ${status.blockNumber} (tx ${status.transactionId})`);
		await expectQuery(smallbank, b, account(b, 'bob', 50, 500));

		// A proposal the chaincode refuses: Endorse fails with ABORTED and the endorser's message in the details.
		const missing = `missing-${run}`;
		try {
			await smallbank.submitTransaction('send_payment', '1', b, missing);
			fail('send_payment from a missing account was committed');
		} catch (err) {
			const detail = (err.details || []).map((d) => d.message).join(' | ');
			if (!(err instanceof EndorseError) || err.code !== grpc.status.ABORTED ||
				!detail.includes(`Could not find specified account ${missing}`)) {
				throw new Error(`send_payment from a missing account: unexpected error: ${err} (details: ${detail})`);
			}
			log(`endorse send_payment from a missing account: EndorseError ABORTED, detail "${detail}"`);
		}

		// Two transactions endorsed against the same version of account a, then both submitted: one VALID, the
		// other MVCC_READ_CONFLICT.
		const first = await smallbank.newProposal('deposit_checking', { arguments: ['1', a] }).endorse();
		const second = await smallbank.newProposal('deposit_checking', { arguments: ['2', a] }).endorse();
		const commits = [await first.submit(), await second.submit()];
		const codes = await Promise.all(commits.map(async (c) => (await c.getStatus()).code));
		if (codes[0] !== StatusCode.VALID || codes[1] !== StatusCode.MVCC_READ_CONFLICT) {
			fail(`conflicting deposits: expected codes [VALID, MVCC_READ_CONFLICT], got [${codes}]`);
		}
		log('conflicting deposits: first VALID, second MVCC_READ_CONFLICT, as expected');
		await expectQuery(smallbank, a, account(a, 'alice', 500, 701));

		// Endorsed by Org1 alone, against smallbank's AND(Org1, Org2) policy: ordered, then invalidated by the
		// committer's VSCC; submitTransaction throws a CommitError with that code.
		try {
			await smallbank.submit('deposit_checking', { arguments: ['5', a], endorsingOrganizations: [MSPID] });
			fail('a transaction endorsed by Org1 alone committed VALID');
		} catch (err) {
			if (!(err instanceof CommitError) || err.code !== StatusCode.ENDORSEMENT_POLICY_FAILURE) {
				throw new Error(`endorsement by Org1 alone: unexpected error: ${err}`);
			}
			log(`endorsement by Org1 alone: CommitError ENDORSEMENT_POLICY_FAILURE (tx ${err.transactionId})`);
		}
		await expectQuery(smallbank, a, account(a, 'alice', 500, 701));

		// Chaincode events: kv's put emits `put` with the key; read them back from the put's block.
		const kv = network.getContract('kv');
		const key = `k-${run}`;
		const put = await kv.submitAsync('put', { arguments: [key, 'v'] });
		const putStatus = await put.getStatus();
		if (!putStatus.successful) {
			fail(`kv put: commit status ${putStatus.code}`);
		}
		const events = await network.getChaincodeEvents('kv', { startBlock: putStatus.blockNumber });
		try {
			for await (const event of events) {
				if (event.transactionId !== put.getTransactionId() || event.eventName !== 'put' ||
					utf8(event.payload) !== key || event.blockNumber !== putStatus.blockNumber) {
					fail(`unexpected chaincode event ${event.eventName} of ${event.transactionId} in block ${event.blockNumber}`);
				}
				log(`chaincode event kv/put "${utf8(event.payload)}" in block ${event.blockNumber}, as expected`);
				break;
			}
		} finally {
			events.close();
		}
	} finally {
		gateway.close();
		client.close();
	}
	log('PASS');
}

main().then(() => process.exit(0), (err) => {
	console.error(`[gateway] FAIL: ${err && err.stack ? err.stack : err}`);
	process.exit(1);
});
