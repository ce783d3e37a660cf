'use strict';
/* Consume with the ali-ons push consumer (clustering; offsets kept by the broker).
 *
 *   node consume.js --namesrv HOST:PORT --group G --topics T1,T2 --expect N
 *                   [--timeout S] [--idle S] [--quiet S] [--retry UID:action,UID:throw]
 *                   [--deadline S] [--access-key AK --secret-key SK]
 *
 * Subscribes every topic with '*' (ali-ons also subscribes %RETRY%<group> itself),
 * waits until --expect distinct uids arrived -- and every --retry uid came back with
 * reconsumeTimes >= 1 -- or --timeout, or --quiet seconds without anything new; then
 * stays subscribed and idle for --idle seconds (what arrives then is still recorded)
 * and closes (which commits the offsets: UPDATE_CONSUMER_OFFSET for every queue).
 *
 * --retry: the first delivery (reconsumeTimes 0) of each named uid is refused, either
 * by returning Consumer.ACTION_RETRY ("action") or by throwing ("throw"); ali-ons then
 * sends CONSUMER_SEND_MSG_BACK (36) and expects the message back on %RETRY%<group>.
 *
 * Prints one JSON object: every delivery (uid from the body, topic, tags, keys, body
 * digest and length, user properties, queue id/offset, msgId, reconsumeTimes, retry
 * properties, whether it came through the retry subscription), timings, errors.
 */

const { Consumer } = require('ali-ons');
const spec = require('./spec');

const args = spec.parseArgs(process.argv.slice(2), {
  expect: '0', timeout: '60', idle: '1', quiet: '8', deadline: '120', retry: '',
});
const topics = String(args.topics || '').split(',').filter(Boolean);
const expect = Number(args.expect);
const DELIBERATE = 'deliberate failure for the retry scenario';

const retryPlan = new Map(); // uid -> 'action' | 'throw'
for (const item of String(args.retry).split(',').filter(Boolean)) {
  const [uid, how] = item.split(':');
  retryPlan.set(uid, how || 'action');
}

const received = [];
const uids = new Set();
const refused = {}; // uid -> how it was refused
const errors = [];
let lastNew = Date.now();
const out = { group: args.group, topics, expect, retry_plan: Object.fromEntries(retryPlan) };
const partial = () => Object.assign(out, { messages: received, refused, errors: errors.slice(0, 50),
  error_count: errors.length });
spec.deadline(Number(args.deadline), partial);

function record(msg, mq) {
  const body = msg.body || Buffer.alloc(0);
  const props = msg.properties || {};
  const userProps = {};
  for (const k of spec.USER_PROPS) {
    if (props[k] !== undefined && props[k] !== null && props[k] !== '') userProps[k] = props[k];
  }
  return {
    n: received.length,
    uid: body.toString('utf8').split('|')[0],
    topic: msg.topic, // ali-ons puts the original topic back on retried messages
    via_retry: !mq, // the %RETRY%<group> subscription calls the handler without a queue
    queue_topic: mq ? mq.topic : null,
    tags: msg.tags || null,
    keys: msg.keys || null,
    sha1: spec.sha1(body),
    len: body.length,
    props: userProps,
    queue_id: msg.queueId,
    queue_offset: msg.queueOffset,
    commit_log_offset: msg.commitLogOffset,
    sysflag: msg.sysFlag,
    msg_id: msg.msgId,
    store_host: msg.storeHost,
    reconsume_times: msg.reconsumeTimes,
    retry_topic: props.RETRY_TOPIC || null,
    origin_msg_id: props.ORIGIN_MESSAGE_ID || null,
    uniq_key: props.UNIQ_KEY || null,
    t: Date.now() / 1000,
  };
}

function complete() {
  if (uids.size < expect) return false;
  for (const uid of retryPlan.keys()) {
    if (!received.some(r => r.uid === uid && r.reconsume_times >= 1)) return false;
  }
  return true;
}

async function main() {
  if (!args.namesrv || !args.group || !topics.length) throw new Error('--namesrv, --group and --topics are required');
  const consumer = new Consumer({
    nameSrv: args.namesrv,
    httpclient: spec.NO_HTTP,
    consumerGroup: args.group,
    ...spec.credentials(args),
  });
  consumer.on('error', err => {
    const text = spec.errText(err);
    if (!text.includes(DELIBERATE)) errors.push(`consumer error event: ${text}`);
  });
  for (const topic of topics) {
    consumer.subscribe(topic, '*', async (msg, mq) => {
      const rec = record(msg, mq);
      received.push(rec);
      if (!uids.has(rec.uid)) {
        uids.add(rec.uid);
        lastNew = Date.now();
      }
      const how = retryPlan.get(rec.uid);
      if (how && rec.reconsume_times === 0 && !refused[rec.uid]) {
        refused[rec.uid] = how;
        rec.refused = how;
        if (how === 'throw') throw new Error(DELIBERATE);
        return Consumer.ACTION_RETRY;
      }
      return undefined;
    });
  }
  out.t_started = Date.now() / 1000;
  await spec.withTimeout(consumer.ready(), 20, 'consumer start');
  out.t_ready = Date.now() / 1000;

  const until = Date.now() + Number(args.timeout) * 1000;
  while (!complete() && Date.now() < until) {
    if (received.length && Date.now() - lastNew > Number(args.quiet) * 1000) break;
    await spec.sleep(50);
  }
  out.completed = complete();
  out.t_done = Date.now() / 1000;
  await spec.sleep(Number(args.idle) * 1000);
  out.t_idle_end = Date.now() / 1000;
  out.received_during_idle = received.length;
  try {
    await spec.withTimeout(consumer.close(), 10, 'consumer close');
  } catch (err) {
    errors.push(`close: ${spec.errText(err)}`);
  }
  out.t_closed = Date.now() / 1000;
  partial();
  spec.finish(out, 0);
}

main().catch(err => {
  errors.push(`fatal: ${err && err.stack}`);
  partial();
  spec.finish(out, 1);
});
