//! A user's own contract, in Node.js (`tests/chaincode-node/assets`, on npm `fabric-contract-api`/`fabric-shim`
//! 2.5.8), in Java (`tests/chaincode-java`, on Maven's `fabric-chaincode-shim` 2.5.8) and in Python
//! (`tests/chaincode-python`, on PyPI's `fabric-chaincode-python` 2.5.4), deployed to
//! `ferrofabric node` by Fabric's own flow and used through `@hyperledger/fabric-gateway`: each served as a
//! chaincode service (`fabric-chaincode-node server`; Java's `ContractRouter` and Python's `server.start` with
//! `CHAINCODE_SERVER_ADDRESS`), packaged as `ccaas` with its `connection.json`, installed on
//! both organisations' peers (`_lifecycle` InstallChaincode, channel-less as `peer lifecycle chaincode install`
//! sends it), approved by each organisation for its installed package, committed, then driven by
//! `tests/sdk/assets.js` (put/get/delete, a range over more than 100 keys, pagination, composite keys, history,
//! events, an error status, a key-level endorsement policy, a chaincode-to-chaincode call, concurrent clients;
//! the Python shim the steps it can serve). The Node.js contract also runs as a chaincode that dials the peers
//! (`fabric-chaincode-node start`, from a package of type `node`), and one killed in the middle of a transaction
//! gives the gateway's client Fabric's error at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_chaincode_support::{ccaas_package, install_package, package_id};
use ferrofabric_endorser::{assemble_transaction, create_init_proposal};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_node::{deploy_chaincode, require_valid, ChaincodeDefinition, NetworkClient, NodeInfo};
use ferrofabric_protos::gateway::ErrorDetail;
use prost::Message;

use crate::processes::{free_port, wait_listening};
use crate::sdk::{install_sdk, require_tool, run_logged, sdk_dir, start_node, Running};

/// How long one set-up step (a virtual environment, a Maven copy, a compilation) may take, in units.
const STEP: Duration = Duration::from_secs(60);

/// The contract's languages.
#[derive(Clone, Copy)]
enum Language {
    Node,
    Java,
    Python,
}

/// Serves the contract in `language` with Fabric's shim as chaincode `package_id` on `address`.
fn serve(language: Language, dir: &Path, address: &str, package_id: &str, log: &Path) -> Running {
    match language {
        Language::Node => serve_contract(dir, address, package_id, log),
        Language::Java => serve_java_contract(dir, address, package_id, log),
        Language::Python => serve_python_contract(address, package_id, log),
    }
}

/// Serves the Python edition with PyPI's `fabric-chaincode-python` from the virtual environment `target/pyenv`
/// (made from `tests/chaincode-python/requirements.txt` when missing).
fn serve_python_contract(address: &str, package_id: &str, log: &Path) -> Running {
    require_tool("python3");
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let env = repo.join("target/pyenv");
    let root = repo.join("tests/chaincode-python");
    if !env.join("bin/python").exists() {
        let mut venv = Command::new("python3");
        venv.args(["-m", "venv"]).arg(&env);
        run_logged(venv, "python3 -m venv target/pyenv", &log.with_extension("venv.log"), STEP);
        let mut pip = Command::new(env.join("bin/pip"));
        pip.args(["install", "-q", "-r"]).arg(root.join("requirements.txt"));
        run_logged(
            pip,
            "pip install -r tests/chaincode-python/requirements.txt",
            &log.with_extension("pip.log"),
            STEP * 10,
        );
    }
    let out = std::fs::File::create(log).unwrap();
    let process = Running(
        Command::new(env.join("bin/python"))
            .arg(root.join("assets.py"))
            .env("CHAINCODE_ID", package_id)
            .env("CHAINCODE_SERVER_ADDRESS", address)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap(),
    );
    wait_listening(address, "the Python contract's chaincode service", log);
    process
}

/// Compiles the Java edition against `tests/chaincode-java/target/lib` (Maven fills it when missing) and serves it
/// with the shim's `ContractRouter` in server mode.
fn serve_java_contract(dir: &Path, address: &str, package_id: &str, log: &Path) -> Running {
    require_tool("javac");
    require_tool("mvn");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/chaincode-java");
    std::fs::create_dir_all(dir).unwrap();
    if !root.join("target/lib").is_dir() {
        let mut mvn = Command::new("mvn");
        mvn.args(["-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory=target/lib"]).current_dir(&root);
        run_logged(mvn, "mvn dependency:copy-dependencies (tests/chaincode-java)", &dir.join("mvn.log"), STEP * 10);
    }
    let classes = dir.join("classes");
    let classpath = format!("{}/*:{}", root.join("target/lib").display(), classes.display());
    let mut javac = Command::new("javac");
    javac.args(["-cp", &classpath, "-d"]).arg(&classes).arg(root.join("src/main/java/ferrofabric/assets/Assets.java"));
    run_logged(javac, "javac Assets.java", &dir.join("javac.log"), STEP * 5);
    // The shim logs every call on stderr: into the service's log, with its output.
    let out = std::fs::File::create(log).unwrap();
    let process = Running(
        Command::new("java")
            .args(["-cp", &classpath, "org.hyperledger.fabric.contract.ContractRouter"])
            .env("CHAINCODE_SERVER_ADDRESS", address)
            .env("CORE_CHAINCODE_ID_NAME", package_id)
            .env("CORE_PEER_TLS_ENABLED", "false")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap(),
    );
    wait_listening(address, "the Java contract's chaincode service", log);
    process
}

/// Serves the Node.js contract with Fabric's shim as chaincode `package_id` on `address`.
pub(crate) fn serve_contract(dir: &Path, address: &str, package_id: &str, log: &Path) -> Running {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/chaincode-node/assets");
    serve_node_contract(&source, dir, address, package_id, log)
}

/// Serves the Node.js contract of `source` (its `index.js` and `package.json`, copied into `dir`) with Fabric's
/// shim, npm `fabric-shim` 2.5.8 from `tests/chaincode-node` (`fabric-chaincode-node server`), as chaincode
/// `package_id` on `address`; its output goes to `log`.
pub(crate) fn serve_node_contract(source: &Path, dir: &Path, address: &str, package_id: &str, log: &Path) -> Running {
    let mut shim = node_shim(source, dir);
    shim.args(["server", "--chaincode-address", address, "--chaincode-id", package_id]);
    let process = Running(shim.stdout(std::fs::File::create(log).unwrap()).stderr(Stdio::inherit()).spawn().unwrap());
    wait_listening(address, "the Node.js chaincode service", log);
    process
}

/// `fabric-chaincode-node` (npm `fabric-shim` 2.5.8 from `tests/chaincode-node`) in `dir`, which gets the contract
/// of `source` (its `index.js` and `package.json`) and the shim's modules.
fn node_shim(source: &Path, dir: &Path) -> Command {
    let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/chaincode-node/node_modules");
    assert!(modules.join(".bin/fabric-chaincode-node").exists(), "run `npm ci --prefix tests/chaincode-node` first");
    std::fs::create_dir_all(dir).unwrap();
    for file in ["index.js", "package.json"] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    let link = dir.join("node_modules");
    if !link.exists() {
        std::os::unix::fs::symlink(&modules, &link).unwrap();
    }
    let mut shim = Command::new(modules.join(".bin/fabric-chaincode-node"));
    shim.current_dir(dir);
    shim
}

/// Starts the Node.js contract as a chaincode that dials peer `org` (`fabric-chaincode-node start`, as an external
/// builder's `run` starts it) and registers as `package_id`, over TLS when the node speaks it (the peer's TLS CA
/// as root, the peer's own TLS pair as the client pair the shim insists on), once `dir` holds the contract.
fn dial_node_contract(info: &NodeInfo, org: usize, dir: &Path, package_id: &str, log: &Path) -> Running {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/chaincode-node/assets");
    let (mspid, address) = info.peers.iter().nth(org).unwrap();
    let mut shim = node_shim(&source, dir);
    shim.args(["start", "--peer.address", address, "--chaincode-id-name", package_id]);
    match &info.tls_ca {
        Some(ca) => {
            let n = org + 1;
            let host = format!("peer0.org{n}.example.com");
            let tls = info.crypto.join(format!("peerOrganizations/org{n}.example.com/peers/{host}/tls"));
            // As a Fabric peer hands them to the chaincode it launches: files holding the PEM in base64.
            let base64 = |file: &str| {
                use base64::Engine as _;
                let encoded = base64::engine::general_purpose::STANDARD.encode(std::fs::read(tls.join(file)).unwrap());
                let path = dir.join(format!("client-{file}.b64"));
                std::fs::write(&path, encoded).unwrap();
                path
            };
            shim.args(["--ssl-target-name-override", &host])
                .env("CORE_PEER_TLS_ENABLED", "true")
                .env("CORE_PEER_TLS_ROOTCERT_FILE", ca)
                .env("CORE_TLS_CLIENT_KEY_PATH", base64("server.key"))
                .env("CORE_TLS_CLIENT_CERT_PATH", base64("server.crt"));
        }
        None => drop(shim.env("CORE_PEER_TLS_ENABLED", "false")),
    }
    let out = std::fs::File::create(log).unwrap();
    let process = Running(shim.stdout(out.try_clone().unwrap()).stderr(out).spawn().unwrap());
    let deadline = std::time::Instant::now() + STEP;
    while !std::fs::read_to_string(log).unwrap_or_default().contains("Successfully established communication") {
        assert!(
            std::time::Instant::now() < deadline,
            "the contract never registered with {mspid}'s peer:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    process
}

/// The contract's `index.js` and `package.json` as `peer lifecycle chaincode package --lang node` packs them.
fn node_package(label: &str) -> Vec<u8> {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/chaincode-node/assets");
    let code = ["index.js", "package.json"].map(|f| (f, std::fs::read(source.join(f)).unwrap()));
    install_package("node", label, &code)
}

/// Runs `tests/sdk/assets.js` for `args` (the chaincode, the other chaincode it calls, options) and requires its PASS.
pub(crate) fn run_client(node_json: &Path, args: &[&str], log: &Path) {
    let mut script = Command::new("node");
    script.arg(sdk_dir().join("assets.js")).arg(node_json).args(args);
    run_logged(script, &format!("tests/sdk/assets.js {}", args.join(" ")), log, Duration::from_secs(300));
    let output = std::fs::read_to_string(log).unwrap();
    assert!(output.lines().any(|l| l == "[assets] PASS"), "the client did not report PASS:\n{output}");
}

/// Chaincode `name`, defined with `--init-required`, refuses a plain invocation until an init call (`--isInit`,
/// endorsed by both peers) commits, then refuses another init call: Fabric's texts.
fn initialise(runtime: &tokio::runtime::Runtime, client: &NetworkClient, info: &NodeInfo, name: &str) {
    let msp = info.crypto.join("peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let user = SigningIdentity::from_msp_dir("Org1MSP", &msp).unwrap();
    let args: [&[u8]; 3] = [b"put", b"initialised", b"yes"];
    let plain = client.proposal(&user, name, &args);
    let refused = runtime.block_on(client.propose(0, &plain)).unwrap().response.unwrap();
    assert_eq!(refused.status, 500);
    assert_eq!(
        refused.message,
        format!(
            "failed to execute transaction {}: invalid invocation: chaincode '{name}' has not been initialized for this version, must call as init first",
            plain.tx_id
        )
    );
    let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
    let init = create_init_proposal(&user, &client.channel, name, &args);
    let responses = runtime.block_on(client.endorse(&init, &[0, 1])).unwrap();
    let envelope = assemble_transaction(&init.proposal, &responses, &user).unwrap();
    let mut events = runtime.block_on(client.commit_events(0, &user)).unwrap();
    runtime.block_on(client.broadcast(vec![envelope])).unwrap();
    require_valid(&runtime.block_on(events.wait_for(std::slice::from_ref(&init.tx_id), STEP)).unwrap()).unwrap();
    let again = create_init_proposal(&user, &client.channel, name, &args);
    let deadline = std::time::Instant::now() + STEP;
    let refused = loop {
        // Until both peers' replicas hold the init block, one may still take it for the first.
        let r = runtime.block_on(client.propose(0, &again)).unwrap().response.unwrap();
        if r.status != 200 || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        refused.message,
        format!(
            "failed to execute transaction {}: invalid invocation: chaincode '{name}' does not require initialization but called as init",
            again.tx_id
        )
    );
}

/// The contract `name` (served by `service`) is killed while the gateway of Org1's peer endorses a transaction of
/// it: the gateway answers at once, ABORTED with the peer's error as Fabric words it, and prepares nothing.
fn killed_mid_transaction(
    runtime: &tokio::runtime::Runtime,
    client: &NetworkClient,
    info: &NodeInfo,
    name: &str,
    service: &mut Running,
) {
    let msp = info.crypto.join("peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let user = SigningIdentity::from_msp_dir("Org1MSP", &msp).unwrap();
    let proposal = client.proposal(&user, name, &[b"stall", b"60000"]);
    let tx_id = proposal.tx_id.clone();
    let started = std::time::Instant::now();
    let pending = runtime.spawn({
        let client = client.clone();
        async move { client.endorse_through_gateway(0, &proposal).await }
    });
    std::thread::sleep(Duration::from_secs(2));
    service.0.kill().unwrap();
    let status = runtime.block_on(pending).unwrap().expect_err("an endorsement by a killed chaincode");
    assert!(started.elapsed() < Duration::from_secs(20), "answered after {:?}", started.elapsed());
    assert_eq!(status.code(), tonic::Code::Aborted, "{status:?}");
    assert_eq!(status.message(), "failed to endorse transaction, see attached details for more info");
    let details = tonic_types::Status::decode(status.details()).unwrap().details;
    let messages: Vec<String> =
        details.iter().map(|d| ErrorDetail::decode(d.value.as_slice()).unwrap().message).collect();
    // A peer's own failure (status 500, no payload), which the gateway passes on as it came (Fabric's
    // `endorse.go`), after trying Org1's other peers: there are none.
    let expected = format!("failed to execute transaction {tx_id}: error sending: chaincode stream terminated");
    assert_eq!(messages, [expected]);
}

#[test]
fn a_users_contracts_in_three_languages_deployed_by_fabrics_lifecycle_as_services_or_dialling_the_peer_run_through_the_gateway(
) {
    require_tool("node");
    require_tool("npm");
    let tmp = tempfile::tempdir().unwrap();
    install_sdk(&tmp.path().join("npm.log"));
    let (node, node_json) = start_node(&tmp.path().join("net"), &tmp.path().join("node.log"), 0);
    let info = NodeInfo::read(&node_json).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(NetworkClient::connect(&info)).unwrap();
    // Two packages of the contract, each its own service: `assets2` is another chaincode for `assets` to call (a
    // chaincode calling one of the same package meets its own transaction, which Fabric refuses as we do).
    let mut services = Vec::new();
    let editions = [
        ("assets", Language::Node),
        ("assets2", Language::Node),
        ("jassets", Language::Java),
        ("pyassets", Language::Python),
    ];
    for (name, language) in editions {
        let address = format!("127.0.0.1:{}", free_port());
        let label = format!("{name}_1.0");
        let package = ccaas_package(&label, &address);
        let package_id = package_id(&label, &package);
        let dir = tmp.path().join(name);
        services.push(serve(language, &dir, &address, &package_id, &tmp.path().join(format!("{name}.log"))));
        let definition = ChaincodeDefinition { name, policy: None, init_required: false };
        let deployed = runtime.block_on(deploy_chaincode(&client, &info.crypto, &definition, &package)).unwrap();
        assert_eq!(deployed, package_id, "both peers answer the package's ID");
    }

    // The Node.js contract calling another of its kind, the Java one calling the Node.js one, the Python one beside
    // the Java one (without the steps its shim cannot serve: a page's bookmark, state validation parameters,
    // chaincode events; a chaincode-to-chaincode call, whose answer it misreads; many transactions in flight, which
    // stalled it — see tests/chaincode-python).
    let runs: [&[&str]; 3] = [
        &["assets", "assets2"],
        &["jassets", "assets"],
        &["pyassets", "jassets", "--without", "page,restrict,events,c2c,concurrent"],
    ];
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for args in runs {
            run_client(&node_json, args, &tmp.path().join(format!("client-{}.log", args[0])));
        }
        // The same contract as a chaincode that dials the peers: packaged as Node.js code, installed, approved and
        // committed with `--init-required`; each peer's shim registers under the package ID; once initialised
        // (`--isInit`), the client's steps run on it.
        let label = "dialin_1.0";
        let package = node_package(label);
        let dial_id = package_id(label, &package);
        let definition = ChaincodeDefinition { name: "dialin", policy: None, init_required: true };
        let deployed = runtime.block_on(deploy_chaincode(&client, &info.crypto, &definition, &package)).unwrap();
        assert_eq!(deployed, dial_id);
        let _dialled: Vec<Running> = (0..2)
            .map(|org| {
                let log = tmp.path().join(format!("dialin{org}.log"));
                dial_node_contract(&info, org, &tmp.path().join(format!("dialin{org}")), &dial_id, &log)
            })
            .collect();
        initialise(&runtime, &client, &info, "dialin");
        run_client(&node_json, &["dialin", "assets"], &tmp.path().join("client-dialin.log"));
        killed_mid_transaction(&runtime, &client, &info, "assets2", &mut services[1]);
    }));
    drop((services, node));
    if let Err(e) = run {
        for name in ["assets", "jassets", "pyassets", "dialin0", "dialin1"] {
            let log = std::fs::read_to_string(tmp.path().join(format!("{name}.log"))).unwrap_or_default();
            eprintln!("{name} log:\n{log}");
        }
        eprintln!("node log:\n{}", std::fs::read_to_string(tmp.path().join("node.log")).unwrap_or_default());
        std::panic::resume_unwind(e);
    }
}
