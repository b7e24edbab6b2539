// Caliper workload module: the smallbank operations of Caliper's own smallbank benchmark (hyperledger/caliper-benchmarks,
// scenario/smallbank) against the `smallbank` chaincode, written for this repository.
//
// Round argument `operation`:
//   create  - each transaction opens the worker's next account (`acc-<worker>-<n>`);
//   mixed   - each transaction is one of deposit_checking, write_check, transact_savings, send_payment, amalgamate
//             or query, on random accounts among the first `accountsPerWorker` of this worker.

'use strict';

const { WorkloadModuleBase } = require('@hyperledger/caliper-core');

const OPERATIONS = ['deposit_checking', 'write_check', 'transact_savings', 'send_payment', 'amalgamate', 'query'];

class SmallbankWorkload extends WorkloadModuleBase {
	constructor() {
		super();
		this.created = 0;
	}

	account(n) {
		return `acc-${this.workerIndex}-${n}`;
	}

	randomAccount() {
		return this.account(Math.floor(Math.random() * this.roundArguments.accountsPerWorker));
	}

	request(fcn, args, readOnly) {
		return {
			contractId: 'smallbank',
			contractFunction: fcn,
			contractArguments: args,
			invokerIdentity: 'User1',
			readOnly,
		};
	}

	async submitTransaction() {
		if (this.roundArguments.operation === 'create') {
			const id = this.account(this.created++);
			await this.sutAdapter.sendRequests(this.request('create_account', [id, `name-${id}`, '1000000', '1000000'], false));
			return;
		}
		const op = OPERATIONS[Math.floor(Math.random() * OPERATIONS.length)];
		const amount = String(1 + Math.floor(Math.random() * 100));
		const a = this.randomAccount();
		let b = this.randomAccount();
		while (b === a && this.roundArguments.accountsPerWorker > 1) {
			b = this.randomAccount();
		}
		const args = {
			deposit_checking: [amount, a],
			write_check: [amount, a],
			transact_savings: [amount, a],
			send_payment: [amount, b, a],
			amalgamate: [b, a],
			query: [a],
		}[op];
		await this.sutAdapter.sendRequests(this.request(op, args, op === 'query'));
	}
}

module.exports.createWorkloadModule = () => new SmallbankWorkload();
