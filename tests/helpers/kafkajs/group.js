// A KafkaJS consumer group of two against a logfs listener (tests/kafka/test_kafka_groups.py):
// both members join, then 40 records are produced and consumed; prints what each
// member read and the group's committed offsets as one JSON line.
const { Kafka, logLevel } = require('kafkajs')
const [broker] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'logfs-group', brokers: [broker], logLevel: logLevel.ERROR })
const topic = 'jsgroup'
async function main() {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 4 }] })
  const read = [[], []]
  const assigned = [0, 0]
  const consumers = [0, 1].map(() => kafka.consumer({ groupId: 'jsg', sessionTimeout: 10000, heartbeatInterval: 500 }))
  const joined = new Promise(resolve => {
    consumers.forEach((c, n) => c.on(c.events.GROUP_JOIN, e => {
      assigned[n] = (e.payload.memberAssignment[topic] || []).length
      if (assigned[0] + assigned[1] === 4 && assigned[0] && assigned[1]) resolve()
    }))
  })
  for (const [n, c] of consumers.entries()) {
    await c.connect()
    await c.subscribe({ topic, fromBeginning: true })
    await c.run({ eachMessage: async ({ partition, message }) => { read[n].push([partition, Number(message.offset), message.value.toString()]) } })
  }
  await joined
  const shared = [...assigned]  // before the members leave (the last one then gets all four)
  const producer = kafka.producer()
  await producer.connect()
  for (let i = 0; i < 40; i++) await producer.send({ topic, messages: [{ value: `m${i}`, partition: i % 4 }] })
  await producer.disconnect()
  const deadline = Date.now() + 60000
  while (read[0].length + read[1].length < 40 && Date.now() < deadline) await new Promise(r => setTimeout(r, 100))
  for (const c of consumers) await c.disconnect()  // commits what was read, leaves the group
  const committed = await admin.fetchOffsets({ groupId: 'jsg', topics: [topic] })
  const groups = await admin.listGroups()
  console.log(JSON.stringify({ read, assigned: shared, committed: committed[0].partitions.map(p => [p.partition, p.offset]).sort(), groups: groups.groups.map(g => g.groupId) }))
  await admin.disconnect()
}
main().catch(e => { console.error(e); process.exit(1) })
