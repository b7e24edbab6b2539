// Fabric's Java client API (org.hyperledger.fabric:fabric-gateway) against a running `ferrofabric node`: a smallbank
// submit through the Gateway service of Org1's peer (endorsed at both orgs' peers by the chaincode's AND policy,
// ordered, committed VALID) and an evaluate that reads it back.
//
// Usage: java -cp 'target/lib/*:target/classes' ferrofabric.GatewayRoundTrip DIR/node.json
// Exit status 0 and a last line "[java] PASS" only if both steps passed.

package ferrofabric;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.hyperledger.fabric.client.Contract;
import org.hyperledger.fabric.client.Gateway;
import org.hyperledger.fabric.client.Hash;
import org.hyperledger.fabric.client.identity.Identities;
import org.hyperledger.fabric.client.identity.Signers;
import org.hyperledger.fabric.client.identity.X509Identity;

public final class GatewayRoundTrip {
    private static void log(String message) {
        System.out.println("[java] " + message);
    }

    // The first file of a directory (cryptogen writes one certificate to signcerts/ and one key to keystore/).
    private static Path firstFile(Path dir) throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            return files.sorted().findFirst().orElseThrow(() -> new IOException("no file in " + dir));
        }
    }

    public static void main(String[] args) throws Exception {
        JsonObject node = JsonParser.parseString(Files.readString(Path.of(args[0]))).getAsJsonObject();
        String channel = node.get("channel").getAsString();
        String peer = node.getAsJsonObject("peers").get("Org1MSP").getAsString();
        Path msp = Path.of(node.get("crypto").getAsString(),
                "peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
        // TLS when the node speaks it (node.json names the organisations' TLS CA bundle).
        ChannelCredentials credentials = node.has("tls_ca")
                ? TlsChannelCredentials.newBuilder().trustManager(Path.of(node.get("tls_ca").getAsString()).toFile()).build()
                : InsecureChannelCredentials.create();
        ManagedChannel grpc = Grpc.newChannelBuilder(peer, credentials).build();
        log("connecting to " + peer + (node.has("tls_ca") ? " with TLS" : " in plain text"));
        var identity = new X509Identity("Org1MSP",
                Identities.readX509Certificate(Files.newBufferedReader(firstFile(msp.resolve("signcerts")))));
        var signer = Signers.newPrivateKeySigner(
                Identities.readPrivateKey(Files.newBufferedReader(firstFile(msp.resolve("keystore")))));
        try (Gateway gateway = Gateway.newInstance().identity(identity).signer(signer).hash(Hash.SHA256).connection(grpc)
                .evaluateOptions(o -> o.withDeadlineAfter(30, TimeUnit.SECONDS))
                .endorseOptions(o -> o.withDeadlineAfter(30, TimeUnit.SECONDS))
                .submitOptions(o -> o.withDeadlineAfter(30, TimeUnit.SECONDS))
                .commitStatusOptions(o -> o.withDeadlineAfter(60, TimeUnit.SECONDS))
                .connect()) {
            Contract smallbank = gateway.getNetwork(channel).getContract("smallbank");
            String id = "java-" + ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
            smallbank.submitTransaction("create_account", id, "java", "100", "50");
            log("submit create_account(" + id + ") committed VALID");
            String got = new String(smallbank.evaluateTransaction("query", id), UTF_8);
            String expected = "{\"CustomId\":\"" + id + "\",\"CustomName\":\"java\",\"SavingsBalance\":50,\"CheckingBalance\":100}";
            if (!got.equals(expected)) {
                throw new IllegalStateException("evaluate query " + id + ": expected " + expected + ", got " + got);
            }
            log("evaluate query " + id + " -> " + got);
        } finally {
            grpc.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        log("PASS");
    }
}
