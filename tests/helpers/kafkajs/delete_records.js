// KafkaJS's admin deletes a partition's records below an offset (DeleteRecords) and
// reads the low watermark back (ListOffsets). Prints one JSON line.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, offset] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "logfs-test", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  // KafkaJS finds partition leaders only among topics whose metadata it loaded
  await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset }] });
  const offsets = await admin.fetchTopicOffsets(topic);
  console.log(JSON.stringify(offsets.map((o) => [o.partition, o.low, o.high])));
  await admin.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
