"""The asset registry contract of tests/chaincode-node/assets, on Fabric's Python shim (PyPI
fabric-chaincode-python), served as a chaincode service: `python3 assets.py` with CHAINCODE_ID (the package ID)
and CHAINCODE_SERVER_ADDRESS. The same functions with the same answers as the Node.js and Java editions, but for
`page` and `restrict`: this shim hands a chaincode neither a page's bookmark nor state validation parameters; and
its COMPLETED message carries no chaincode event, so `announce` emits none the peer can see; and it reads the
answer to INVOKE_CHAINCODE as a `Response` where Fabric's peer sends the callee's COMPLETED `ChaincodeMessage`
(`core/chaincode/handler.go` HandleInvokeChaincode), so `readOther` fails against any Fabric peer. With 20
transactions in flight on its stream it stopped answering here (the endorsements timed out) where the Node.js and
Java shims serve the same load, so the tests keep it to one transaction at a time."""

import json

from fabric_chaincode_python.fabric_shim import server
from fabric_chaincode_python.fabric_shim.interfaces import Chaincode
from fabric_chaincode_python.fabric_shim.response import error, success


async def collect(iterator):
    """The (key, value) pairs of a state iterator, in order."""
    out = []
    async for kv in iterator:
        out.append((kv.key, bytes(kv.value).decode()))
    return out


async def put(stub, asset, value):
    await stub.put_state(asset, value.encode())
    return value


async def get(stub, asset):
    value = await stub.get_state(asset)
    if not value:
        raise ValueError(f"asset {asset} does not exist")
    return bytes(value).decode()


async def remove(stub, asset):
    await stub.delete_state(asset)


async def put_many(stub, prefix, count):
    for i in range(int(count)):
        await stub.put_state(f"{prefix}{i:03d}", str(i).encode())


async def count_range(stub, start, end):
    return str(len(await collect(await stub.get_state_by_range(start, end))))


async def tag(stub, colour, asset):
    await stub.put_state(stub.create_composite_key("colour~id", [colour, asset]), b"\x00")


async def by_colour(stub, colour):
    found = await collect(await stub.get_state_by_partial_composite_key("colour~id", [colour]))
    return json.dumps([stub.split_composite_key(key)[1][1] for key, _ in found], separators=(",", ":"))


async def history(stub, asset):
    values = []
    async for modification in await stub.get_history_for_key(asset):
        values.append(None if modification.is_delete else bytes(modification.value).decode())
    values.reverse()
    return json.dumps(values, separators=(",", ":"))


async def announce(stub, asset, value, name):
    await stub.put_state(asset, value.encode())
    stub.set_event(name, value.encode())


async def read_other(stub, other, asset):
    response = await stub.invoke_chaincode(other, ["get", asset])
    if response.status != 200:
        raise ValueError(f"{other} answered {response.status}: {response.message}")
    return bytes(response.payload).decode()


async def refuse(stub, message):
    raise ValueError(message)


FUNCTIONS = {
    "put": put,
    "get": get,
    "remove": remove,
    "putMany": put_many,
    "countRange": count_range,
    "tag": tag,
    "byColour": by_colour,
    "history": history,
    "announce": announce,
    "readOther": read_other,
    "refuse": refuse,
}


class Assets(Chaincode):
    async def init(self, stub):
        return success(b"")

    async def invoke(self, stub):
        function, params = stub.get_function_and_parameters()
        handler = FUNCTIONS.get(function)
        if handler is None:
            return error(f"unknown function {function}")
        try:
            result = await handler(stub, *params)
        except Exception as e:  # the client sees status 500 and the message
            return error(str(e))
        return success(result or b"")


if __name__ == "__main__":
    server.start(Assets)
