// KafkaJS's admin client and idempotent producer against a logfs listener
// (tests/kafka/test_kafka_kafkajs.py): prints what it saw as one JSON line.
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')
const [broker] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'logfs-test', brokers: [broker], logLevel: logLevel.ERROR })
async function main() {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'js', numPartitions: 2, configEntries: [{ name: 'retention.ms', value: '3600000' }] }] })
  const meta = await admin.fetchTopicMetadata({ topics: ['js'] })
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const out = []
  for (let i = 0; i < 20; i++) {
    const r = await producer.send({ topic: 'js', acks: -1, compression: i % 2 ? CompressionTypes.GZIP : CompressionTypes.None,
      messages: [{ key: `k${i % 3}`, value: `value ${i}`, partition: i % 2, headers: { n: `${i}` } }] })
    out.push([r[0].partition, Number(r[0].baseOffset)])
  }
  const offsets = await admin.fetchTopicOffsets('js')
  await admin.createTopics({ topics: [{ topic: 'gone' }] })
  await admin.deleteTopics({ topics: ['gone'] })
  const topics = await admin.listTopics()
  console.log(JSON.stringify({ partitions: meta.topics[0].partitions.length, out, offsets: offsets.map(o => [o.partition, o.high, o.low]).sort(), topics: topics.sort() }))
  await producer.disconnect(); await admin.disconnect()
}
main().catch(e => { console.error(e); process.exit(1) })
