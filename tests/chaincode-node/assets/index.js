// An asset registry contract (fabric-contract-api 2.5), deployed by the tests to Ferrofabric's peers the way Fabric
// deploys chaincode as a service: packaged as `ccaas`, installed, approved by both organisations, committed, and
// served by `fabric-chaincode-node server`. Each function exercises one part of the chaincode shim protocol.
'use strict';

const { Contract } = require('fabric-contract-api');
const { KeyEndorsementPolicy } = require('fabric-shim');

const text = (bytes) => Buffer.from(bytes).toString('utf8');

/** Reads a state iterator to its end: the keys (and values) in order. */
async function collect(iterator) {
    const out = [];
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) {
        out.push({ key: r.value.key, value: text(r.value.value) });
    }
    await iterator.close();
    return out;
}

class Assets extends Contract {
    /** Creates or replaces an asset. */
    async put(ctx, id, value) {
        await ctx.stub.putState(id, Buffer.from(value));
        return value;
    }

    /** The asset's value; an error status when there is none. */
    async get(ctx, id) {
        const value = await ctx.stub.getState(id);
        if (!value || value.length === 0) {
            throw new Error(`asset ${id} does not exist`);
        }
        return text(value);
    }

    async remove(ctx, id) {
        await ctx.stub.deleteState(id);
    }

    /** `count` assets `<prefix>000`, `<prefix>001`, ... with their number as value. */
    async putMany(ctx, prefix, count) {
        for (let i = 0; i < Number(count); i++) {
            await ctx.stub.putState(`${prefix}${String(i).padStart(3, '0')}`, Buffer.from(String(i)));
        }
    }

    /** How many assets lie in [start, end): a range read that spans several of the peer's 100-result batches. */
    async countRange(ctx, start, end) {
        return String((await collect(await ctx.stub.getStateByRange(start, end))).length);
    }

    /** One page of [start, end): `{"ids": [...], "bookmark": ..., "fetched": n}`. */
    async page(ctx, start, end, size, bookmark) {
        const { iterator, metadata } = await ctx.stub.getStateByRangeWithPagination(start, end, Number(size), bookmark);
        const ids = (await collect(iterator)).map((kv) => kv.key);
        return JSON.stringify({ ids, bookmark: metadata.bookmark, fetched: metadata.fetchedRecordsCount });
    }

    /** Files asset `id` under its colour in a composite-key index. */
    async tag(ctx, colour, id) {
        await ctx.stub.putState(ctx.stub.createCompositeKey('colour~id', [colour, id]), Buffer.from([0]));
    }

    /** The ids filed under `colour`, in key order. */
    async byColour(ctx, colour) {
        const found = await collect(await ctx.stub.getStateByPartialCompositeKey('colour~id', [colour]));
        return JSON.stringify(found.map((kv) => ctx.stub.splitCompositeKey(kv.key).attributes[1]));
    }

    /** Every committed value of `id`, oldest first, deletions as null. */
    async history(ctx, id) {
        const iterator = await ctx.stub.getHistoryForKey(id);
        const values = [];
        for (let r = await iterator.next(); !r.done; r = await iterator.next()) {
            values.push(r.value.isDelete ? null : text(r.value.value));
        }
        await iterator.close();
        return JSON.stringify(values.reverse());
    }

    /** Sets an asset and emits the chaincode event `name` with the value as payload. */
    async announce(ctx, id, value, name) {
        await ctx.stub.putState(id, Buffer.from(value));
        ctx.stub.setEvent(name, Buffer.from(value));
    }

    /** Makes asset `id` endorsable by the members of `mspids` (comma-separated) only: a key-level policy. */
    async restrict(ctx, id, mspids) {
        const policy = new KeyEndorsementPolicy();
        policy.addOrgs('MEMBER', ...mspids.split(','));
        await ctx.stub.setStateValidationParameter(id, policy.getPolicy());
    }

    /** Reads asset `id` of the chaincode `other` on the same channel (a chaincode-to-chaincode call). */
    async readOther(ctx, other, id) {
        const response = await ctx.stub.invokeChaincode(other, ['get', id], '');
        if (response.status !== 200) {
            throw new Error(`${other} answered ${response.status}: ${response.message}`);
        }
        return text(response.payload);
    }

    /** Fails with `message` (the client sees status 500 and the message). */
    async refuse(ctx, message) {
        throw new Error(message);
    }

    /** Answers after `ms` milliseconds: a transaction in flight for as long as a test needs. */
    async stall(ctx, ms) {
        await new Promise((resolve) => setTimeout(resolve, Number(ms)));
        return ms;
    }

    /** Opens account `id` holding `amount`: the built-in `transfer` chaincode's `open`, for `bench e2e`. */
    async open(ctx, id, amount) {
        const existing = await ctx.stub.getState(id);
        if (existing && existing.length > 0) {
            throw new Error(`account ${id} already exists`);
        }
        await ctx.stub.putState(id, Buffer.from(String(BigInt(amount))));
    }

    /** Moves `amount` from account `from` to `to`: the built-in `transfer` chaincode's `transfer`. */
    async transfer(ctx, from, to, amount) {
        const balance = async (id) => {
            const value = await ctx.stub.getState(id);
            if (!value || value.length === 0) {
                throw new Error(`account ${id} not found`);
            }
            return BigInt(text(value));
        };
        const [source, target, moved] = [await balance(from), await balance(to), BigInt(amount)];
        if (moved > source) {
            throw new Error(`insufficient funds in account ${from}: ${source} < ${moved}`);
        }
        await ctx.stub.putState(from, Buffer.from(String(source - moved)));
        await ctx.stub.putState(to, Buffer.from(String(target + moved)));
    }
}

module.exports.contracts = [Assets];
