'use strict';
/* What the JS acceptance scenarios send, derived from (mode, index) alone, plus the small
 * helpers every scenario script shares (arguments, a hard deadline, one JSON result line).
 *
 * acc_spec.js_message_of (Python) computes the same messages byte for byte: keep both in
 * step. No trocket code here: the scripts talk to the broker through ali-ons only.
 */

const crypto = require('crypto');

const TAGS = ['TagA', 'TagB', 'TagC', 'TagD'];
const USER_PROPS = ['uid', 'mode', 'idx', 'note'];
const LARGE_BODY = 5 * 1024; // ali-ons deflates bodies of 4 KiB and more
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,.;:-';

function uidOf(mode, i) {
  return `${mode}-${String(i).padStart(5, '0')}`;
}

function isLarge(i) {
  // every 10th message of each JS mode is 5 KiB (compressed by the producer)
  return i % 10 === 0;
}

/** FNV-1a over the UTF-8 bytes, then xorshift32: the same numbers in Python. */
function seedOf(text) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(text, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 16777619) >>> 0;
  }
  return h || 1;
}

function makeRandom(text) {
  let x = seedOf(text);
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
}

function bodyOf(mode, i) {
  const uid = uidOf(mode, i);
  const head = `${uid}|${mode} js body #${i} \u00e9\u00e8\u2713|`;
  const rnd = makeRandom(uid);
  const fillLen = isLarge(i) ? LARGE_BODY - Buffer.byteLength(head, 'utf8') : 10 + rnd() % 390;
  let fill = '';
  for (let k = 0; k < fillLen; k++) {
    fill += ALPHABET[rnd() % ALPHABET.length];
  }
  return Buffer.from(head + fill, 'utf8');
}

function messageOf(mode, i) {
  const uid = uidOf(mode, i);
  return {
    uid,
    tags: TAGS[i % TAGS.length],
    keys: [`key-${uid}`, `alt-${i % 7}`],
    body: bodyOf(mode, i),
    props: { uid, mode, idx: String(i), note: `h\u00e9llo \u2713 ${i} k=v;x` },
  };
}

function sha1(buf) {
  return crypto.createHash('sha1').update(buf || Buffer.alloc(0)).digest('hex');
}

/** --name value pairs (and bare --flag) into an object. */
function parseArgs(argv, defaults) {
  const out = Object.assign({}, defaults);
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const name = a.slice(2);
    if (k + 1 < argv.length && !argv[k + 1].startsWith('--')) {
      out[name] = argv[++k];
    } else {
      out[name] = true;
    }
  }
  return out;
}

/** ali-ons asserts an httpclient is given even with nameSrv set; it only uses it to
 *  look up name servers over HTTP (onsAddr), which these scenarios never do. */
const NO_HTTP = {
  request() {
    throw new Error('no HTTP name server lookups in the acceptance tests');
  },
};

/** ali-ons options signing every request (ACL) when --access-key is given. */
function credentials(args) {
  return args['access-key'] ? { accessKey: args['access-key'], secretKey: args['secret-key'] || '' } : {};
}

let resultPrinted = false;

/** Print the one JSON result line (stdout) and exit once it is written out. stdout is
 *  a pipe the test may read only later (it waits for the scripts one by one): exiting
 *  before the write completes would cut the result at the pipe's 64 KiB. */
function finish(result, code) {
  if (resultPrinted) return;
  resultPrinted = true;
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(code));
}

/** A hard deadline for the whole script: print what we have and exit 3. */
function deadline(seconds, partial) {
  const t = setTimeout(() => {
    const result = partial();
    result.hard_timeout = seconds;
    process.stderr.write(`hard deadline of ${seconds} s reached\n`);
    finish(result, 3);
  }, seconds * 1000);
  t.unref();
  return t;
}

function withTimeout(promise, seconds, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took more than ${seconds} s`)), seconds * 1000);
    }),
  ]).finally(() => clearTimeout(timer));
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

function errText(err) {
  if (!err) return String(err);
  return `${err.name || 'Error'}: ${err.message}`;
}

module.exports = {
  TAGS, USER_PROPS, LARGE_BODY, uidOf, isLarge, bodyOf, messageOf, sha1, parseArgs, NO_HTTP, credentials, finish,
  deadline, withTimeout, sleep, errText,
};
