import com.alibaba.fastjson.JSON;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.RequestTimeoutException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The Java 4.9.8 client's transactions and request-reply, for trocket's acceptance
 * tests (tests/acceptance/java/test_java_transactions.py) and benchmarks/transactions.py.
 * Every mode prints one line per event on stdout (the tests parse them) and ends with
 * "DONE" (or "RESULT ..." for bench). Clients heartbeat every second
 * (-Dtxn.heartbeat=ms) so a restarted broker learns about them at once.
 *
 * txn NS TOPIC GROUP WAIT_S SPEC...    a TransactionMQProducer; message i is "m<i>-<SPEC>"
 *     with SPEC = EXEC[:CHECK...]: EXEC is what executeLocalTransaction returns (commit,
 *     rollback, unknown; throw: it throws; gate: waits until the file named by
 *     -Dtxn.gate exists, then commit, and its checks say commit: the test kills the
 *     broker before it opens the gate); CHECK... are the answers of the successive
 *     checks (the last one repeats; default unknown). Prints
 *     "EXEC body" when its local transaction starts, "SENT i status localState msgId
 *     offsetMsgId queueOffset transactionId" (or "SEND_ERROR i exception") and per check
 *     "CHECK body times topic queueId answer"; waits up to WAIT_S for every message
 *     whose EXEC is not final to be answered commit or rollback by a check (or until
 *     the file named by -Dtxn.stop exists), then -Dtxn.linger ms (500) more.
 * consume NS TOPIC GROUP COUNT TIMEOUT_S QUIET_S   a push consumer from the first
 *     offset; "MSG body sysFlag propsJson"; after COUNT, QUIET_S more (duplicates).
 * request NS TOPIC GROUP TIMEOUT_MS N   DefaultMQProducer.request(); "REPLY i body
 *     propsJson" / "TIMEOUT i" / "ERROR i exception".
 * respond NS TOPIC GROUP SECONDS DELAY_MS   a push consumer answering every request
 *     with MessageUtil.createReplyMessage(msg, "re:" + body) after DELAY_MS;
 *     "REPLIED body status" / "REPLY_ERROR body exception".
 * bench NS TOPIC GROUP THREADS SECONDS SIZE   sendMessageInTransaction, local no-op,
 *     commit; "RESULT threads= size= sent= tx_per_s= errors=".
 */
public class TxnTool {
    static int heartbeat() {
        return Integer.getInteger("txn.heartbeat", 1000);
    }

    static void out(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static String props(Message m) {
        return JSON.toJSONString(new java.util.TreeMap<>(m.getProperties()));
    }

    public static void main(String[] args) {
        int status = 0;
        try {
            switch (args[0]) {
                case "txn": txn(args); break;
                case "consume": consume(args); break;
                case "request": request(args); break;
                case "respond": respond(args); break;
                case "bench": bench(args); break;
                default: throw new IllegalArgumentException(args[0]);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            out("FAILED " + e.toString().replace('\n', ' '));
            status = 1;
        }
        System.exit(status);  // the client's threads are not daemons
    }

    static LocalTransactionState state(String word) {
        switch (word) {
            case "commit": return LocalTransactionState.COMMIT_MESSAGE;
            case "rollback": return LocalTransactionState.ROLLBACK_MESSAGE;
            default: return LocalTransactionState.UNKNOW;
        }
    }

    static void txn(String[] a) throws Exception {
        String ns = a[1], topic = a[2], group = a[3];
        int waitS = Integer.parseInt(a[4]);
        final List<String> specs = new ArrayList<>();
        for (int i = 5; i < a.length; i++) specs.add(a[i]);
        final Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        final Map<String, String> finals = new ConcurrentHashMap<>();
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("txn-" + ProcessHandle.current().pid());
        producer.setHeartbeatBrokerInterval(heartbeat());
        producer.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                String spec = (String) arg;
                String exec = spec.split(":")[0];
                out("EXEC " + new String(msg.getBody(), StandardCharsets.UTF_8));
                if (exec.equals("throw")) throw new IllegalStateException("local transaction failed");
                if (exec.equals("gate")) {
                    File gate = new File(System.getProperty("txn.gate"));
                    while (!gate.exists()) {
                        try { Thread.sleep(20); } catch (InterruptedException e) { return LocalTransactionState.UNKNOW; }
                    }
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
                return state(exec);
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String body = new String(msg.getBody(), StandardCharsets.UTF_8);
                String spec = body.substring(body.indexOf('-') + 1);
                String[] parts = spec.split(":");
                int n = checks.computeIfAbsent(body, k -> new AtomicInteger()).incrementAndGet();
                String answer = parts.length > 1 ? parts[Math.min(n, parts.length - 1)] : "unknown";
                if (parts[0].equals("gate")) answer = "commit";
                out("CHECK " + body + " " + msg.getProperty("TRANSACTION_CHECK_TIMES") + " " + msg.getTopic() + " "
                    + msg.getQueueId() + " " + answer);
                if (!answer.equals("unknown")) finals.put(body, answer);
                return state(answer);
            }
        });
        producer.start();
        int pending = 0;
        for (int i = 0; i < specs.size(); i++) {
            String spec = specs.get(i);
            String body = "m" + i + "-" + spec;
            Message msg = new Message(topic, "TagT", "key" + i, body.getBytes(StandardCharsets.UTF_8));
            String exec = spec.split(":")[0];
            TransactionSendResult r;
            try {
                r = producer.sendMessageInTransaction(msg, spec);
            } catch (Exception e) {
                out("SEND_ERROR " + i + " " + e.toString().replace('\n', ' '));
                continue;
            }
            out("SENT " + i + " " + r.getSendStatus() + " " + r.getLocalTransactionState() + " " + r.getMsgId() + " "
                + r.getOffsetMsgId() + " " + r.getQueueOffset() + " " + r.getTransactionId());
            if (!exec.equals("commit") && !exec.equals("rollback")) pending++;  // gate: its END is lost
        }
        long deadline = System.currentTimeMillis() + waitS * 1000L;
        String stop = System.getProperty("txn.stop");  // a file: once it exists, no more waiting
        while (finals.size() < pending && System.currentTimeMillis() < deadline
            && (stop == null || !new File(stop).exists())) {
            Thread.sleep(50);
        }
        Thread.sleep(Integer.getInteger("txn.linger", 500));  // the last END on its way
        out("DONE answered=" + finals.size() + " pending=" + pending);
        producer.shutdown();
    }

    static void consume(String[] a) throws Exception {
        String ns = a[1], topic = a[2], group = a[3];
        int count = Integer.parseInt(a[4]);
        int timeoutS = Integer.parseInt(a[5]);
        int quietS = Integer.parseInt(a[6]);
        final LongAdder seen = new LongAdder();
        final CountDownLatch enough = new CountDownLatch(Math.max(count, 0));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(ns);
        consumer.setInstanceName("consume-" + ProcessHandle.current().pid());
        consumer.setHeartbeatBrokerInterval(heartbeat());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                out("MSG " + new String(m.getBody(), StandardCharsets.UTF_8) + " " + m.getSysFlag() + " " + props(m));
                seen.increment();
                enough.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        enough.await(timeoutS, TimeUnit.SECONDS);
        Thread.sleep(quietS * 1000L);
        out("DONE " + seen.sum());
        consumer.shutdown();
    }

    static void request(String[] a) throws Exception {
        String ns = a[1], topic = a[2], group = a[3];
        long timeout = Long.parseLong(a[4]);
        int n = Integer.parseInt(a[5]);
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("request-" + ProcessHandle.current().pid());
        producer.setHeartbeatBrokerInterval(heartbeat());
        producer.start();
        for (int i = 0; i < n; i++) {
            Message msg = new Message(topic, "TagR", ("q" + i).getBytes(StandardCharsets.UTF_8));
            try {
                Message reply = producer.request(msg, timeout);
                out("REPLY " + i + " " + new String(reply.getBody(), StandardCharsets.UTF_8) + " " + props(reply));
            } catch (RequestTimeoutException e) {
                out("TIMEOUT " + i);
            } catch (Exception e) {
                out("ERROR " + i + " " + e.toString().replace('\n', ' '));
            }
        }
        out("DONE");
        producer.shutdown();
    }

    static void respond(String[] a) throws Exception {
        String ns = a[1], topic = a[2], group = a[3];
        int seconds = Integer.parseInt(a[4]);
        final long delay = Long.parseLong(a[5]);
        final DefaultMQProducer producer = new DefaultMQProducer(group + "_replier");
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("respond-" + ProcessHandle.current().pid());
        producer.setHeartbeatBrokerInterval(heartbeat());
        producer.start();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(ns);
        consumer.setInstanceName("respond-" + ProcessHandle.current().pid());
        consumer.setHeartbeatBrokerInterval(heartbeat());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                try {
                    if (delay > 0) Thread.sleep(delay);
                    Message reply = MessageUtil.createReplyMessage(m, ("re:" + body).getBytes(StandardCharsets.UTF_8));
                    SendResult r = producer.send(reply, 3000);
                    out("REPLIED " + body + " " + r.getSendStatus());
                } catch (Exception e) {
                    out("REPLY_ERROR " + body + " " + e.toString().replace('\n', ' '));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        out("READY");
        Thread.sleep(seconds * 1000L);
        out("DONE");
        consumer.shutdown();
        producer.shutdown();
    }

    static void bench(String[] a) throws Exception {
        String ns = a[1], topic = a[2], group = a[3];
        int threads = Integer.parseInt(a[4]);
        int seconds = Integer.parseInt(a[5]);
        int size = Integer.parseInt(a[6]);
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("bench-" + ProcessHandle.current().pid());
        producer.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer.start();
        final byte[] body = SendLoop.body(size);
        SendLoop loop = SendLoop.run(threads, seconds, "bench", () -> {
            TransactionSendResult r = producer.sendMessageInTransaction(new Message(topic, "TagB", body), null);
            return r.getLocalTransactionState() == LocalTransactionState.COMMIT_MESSAGE
                && r.getSendStatus() == org.apache.rocketmq.client.producer.SendStatus.SEND_OK;
        });
        Thread.sleep(300);  // the last oneway END on its way
        producer.shutdown();
        out("RESULT threads=" + threads + " size=" + size + " sent=" + loop.sent + " tx_per_s="
            + (long) (loop.sent / (double) seconds) + " errors=" + loop.errors);
    }
}
