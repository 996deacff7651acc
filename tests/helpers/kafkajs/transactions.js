// KafkaJS transactions against a logfs listener (tests/test_txn_clients.py): a
// transactional producer commits, aborts and commits over two partitions; a
// consume-transform-produce step sends its input offsets in its transaction; then a
// read_committed and a read_uncommitted consumer read the output. Prints one JSON line.
const { Kafka, logLevel } = require('kafkajs')
const [broker] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'logfs-txn', brokers: [broker], logLevel: logLevel.ERROR })

async function readAll(groupId, topic, readUncommitted, expected) {
  const consumer = kafka.consumer({ groupId, readUncommitted, sessionTimeout: 10000, heartbeatInterval: 500 })
  const read = []
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({ eachMessage: async ({ partition, message }) => { read.push([partition, Number(message.offset), message.value.toString()]) } })
  const deadline = Date.now() + 30000
  while (read.length < expected && Date.now() < deadline) await new Promise(r => setTimeout(r, 100))
  await new Promise(r => setTimeout(r, 1000))  // anything more would show now
  await consumer.disconnect()
  return read.sort((a, b) => a[0] - b[0] || a[1] - b[1])
}

async function main() {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'jsout', numPartitions: 2 }, { topic: 'jsin', numPartitions: 1 }] })
  const plain = kafka.producer()
  await plain.connect()
  await plain.send({ topic: 'jsin', messages: [0, 1, 2, 3].map(i => ({ value: `in${i}` })) })
  await plain.disconnect()

  const producer = kafka.producer({ transactionalId: 'js-txn', maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  let txn = await producer.transaction()
  await txn.send({ topic: 'jsout', messages: [0, 1, 2, 3].map(i => ({ value: `c${i}`, partition: i % 2 })) })
  await txn.commit()
  txn = await producer.transaction()
  await txn.send({ topic: 'jsout', messages: [0, 1].map(i => ({ value: `a${i}`, partition: i % 2 })) })
  await txn.abort()
  // consume-transform-produce: the input's offsets go with the output
  txn = await producer.transaction()
  await txn.send({ topic: 'jsout', messages: [0, 1, 2, 3].map(i => ({ value: `IN${i}`, partition: i % 2 })) })
  await txn.sendOffsets({ consumerGroupId: 'js-ctp', topics: [{ topic: 'jsin', partitions: [{ partition: 0, offset: '4' }] }] })
  await txn.commit()
  // offsets sent in an aborted transaction never take effect
  txn = await producer.transaction()
  await txn.send({ topic: 'jsout', messages: [{ value: 'lost', partition: 0 }] })
  await txn.sendOffsets({ consumerGroupId: 'js-lost', topics: [{ topic: 'jsin', partitions: [{ partition: 0, offset: '2' }] }] })
  await txn.abort()
  await producer.disconnect()

  const committed = await readAll('js-committed', 'jsout', false, 8)
  const uncommitted = await readAll('js-uncommitted', 'jsout', true, 11)
  const ctp = await admin.fetchOffsets({ groupId: 'js-ctp', topics: ['jsin'] })
  const lost = await admin.fetchOffsets({ groupId: 'js-lost', topics: ['jsin'] })
  console.log(JSON.stringify({
    committed, uncommitted,
    ctp: ctp[0].partitions.map(p => [p.partition, p.offset]),
    lost: lost[0].partitions.map(p => [p.partition, p.offset]),
  }))
  await admin.disconnect()
}
main().catch(e => { console.error(e); process.exit(1) })
