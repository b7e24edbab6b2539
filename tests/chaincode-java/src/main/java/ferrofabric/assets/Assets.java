package ferrofabric.assets;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.hyperledger.fabric.contract.Context;
import org.hyperledger.fabric.contract.ContractInterface;
import org.hyperledger.fabric.contract.annotation.Contract;
import org.hyperledger.fabric.contract.annotation.Default;
import org.hyperledger.fabric.contract.annotation.Transaction;
import org.hyperledger.fabric.shim.Chaincode;
import org.hyperledger.fabric.shim.ChaincodeException;
import org.hyperledger.fabric.shim.ChaincodeStub;
import org.hyperledger.fabric.shim.ext.sbe.StateBasedEndorsement;
import org.hyperledger.fabric.shim.ext.sbe.impl.StateBasedEndorsementFactory;
import org.hyperledger.fabric.shim.ledger.CompositeKey;
import org.hyperledger.fabric.shim.ledger.KeyModification;
import org.hyperledger.fabric.shim.ledger.KeyValue;
import org.hyperledger.fabric.shim.ledger.QueryResultsIterator;
import org.hyperledger.fabric.shim.ledger.QueryResultsIteratorWithMetadata;

/**
 * The asset registry contract of tests/chaincode-node/assets, in Java: the same functions with the same answers, so
 * that tests/sdk/assets.js drives either. Each function exercises one part of the chaincode shim protocol.
 */
@Contract(name = "assets")
@Default
public final class Assets implements ContractInterface {

    private static String quoted(final String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static String array(final List<String> items) {
        final List<String> quoted = new ArrayList<>();
        for (final String item : items) {
            quoted.add(quoted(item));
        }
        return "[" + String.join(",", quoted) + "]";
    }

    private static List<String> keys(final Iterable<KeyValue> iterator) throws Exception {
        final List<String> out = new ArrayList<>();
        for (final KeyValue kv : iterator) {
            out.add(kv.getKey());
        }
        if (iterator instanceof AutoCloseable closeable) {
            closeable.close();
        }
        return out;
    }

    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public String put(final Context ctx, final String id, final String value) {
        ctx.getStub().putStringState(id, value);
        return value;
    }

    @Transaction(intent = Transaction.TYPE.EVALUATE)
    public String get(final Context ctx, final String id) {
        final String value = ctx.getStub().getStringState(id);
        if (value == null || value.isEmpty()) {
            throw new ChaincodeException("asset " + id + " does not exist");
        }
        return value;
    }

    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public void remove(final Context ctx, final String id) {
        ctx.getStub().delState(id);
    }

    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public void putMany(final Context ctx, final String prefix, final String count) {
        for (int i = 0; i < Integer.parseInt(count); i++) {
            ctx.getStub().putStringState(String.format("%s%03d", prefix, i), Integer.toString(i));
        }
    }

    @Transaction(intent = Transaction.TYPE.EVALUATE)
    public String countRange(final Context ctx, final String start, final String end) throws Exception {
        return Integer.toString(keys(ctx.getStub().getStateByRange(start, end)).size());
    }

    @Transaction(intent = Transaction.TYPE.EVALUATE)
    public String page(final Context ctx, final String start, final String end, final String size,
            final String bookmark) throws Exception {
        final QueryResultsIteratorWithMetadata<KeyValue> page =
                ctx.getStub().getStateByRangeWithPagination(start, end, Integer.parseInt(size), bookmark);
        final List<String> ids = keys(page);
        return "{\"ids\":" + array(ids) + ",\"bookmark\":" + quoted(page.getMetadata().getBookmark())
                + ",\"fetched\":" + page.getMetadata().getFetchedRecordsCount() + "}";
    }

    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public void tag(final Context ctx, final String colour, final String id) {
        final ChaincodeStub stub = ctx.getStub();
        stub.putState(stub.createCompositeKey("colour~id", colour, id).toString(), new byte[] {0});
    }

    @Transaction(intent = Transaction.TYPE.EVALUATE)
    public String byColour(final Context ctx, final String colour) throws Exception {
        final ChaincodeStub stub = ctx.getStub();
        final List<String> ids = new ArrayList<>();
        for (final String key : keys(stub.getStateByPartialCompositeKey(new CompositeKey("colour~id", colour)))) {
            ids.add(stub.splitCompositeKey(key).getAttributes().get(1));
        }
        return array(ids);
    }

    @Transaction(intent = Transaction.TYPE.EVALUATE)
    public String history(final Context ctx, final String id) throws Exception {
        final List<String> values = new ArrayList<>();
        final QueryResultsIterator<KeyModification> iterator = ctx.getStub().getHistoryForKey(id);
        for (final KeyModification m : iterator) {
            values.add(m.isDeleted() ? null : m.getStringValue());
        }
        iterator.close();
        Collections.reverse(values);
        return array(values);
    }

    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public void announce(final Context ctx, final String id, final String value, final String name) {
        ctx.getStub().putStringState(id, value);
        ctx.getStub().setEvent(name, value.getBytes(StandardCharsets.UTF_8));
    }

    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public void restrict(final Context ctx, final String id, final String mspids) {
        final StateBasedEndorsement policy = StateBasedEndorsementFactory.getInstance().newStateBasedEndorsement(null);
        policy.addOrgs(StateBasedEndorsement.RoleType.RoleTypeMember, mspids.split(","));
        ctx.getStub().setStateValidationParameter(id, policy.policy());
    }

    @Transaction(intent = Transaction.TYPE.EVALUATE)
    public String readOther(final Context ctx, final String other, final String id) {
        final Chaincode.Response response = ctx.getStub().invokeChaincodeWithStringArgs(other, "get", id);
        if (response.getStatusCode() != 200) {
            throw new ChaincodeException(other + " answered " + response.getStatusCode() + ": " + response.getMessage());
        }
        return response.getStringPayload();
    }

    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public void refuse(final Context ctx, final String message) {
        throw new ChaincodeException(message);
    }

    private static long balance(final Context ctx, final String id) {
        final byte[] value = ctx.getStub().getState(id);
        if (value == null || value.length == 0) {
            throw new ChaincodeException("account " + id + " not found");
        }
        return Long.parseLong(new String(value, StandardCharsets.UTF_8));
    }

    /** Opens account {@code id} holding {@code amount}: the built-in transfer chaincode's open, for bench e2e. */
    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public void open(final Context ctx, final String id, final String amount) {
        final byte[] existing = ctx.getStub().getState(id);
        if (existing != null && existing.length > 0) {
            throw new ChaincodeException("account " + id + " already exists");
        }
        ctx.getStub().putStringState(id, Long.toString(Long.parseLong(amount)));
    }

    /** Moves {@code amount} from account {@code from} to {@code to}: the built-in transfer chaincode's transfer. */
    @Transaction(intent = Transaction.TYPE.SUBMIT)
    public void transfer(final Context ctx, final String from, final String to, final String amount) {
        final long source = balance(ctx, from);
        final long target = balance(ctx, to);
        final long moved = Long.parseLong(amount);
        if (moved > source) {
            throw new ChaincodeException("insufficient funds in account " + from + ": " + source + " < " + moved);
        }
        ctx.getStub().putStringState(from, Long.toString(source - moved));
        ctx.getStub().putStringState(to, Long.toString(target + moved));
    }
}
