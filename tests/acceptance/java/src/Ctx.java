import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/** What every scenario shares: the broker under test, unique names, client factories. */
final class Ctx {
    final String namesrv;
    final String brokerAddr;
    final String brokerName;
    final String cluster;
    final String prefix;
    /** --param K=V values, for the parametrized scenarios. */
    final Map<String, String> params = new java.util.concurrent.ConcurrentHashMap<>();
    private final AtomicInteger seq = new AtomicInteger();
    private final List<Runnable> closers = new CopyOnWriteArrayList<>();
    private DefaultMQAdminExt admin;

    Ctx(String namesrv, String brokerAddr, String brokerName, String cluster, String prefix) {
        this.namesrv = namesrv;
        this.brokerAddr = brokerAddr;
        this.brokerName = brokerName;
        this.cluster = cluster;
        this.prefix = prefix;
    }

    /** A topic or group name unique to this run. */
    String name(String s) {
        return prefix + "_" + s;
    }

    String instance() {
        return prefix + "-i" + seq.incrementAndGet();
    }

    DefaultMQProducer producer(String group) throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instance());
        p.setSendMsgTimeout(8000);
        p.start();
        closers.add(p::shutdown);
        return p;
    }

    /** A push consumer, not started: from the first offset, its own client instance. */
    DefaultMQPushConsumer push(String group) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        closers.add(c::shutdown);
        return c;
    }

    DefaultLitePullConsumer litePull(String group) {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        closers.add(c::shutdown);
        return c;
    }

    @SuppressWarnings("deprecation")
    DefaultMQPullConsumer pullConsumer(String group) throws MQClientException {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance());
        c.start();
        closers.add(c::shutdown);
        return c;
    }

    /**
     * Waits until {@code mq}'s consume queue holds {@code count} messages. Java's broker
     * answers SEND_OK once the commit log has a message and builds the consume queue after
     * (ReputMessageService), so a pull right after the last send can miss it.
     */
    @SuppressWarnings("deprecation")
    static void awaitQueued(DefaultMQPullConsumer pc, MessageQueue mq, long count) throws InterruptedException {
        await(10000, () -> {
            try {
                return pc.maxOffset(mq) >= count;
            } catch (MQClientException e) {
                return false;
            }
        });
    }

    /**
     * {@code p} on this world's name server with its own instance name and {@code listener},
     * started (the caller shuts it down).
     */
    TransactionMQProducer startTransactional(TransactionMQProducer p, TransactionListener listener)
        throws MQClientException {
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instance());
        p.setTransactionListener(listener);
        p.start();
        return p;
    }

    /** A transaction listener whose local transactions end {@code onExecute} and whose checks answer {@code onCheck}. */
    static TransactionListener fixedStates(LocalTransactionState onExecute, LocalTransactionState onCheck) {
        return new TransactionListener() {
            @Override public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return onExecute;
            }
            @Override public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return onCheck;
            }
        };
    }

    DefaultMQAdminExt newAdmin() throws MQClientException {
        DefaultMQAdminExt a = new DefaultMQAdminExt(8000);
        a.setNamesrvAddr(namesrv);
        a.setInstanceName(instance());
        a.setAdminExtGroup(name("admin" + seq.incrementAndGet()));
        a.start();
        closers.add(a::shutdown);
        return a;
    }

    /** One admin shared by the helpers. */
    synchronized DefaultMQAdminExt admin() throws MQClientException {
        if (admin == null) admin = newAdmin();
        return admin;
    }

    /** UPDATE_AND_CREATE_TOPIC on the broker, then wait until the name server routes it. */
    void createTopic(String topic, int queues) throws Exception {
        admin().createAndUpdateTopicConfig(brokerAddr, new TopicConfig(topic, queues, queues, 6));
        waitFor(15000, () -> routeQueues(topic) == queues, "route of " + topic);
    }

    int routeQueues(String topic) {
        try {
            TopicRouteData r = admin().examineTopicRouteInfo(topic);
            for (QueueData q : r.getQueueDatas()) return q.getWriteQueueNums();
        } catch (Exception e) {
            return -1;
        }
        return -1;
    }

    List<MessageQueue> queues(String topic, int n) {
        List<MessageQueue> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(new MessageQueue(topic, brokerName, i));
        return out;
    }

    /**
     * Every message of the topic's queues, pulled from offset 0 (DefaultMQPullConsumer),
     * until at least {@code want} are read or the time is up; sorted by (queue, offset).
     */
    @SuppressWarnings("deprecation")
    List<MessageExt> readAll(String topic, int queues, int want, long timeoutMs) throws Exception {
        DefaultMQPullConsumer c = pullConsumer(name("reader" + seq.incrementAndGet()));
        TreeMap<String, MessageExt> got = new TreeMap<>();
        long[] next = new long[queues];
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (got.size() < want && System.currentTimeMillis() < deadline) {
            boolean any = false;
            for (int q = 0; q < queues; q++) {
                PullResult r;
                try {
                    r = c.pull(new MessageQueue(topic, brokerName, q), "*", next[q], 32, 5000);
                } catch (MQClientException e) {
                    // A topic auto-created by a send reaches the name server by the broker's
                    // oneway re-registration (Java's broker): until then the route names no broker.
                    if (e.getMessage() == null || !e.getMessage().contains("not exist")) throw e;
                    break;
                }
                if (r.getPullStatus() == PullStatus.FOUND) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        got.put(String.format("%04d/%012d", m.getQueueId(), m.getQueueOffset()), m);
                    }
                    any = true;
                }
                next[q] = r.getNextBeginOffset();
            }
            if (!any) Thread.sleep(100);
        }
        return new ArrayList<>(got.values());
    }

    static void waitFor(long timeoutMs, BooleanSupplier cond, String what) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("timed out waiting for " + what);
            Thread.sleep(50);
        }
    }

    /** Wait until cond holds or the time is up; whether it holds. */
    static boolean await(long timeoutMs, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) return false;
            Thread.sleep(50);
        }
        return true;
    }

    /** A delivered message as facts: ids, position, tags, keys, user properties, times. */
    static Map<String, Object> facts(MessageExt m) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("msgId", m.getMsgId());
        f.put("topic", m.getTopic());
        f.put("queueId", m.getQueueId());
        f.put("queueOffset", m.getQueueOffset());
        f.put("reconsumeTimes", m.getReconsumeTimes());
        f.put("tags", m.getTags());
        f.put("keys", m.getKeys());
        f.put("body", new String(m.getBody(), java.nio.charset.StandardCharsets.UTF_8));
        f.put("bornTimestamp", m.getBornTimestamp());
        f.put("storeTimestamp", m.getStoreTimestamp());
        f.put("properties", new TreeMap<>(m.getProperties()));
        return f;
    }

    void close() {
        List<Runnable> all = new ArrayList<>(closers);
        Collections.reverse(all);
        for (Runnable r : all) {
            try {
                r.run();
            } catch (Throwable ignored) {
                // shutting down: nothing to report
            }
        }
    }
}
