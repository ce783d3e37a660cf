'use strict';
/* Produce --count messages of one mode (spec.js) with the ali-ons Producer
 * (SEND_MESSAGE_V2, 310), --inflight sends outstanding at a time.
 *
 *   node produce.js --namesrv HOST:PORT --mode M --topic T [--count N] [--start I]
 *                   [--group G] [--inflight K] [--deadline S] [--access-key AK --secret-key SK]
 *
 * Prints one JSON object: per uid the send result (status, msgId, queueId, queueOffset),
 * per uid the body digest that was sent, errors, timings.
 */

const { Producer, Message } = require('ali-ons');
const spec = require('./spec');

const args = spec.parseArgs(process.argv.slice(2), {
  count: '1000', start: '0', inflight: '16', deadline: '60',
});
const count = Number(args.count);
const start = Number(args.start);
const inflight = Number(args.inflight);

const acked = {};
const sent = {};
const errors = [];
const t0 = Date.now();
const out = {
  mode: args.mode, topic: args.topic, count, start, acked, sent, errors, error_count: 0,
};
const partial = () => Object.assign(out, { error_count: errors.length, errors: errors.slice(0, 50) });
spec.deadline(Number(args.deadline), partial);

async function main() {
  if (!args.namesrv || !args.mode || !args.topic) throw new Error('--namesrv, --mode and --topic are required');
  const producer = new Producer({
    nameSrv: args.namesrv,
    httpclient: spec.NO_HTTP,
    producerGroup: args.group || `PG_${args.mode}`,
    ...spec.credentials(args),
  });
  producer.on('error', err => errors.push(`producer error event: ${spec.errText(err)}`));
  await spec.withTimeout(producer.ready(), 20, 'producer start');
  const tReady = Date.now();

  let next = start;
  const end = start + count;
  async function worker() {
    while (next < end) {
      const i = next++;
      const m = spec.messageOf(args.mode, i);
      const msg = new Message(args.topic, m.tags, m.body);
      msg.keys = m.keys;
      for (const [k, v] of Object.entries(m.props)) {
        msg.properties[k] = v;
      }
      sent[m.uid] = { sha1: spec.sha1(m.body), len: m.body.length };
      try {
        const r = await producer.send(msg);
        acked[m.uid] = {
          status: r.sendStatus, msg_id: r.msgId, queue_id: r.messageQueue && r.messageQueue.queueId,
          offset: r.queueOffset,
        };
      } catch (err) {
        errors.push(`${m.uid}: ${spec.errText(err)}`);
      }
    }
  }
  await Promise.all(Array.from({ length: inflight }, worker));
  const tSent = Date.now();
  try {
    await spec.withTimeout(producer.close(), 10, 'producer close');
  } catch (err) {
    errors.push(`close: ${spec.errText(err)}`);
  }
  Object.assign(out, {
    start_seconds: (tReady - t0) / 1000,
    seconds: (tSent - tReady) / 1000,
    close_seconds: (Date.now() - tSent) / 1000,
  });
  partial();
  spec.finish(out, 0);
}

main().catch(err => {
  errors.push(`fatal: ${err && err.stack}`);
  partial();
  spec.finish(out, 1);
});
