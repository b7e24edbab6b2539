//! The Kafka client settings of an orderer (librdkafka through `rdkafka`): producer, consumers and topic
//! creation, configured from the orderer's `Kafka` section.

use std::time::Duration;

use ferrofabric_orderer::KafkaConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::ClientConfig;

/// How long a produce may wait in librdkafka's queue and for the brokers' acknowledgement.
pub(crate) const PRODUCE_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything needed to open clients to one Kafka cluster.
#[derive(Debug, Clone)]
pub(crate) struct ClientSettings {
    base: ClientConfig,
    /// `Kafka.Properties`, applied after everything else.
    properties: Vec<(String, String)>,
    /// Replication factor of created topics.
    pub(crate) replication: i32,
    /// Partitions of a created payload topic.
    pub(crate) payload_partitions: i32,
}

impl ClientSettings {
    /// Settings for `brokers` with the TLS, SASL and pass-through properties of `config`.
    pub(crate) fn new(config: &KafkaConfig, brokers: Vec<String>) -> Self {
        let mut base = ClientConfig::new();
        base.set("bootstrap.servers", brokers.join(","));
        base.set("client.id", "ferrofabric-orderer");
        let tls = config.tls.enabled;
        let sasl = config.sasl_plain.enabled;
        base.set(
            "security.protocol",
            match (tls, sasl) {
                (false, false) => "plaintext",
                (true, false) => "ssl",
                (false, true) => "sasl_plaintext",
                (true, true) => "sasl_ssl",
            },
        );
        if tls {
            if let Some(ca) = config.tls.root_cas.first() {
                base.set("ssl.ca.location", ca.display().to_string());
            }
            if let Some(cert) = &config.tls.certificate {
                base.set("ssl.certificate.location", cert.display().to_string());
            }
            if let Some(key) = &config.tls.private_key {
                base.set("ssl.key.location", key.display().to_string());
            }
        }
        if sasl {
            base.set("sasl.mechanisms", "PLAIN");
            base.set("sasl.username", &config.sasl_plain.user);
            base.set("sasl.password", &config.sasl_plain.password);
        }
        let properties: Vec<(String, String)> = config.properties.clone().into_iter().collect();
        for (k, v) in &properties {
            base.set(k, v);
        }
        ClientSettings {
            base,
            properties,
            replication: config.topic.replication_factor.max(1),
            payload_partitions: config.payload_partitions.max(1),
        }
    }

    /// A producer configuration: every record acknowledged by all in-sync replicas, idempotent (librdkafka's
    /// retries never duplicate or reorder a record), batched for up to 5 ms (fewer, larger produce requests: the brokers, not the network, bound the rate).
    pub(crate) fn producer(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            .set("message.timeout.ms", PRODUCE_TIMEOUT.as_millis().to_string());
        self.with_base(c)
    }

    /// A consumer configuration for explicitly assigned partitions: no group offsets are committed (the
    /// ledger's `KafkaMetadata` says where to resume), reads start at the earliest record when an offset no
    /// longer exists.
    pub(crate) fn consumer(&self, group: &str) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "100")
            .set("enable.partition.eof", "false");
        self.with_base(c)
    }

    fn with_base(&self, mut c: ClientConfig) -> ClientConfig {
        for (k, v) in self.base.config_map() {
            if c.get(k).is_none() {
                c.set(k, v);
            }
        }
        for (k, v) in &self.properties {
            c.set(k, v);
        }
        c
    }

    /// Creates `topic` with `partitions` partitions unless it exists, replicated `replication` times with
    /// `min.insync.replicas = min(2, replication)` and no time or size retention (the log is the channel's
    /// history, as Fabric 1.4 required of its topics). With `beside`, every partition gets the replicas of
    /// partition 0 of that topic, its leader first (the payload topic beside the channel's partition: one produce
    /// request and one replica fetch carry both); when those cannot be read, the cluster places them.
    ///
    /// Errors: the cluster cannot be reached or refuses the topic for another reason than its existence.
    pub(crate) async fn ensure_topic(&self, topic: &str, partitions: i32, beside: Option<&str>) -> anyhow::Result<()> {
        let admin: AdminClient<DefaultClientContext> = self.base.create()?;
        let min_isr = self.replication.min(2).to_string();
        let replicas = beside.and_then(|t| self.replicas_of(&admin, t)).unwrap_or_default();
        let assignment: Vec<&[i32]> = (0..partitions).map(|_| replicas.as_slice()).collect();
        let replication = if replicas.is_empty() {
            TopicReplication::Fixed(self.replication)
        } else {
            TopicReplication::Variable(&assignment)
        };
        let new = NewTopic::new(topic, partitions, replication)
            .set("min.insync.replicas", &min_isr)
            .set("retention.ms", "-1")
            .set("retention.bytes", "-1");
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        for result in admin.create_topics([&new], &opts).await? {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => anyhow::bail!("creating Kafka topic {name}: {code}"),
            }
        }
        Ok(())
    }

    /// The replicas of partition 0 of `topic`, its leader first; `None` unless the cluster names a leader and
    /// `replication` replicas.
    fn replicas_of(&self, admin: &AdminClient<DefaultClientContext>, topic: &str) -> Option<Vec<i32>> {
        let metadata = admin.inner().fetch_metadata(Some(topic), Duration::from_secs(10)).ok()?;
        let partition = metadata.topics().first()?.partitions().iter().find(|p| p.id() == 0)?;
        let leader = partition.leader();
        let mut replicas = vec![leader];
        replicas.extend(partition.replicas().iter().copied().filter(|r| *r != leader));
        let complete = leader >= 0 && replicas.len() == usize::try_from(self.replication).ok()?;
        complete.then_some(replicas)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings(yaml: &str) -> ClientSettings {
        let config: KafkaConfig = serde_yaml::from_str(yaml).unwrap();
        ClientSettings::new(&config, vec!["k1:9092".into(), "k2:9093".into()])
    }

    /// Fabric's `Kafka.TLS` and `Kafka.SASLPlain` keys become librdkafka's security settings; `Properties` are
    /// passed through last and win; producers and consumers inherit all of it.
    #[test]
    fn orderer_yaml_kafka_section_reaches_the_client() {
        let plain = settings("{}");
        assert_eq!(plain.base.get("security.protocol"), Some("plaintext"));
        assert_eq!(plain.base.get("bootstrap.servers"), Some("k1:9092,k2:9093"));
        assert_eq!((plain.replication, plain.payload_partitions), (3, 1));

        let s = settings(
            "TLS: {Enabled: true, RootCAs: [/ca.pem], Certificate: /c.pem, PrivateKey: /k.pem}\n\
             SASLPlain: {Enabled: true, User: u, Password: p}\n\
             Topic: {ReplicationFactor: 2}\nPayloadPartitions: 4\n\
             Properties: {linger.ms: \"20\", ssl.endpoint.identification.algorithm: https}\n",
        );
        assert_eq!(s.base.get("security.protocol"), Some("sasl_ssl"));
        assert_eq!(s.base.get("ssl.ca.location"), Some("/ca.pem"));
        assert_eq!(s.base.get("ssl.certificate.location"), Some("/c.pem"));
        assert_eq!(s.base.get("ssl.key.location"), Some("/k.pem"));
        assert_eq!(s.base.get("sasl.mechanisms"), Some("PLAIN"));
        assert_eq!((s.base.get("sasl.username"), s.base.get("sasl.password")), (Some("u"), Some("p")));
        assert_eq!((s.replication, s.payload_partitions), (2, 4));
        let producer = s.producer();
        assert_eq!(producer.get("acks"), Some("all"));
        assert_eq!(producer.get("security.protocol"), Some("sasl_ssl"));
        assert_eq!(producer.get("ssl.endpoint.identification.algorithm"), Some("https"));
        assert_eq!(producer.get("linger.ms"), Some("20"), "Properties override the producer's own settings");
        let consumer = s.consumer("g");
        assert_eq!(consumer.get("enable.auto.commit"), Some("false"));
        assert_eq!(consumer.get("sasl.username"), Some("u"));
    }
}
