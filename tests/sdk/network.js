// What the client scripts read of a running `ferrofabric node`: a user's certificate and key from the node's
// cryptogen material, and the account JSON smallbank stores.

'use strict';

const fs = require('fs');
const path = require('path');

// The first file of a directory (cryptogen writes one certificate to signcerts/ and one key to keystore/).
function firstFile(dir) {
	const names = fs.readdirSync(dir).filter((n) => !n.startsWith('.')).sort();
	if (names.length === 0) {
		throw new Error(`no file in ${dir}`);
	}
	return path.join(dir, names[0]);
}

// The PEM certificate and PKCS#8 key of `user` (e.g. User1@org1.example.com) of `org` (org1.example.com).
function userCredentials(cryptoDir, org, user) {
	const msp = path.join(cryptoDir, 'peerOrganizations', org, 'users', user, 'msp');
	return {
		certificate: fs.readFileSync(firstFile(path.join(msp, 'signcerts')), 'utf8'),
		privateKey: fs.readFileSync(firstFile(path.join(msp, 'keystore')), 'utf8'),
	};
}

// The smallbank account JSON the chaincode stores (Caliper's Go struct, field order kept).
function account(id, name, savings, checking) {
	return JSON.stringify({ CustomId: id, CustomName: name, SavingsBalance: savings, CheckingBalance: checking });
}

module.exports = { account, userCredentials };
