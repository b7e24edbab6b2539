#!/usr/bin/env node
// Drives the asset registry contract (tests/chaincode-node/assets, or its Java edition tests/chaincode-java),
// deployed to a running `ferrofabric node` by Fabric's lifecycle flow as chaincode CHAINCODE, through
// @hyperledger/fabric-gateway: put/get/delete, a range over more than 100 keys, pagination, a composite-key index,
// history, chaincode events, a chaincode error, a key-level endorsement policy, a chaincode-to-chaincode call and
// concurrent clients.
//
// Usage: node assets.js DIR/node.json [CHAINCODE [OTHER [--without STEP,...]]]   (default assets and assets2;
//   OTHER is a chaincode of the same contract that CHAINCODE calls; --without page,restrict,events,c2c,concurrent
//   leaves out the steps that need what a shim may lack: a page's bookmark, state validation parameters, chaincode
//   events, a chaincode-to-chaincode call, many transactions in flight on its stream)
// Exit status 0 only if every check passed; each step prints one line.

'use strict';

const crypto = require('crypto');
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const { connect, hash, signers, CommitError, EndorseError, StatusCode } = require('@hyperledger/fabric-gateway');
const { userCredentials } = require('./network');

const MSPID = 'Org1MSP';

const log = (msg) => console.log(`[assets] ${msg}`);
const fail = (msg) => {
	throw new Error(msg);
};
const utf8 = (bytes) => Buffer.from(bytes).toString('utf8');

function gatewayOf(node, user) {
	const peer = node.peers[MSPID] || fail(`node.json names no ${MSPID} peer`);
	const id = userCredentials(node.crypto, 'org1.example.com', user);
	const credentials = node.tls_ca ? grpc.credentials.createSsl(fs.readFileSync(node.tls_ca)) : grpc.credentials.createInsecure();
	const client = new grpc.Client(peer, credentials);
	const gateway = connect({
		client,
		identity: { mspId: MSPID, credentials: Buffer.from(id.certificate) },
		signer: signers.newPrivateKeySigner(crypto.createPrivateKey(id.privateKey)),
		hash: hash.sha256,
		evaluateOptions: () => ({ deadline: Date.now() + 30000 }),
		endorseOptions: () => ({ deadline: Date.now() + 30000 }),
		submitOptions: () => ({ deadline: Date.now() + 30000 }),
		commitStatusOptions: () => ({ deadline: Date.now() + 60000 }),
	});
	return { gateway, client };
}

async function expectEqual(what, got, expected) {
	if (got !== expected) {
		fail(`${what}: expected ${expected}, got ${got}`);
	}
	log(`${what} -> ${got}`);
}

async function main() {
	const node = JSON.parse(fs.readFileSync(process.argv[2] || fail('usage: node assets.js DIR/node.json'), 'utf8'));
	const { gateway, client } = gatewayOf(node, 'User1@org1.example.com');
	try {
		const network = gateway.getNetwork(node.channel || 'mychannel');
		const name = process.argv[3] || 'assets';
		const other = process.argv[4] || 'assets2';
		const without = process.argv[5] === '--without' ? (process.argv[6] || '').split(',') : [];
		const assets = network.getContract(name);
		const run = `${name}-${process.pid}`;

		// put, get, remove; the history of the key.
		const id = `asset-${run}`;
		await assets.submitTransaction('put', id, 'blue');
		await expectEqual(`get ${id}`, utf8(await assets.evaluateTransaction('get', id)), 'blue');
		await assets.submitTransaction('put', id, 'green');
		await assets.submitTransaction('remove', id);
		await expectEqual(`history ${id}`, utf8(await assets.evaluateTransaction('history', id)), '["blue","green",null]');
		try {
			await assets.evaluateTransaction('get', id);
			fail(`get of a removed asset answered`);
		} catch (err) {
			const detail = (err.details || []).map((d) => d.message).join(' | ');
			if (!detail.includes(`asset ${id} does not exist`)) {
				throw new Error(`get of a removed asset: unexpected error ${err} (details: ${detail})`);
			}
			log(`get of a removed asset: ${err.constructor.name}, detail "${detail}"`);
		}

		// A range of 150 keys (two of the peer's 100-result batches), then pages of 40.
		const prefix = `r-${run}-`;
		await assets.submitTransaction('putMany', prefix, '150');
		await expectEqual('countRange over 150 keys', utf8(await assets.evaluateTransaction('countRange', `${prefix}000`, `${prefix}999`)), '150');
		let bookmark = '';
		let seen = without.includes('page') ? 150 : 0;
		while (!without.includes('page')) {
			const page = JSON.parse(utf8(await assets.evaluateTransaction('page', `${prefix}000`, `${prefix}999`, '40', bookmark)));
			if (page.fetched !== page.ids.length || page.ids.length > 40) {
				fail(`page of 40: ${JSON.stringify(page)}`);
			}
			seen += page.ids.length;
			if (page.ids.length < 40) {
				break;
			}
			bookmark = page.bookmark;
		}
		await expectEqual('keys seen through pages of 40', seen, 150);

		// A composite-key index.
		for (const [colour, asset] of [['red', 'a1'], ['red', 'a2'], ['blue', 'a3']]) {
			await assets.submitTransaction('tag', `${colour}-${run}`, asset);
		}
		await expectEqual('byColour red', utf8(await assets.evaluateTransaction('byColour', `red-${run}`)), '["a1","a2"]');

		// A chaincode event, read back from the block of its transaction.
		if (!without.includes('events')) {
			const announced = await assets.submitAsync('announce', { arguments: [`ev-${run}`, 'hello', 'Announced'] });
			const status = await announced.getStatus();
			if (!status.successful) {
				fail(`announce: commit status ${status.code}`);
			}
			const events = await network.getChaincodeEvents(name, { startBlock: status.blockNumber });
			try {
				for await (const event of events) {
					if (event.transactionId !== announced.getTransactionId() || event.eventName !== 'Announced' || utf8(event.payload) !== 'hello') {
						fail(`unexpected chaincode event ${event.eventName} of ${event.transactionId}`);
					}
					log(`chaincode event Announced "hello" in block ${event.blockNumber}`);
					break;
				}
			} finally {
				events.close();
			}
		}

		// A chaincode error: the endorsement fails with the chaincode's message.
		try {
			await assets.submitTransaction('refuse', 'not today');
			fail('a refused transaction committed');
		} catch (err) {
			const detail = (err.details || []).map((d) => d.message).join(' | ');
			if (!(err instanceof EndorseError) || err.code !== grpc.status.ABORTED || !detail.includes('not today')) {
				throw new Error(`refuse: unexpected error ${err} (details: ${detail})`);
			}
			log(`refuse: EndorseError ABORTED, detail "${detail}"`);
		}

		// A key-level endorsement policy: once only Org2 may endorse a key, Org1's endorsement alone is invalid.
		const guarded = `guarded-${run}`;
		if (!without.includes('restrict')) {
			await assets.submitTransaction('put', guarded, 'v1');
			await assets.submitTransaction('restrict', guarded, 'Org2MSP');
			try {
				await assets.submit('put', { arguments: [guarded, 'v2'], endorsingOrganizations: [MSPID] });
				fail('a write endorsed against the key-level policy committed VALID');
			} catch (err) {
				if (!(err instanceof CommitError) || err.code !== StatusCode.ENDORSEMENT_POLICY_FAILURE) {
					throw new Error(`key-level policy: unexpected error ${err}`);
				}
				log('write endorsed by Org1 alone against the key-level policy Org2: ENDORSEMENT_POLICY_FAILURE');
			}
			await assets.submit('put', { arguments: [guarded, 'v3'], endorsingOrganizations: ['Org2MSP'] });
			await expectEqual(`get ${guarded} after Org2's endorsement`, utf8(await assets.evaluateTransaction('get', guarded)), 'v3');
		}

		// A chaincode-to-chaincode call: CHAINCODE reads from OTHER's own state.
		if (!without.includes('c2c')) {
			await network.getContract(other).submitTransaction('put', `x-${run}`, `from ${other}`);
			await expectEqual(`readOther ${other}`, utf8(await assets.evaluateTransaction('readOther', other, `x-${run}`)), `from ${other}`);
		}

		// Concurrent clients: 20 transactions in flight at once from two gateways, every one VALID.
		if (!without.includes('concurrent')) {
			const second = gatewayOf(node, 'Admin@org1.example.com');
			try {
				const contracts = [assets, second.gateway.getNetwork(node.channel || 'mychannel').getContract(name)];
				await Promise.all(Array.from({ length: 20 }, (_, i) => contracts[i % 2].submitTransaction('put', `c-${run}-${i}`, String(i))));
				await expectEqual('concurrent puts committed', utf8(await assets.evaluateTransaction('countRange', `c-${run}-`, `c-${run}-~`)), '20');
			} finally {
				second.gateway.close();
				second.client.close();
			}
		}
	} finally {
		gateway.close();
		client.close();
	}
	log('PASS');
}

main().then(() => process.exit(0), (err) => {
	console.error(`[assets] FAIL: ${err && err.stack ? err.stack : err}`);
	process.exit(1);
});
