import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/** The Java 4.9.8 client's producers and consumers against the broker under test. */
final class ClientScenarios {
    private ClientScenarios() {
    }

    static final String UNI = "\u00fc\u20ac\u00df";

    static Message msg(String topic, String mode, int i) {
        Message m = new Message(topic, "Tag_" + mode, "k_" + mode + "_" + i + " kk_" + mode,
            ("body-" + mode + "-" + i + "-" + UNI).getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("mode", mode);
        m.putUserProperty("idx", Integer.toString(i));
        m.putUserProperty("uni", UNI);
        return m;
    }

    /** Every send mode; each message read back with its body, tags, keys and properties intact. */
    static Map<String, Object> sendModes(Ctx c) throws Exception {
        String topic = c.name("send");
        // no createTopic: the first send auto-creates the topic from TBW102
        DefaultMQProducer p = c.producer(c.name("sendP"));
        Map<String, List<Message>> sent = new LinkedHashMap<>();
        Map<String, List<SendResult>> results = new LinkedHashMap<>();
        for (String mode : Arrays.asList("sync", "async", "oneway", "orderly", "batch")) {
            sent.put(mode, new ArrayList<>());
            results.put(mode, new CopyOnWriteArrayList<>());
        }
        List<String> asyncErrors = new CopyOnWriteArrayList<>();
        for (int i = 0; i < 3; i++) {
            Message m = msg(topic, "sync", i);
            results.get("sync").add(p.send(m));
            sent.get("sync").add(m);
        }
        CountDownLatch latch = new CountDownLatch(3);
        for (int i = 0; i < 3; i++) {
            Message m = msg(topic, "async", i);
            sent.get("async").add(m);
            p.send(m, new SendCallback() {
                @Override public void onSuccess(SendResult r) {
                    results.get("async").add(r);
                    latch.countDown();
                }
                @Override public void onException(Throwable e) {
                    asyncErrors.add(e.toString());
                    latch.countDown();
                }
            });
        }
        for (int i = 0; i < 3; i++) {
            Message m = msg(topic, "oneway", i);
            p.sendOneway(m);
            sent.get("oneway").add(m);
        }
        for (int i = 0; i < 3; i++) {
            Message m = msg(topic, "orderly", i);
            results.get("orderly").add(p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), 1));
            sent.get("orderly").add(m);
        }
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < 3; i++) batch.add(msg(topic, "batch", i));
        results.get("batch").add(p.send(batch));
        sent.get("batch").addAll(batch);
        latch.await(15, TimeUnit.SECONDS);

        int total = 0;
        for (List<Message> l : sent.values()) total += l.size();
        List<MessageExt> read = c.readAll(topic, 4, total, 15000);
        Map<String, MessageExt> byUniq = new HashMap<>();
        for (MessageExt m : read) byUniq.put(m.getMsgId(), m);

        Map<String, Object> modes = new LinkedHashMap<>();
        for (String mode : sent.keySet()) {
            List<String> problems = new ArrayList<>();
            int found = 0;
            for (Message m : sent.get(mode)) {
                String uniq = MessageClientIDSetter.getUniqID(m);
                MessageExt r = byUniq.get(uniq);
                if (r == null) {
                    problems.add("not read back: " + uniq);
                    continue;
                }
                found++;
                if (!Arrays.equals(r.getBody(), m.getBody())) problems.add(uniq + ": body differs");
                if (!m.getTags().equals(r.getTags())) problems.add(uniq + ": tags " + r.getTags());
                if (!m.getKeys().equals(r.getKeys())) problems.add(uniq + ": keys " + r.getKeys());
                for (String k : Arrays.asList("mode", "idx", "uni")) {
                    if (!m.getUserProperty(k).equals(r.getUserProperty(k))) {
                        problems.add(uniq + ": property " + k + "=" + r.getUserProperty(k));
                    }
                }
                if (!topic.equals(r.getTopic())) problems.add(uniq + ": topic " + r.getTopic());
                if (r.getReconsumeTimes() != 0) problems.add(uniq + ": reconsumeTimes " + r.getReconsumeTimes());
            }
            List<String> statuses = new ArrayList<>();
            for (SendResult r : results.get(mode)) {
                statuses.add(r.getSendStatus().name());
                if (mode.equals("batch")) continue;
                MessageExt back = byUniq.get(r.getMsgId());
                if (back == null) {
                    problems.add("send result msgId " + r.getMsgId() + " not read back");
                    continue;
                }
                // the answer's offset msgId, queue and offset name the stored record
                String backOffsetId = ((MessageClientExt) back).getOffsetMsgId();
                if (!backOffsetId.equals(r.getOffsetMsgId())) {
                    problems.add(r.getMsgId() + ": offsetMsgId " + r.getOffsetMsgId() + " read back as " + backOffsetId);
                }
                if (back.getQueueId() != r.getMessageQueue().getQueueId() || back.getQueueOffset() != r.getQueueOffset()) {
                    problems.add(r.getMsgId() + ": answered " + r.getMessageQueue().getQueueId() + "@" + r.getQueueOffset()
                        + ", stored " + back.getQueueId() + "@" + back.getQueueOffset());
                }
            }
            if (mode.equals("orderly")) {
                for (Message m : sent.get(mode)) {
                    MessageExt r = byUniq.get(MessageClientIDSetter.getUniqID(m));
                    if (r != null && r.getQueueId() != 1) problems.add("orderly message in queue " + r.getQueueId());
                }
            }
            if (mode.equals("batch") && !results.get(mode).isEmpty()) {
                // a batch's msgId: its messages' unique keys, comma-joined
                List<String> want = new ArrayList<>();
                for (Message m : sent.get(mode)) want.add(MessageClientIDSetter.getUniqID(m));
                String got = results.get(mode).get(0).getMsgId();
                if (!String.join(",", want).equals(got)) problems.add("batch msgId " + got + ", expected " + want);
            }
            Map<String, Object> f = new LinkedHashMap<>();
            f.put("sent", sent.get(mode).size());
            f.put("read", found);
            f.put("statuses", statuses);
            f.put("problems", problems);
            modes.put(mode, f);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("modes", modes);
        out.put("asyncErrors", asyncErrors);
        out.put("readTotal", read.size());
        out.put("routeQueues", c.routeQueues(topic));
        return out;
    }

    /**
     * A single send and a batch of two, each message's UNIQ_KEY set beforehand, so the
     * properties string the broker stores can be computed here as Java's broker does it
     * (SendMessageProcessor: the client's properties parsed into a HashMap, CLUSTER put,
     * WAIT removed, written back in HashMap order; a batch: each entry's own properties,
     * then the batch header's (WAIT) with CLUSTER, the CommitLog batch encoder's way).
     * The test reads the stored records raw and compares byte for byte.
     */
    static Map<String, Object> storedProps(Ctx c) throws Exception {
        String topic = c.name("props");
        c.createTopic(topic, 1);
        DefaultMQProducer p = c.producer(c.name("propsP"));
        MessageQueue mq = new MessageQueue(topic, c.brokerName, 0);
        List<Map<String, Object>> records = new ArrayList<>();

        Message single = msg(topic, "single", 0);
        single.putUserProperty("zeta", "z");
        MessageClientIDSetter.setUniqID(single);
        String clientProps = MessageDecoder.messageProperties2String(single.getProperties());
        SendResult r = p.send(single, mq);
        Map<String, String> stored = MessageDecoder.string2messageProperties(clientProps);
        stored.put(MessageConst.PROPERTY_CLUSTER, c.cluster);
        stored.remove(MessageConst.PROPERTY_WAIT_STORE_MSG_OK);
        records.add(record("single", r.getQueueOffset(), clientProps, MessageDecoder.messageProperties2String(stored)));

        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            Message m = msg(topic, "batch", i);
            MessageClientIDSetter.setUniqID(m);
            batch.add(m);
        }
        SendResult rb = p.send(batch, mq);
        Map<String, String> batchProps = MessageDecoder.string2messageProperties(
            MessageConst.PROPERTY_WAIT_STORE_MSG_OK + MessageDecoder.NAME_VALUE_SEPARATOR + "true"
                + MessageDecoder.PROPERTY_SEPARATOR);
        batchProps.put(MessageConst.PROPERTY_CLUSTER, c.cluster);
        String batchSuffix = MessageDecoder.messageProperties2String(batchProps);
        for (int i = 0; i < batch.size(); i++) {
            String own = MessageDecoder.messageProperties2String(batch.get(i).getProperties());
            // CommitLog's batch encoder puts a separator between when the entry's do not end with one
            String sep = !own.isEmpty() && !batchSuffix.isEmpty()
                && own.charAt(own.length() - 1) != MessageDecoder.PROPERTY_SEPARATOR ? String.valueOf(MessageDecoder.PROPERTY_SEPARATOR) : "";
            records.add(record("batch" + i, rb.getQueueOffset() + i, own, own + sep + batchSuffix));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("topic", topic);
        out.put("queueId", 0);
        out.put("records", records);
        return out;
    }

    private static Map<String, Object> record(String what, long offset, String sentProps, String expected) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("what", what);
        f.put("queueOffset", offset);
        f.put("sentProperties", sentProps);
        f.put("expectedStored", expected);
        return f;
    }

    /** The queues of {@code topic} the consumer pulls (its process queues not dropped). */
    private static Set<MessageQueue> owned(DefaultMQPushConsumer c, String topic) {
        Set<MessageQueue> out = new TreeSet<>();
        for (Map.Entry<MessageQueue, ProcessQueue> e
            : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().entrySet()) {
            if (e.getKey().getTopic().equals(topic) && !e.getValue().isDropped()) out.add(e.getKey());
        }
        return out;
    }

    /**
     * Wait until the consumers own all {@code queues} queues of the topic between them,
     * each queue once, each consumer some, unchanged for a second; whether they did.
     */
    private static boolean awaitBalanced(List<DefaultMQPushConsumer> consumers, String topic, int queues)
        throws InterruptedException {
        long deadline = System.currentTimeMillis() + 30000;
        long stableSince = -1;
        String last = "";
        while (System.currentTimeMillis() < deadline) {
            List<Set<MessageQueue>> sets = new ArrayList<>();
            Set<MessageQueue> union = new TreeSet<>();
            int total = 0;
            for (DefaultMQPushConsumer c : consumers) {
                Set<MessageQueue> o = owned(c, topic);
                sets.add(o);
                union.addAll(o);
                total += o.size();
            }
            boolean ok = union.size() == queues && total == queues;
            for (Set<MessageQueue> o : sets) ok &= !o.isEmpty();
            String now = sets.toString();
            if (ok && now.equals(last)) {
                if (System.currentTimeMillis() - stableSince >= 1000) return true;
            } else {
                stableSince = System.currentTimeMillis();
            }
            last = now;
            Thread.sleep(50);
        }
        return false;
    }

    /** Two push consumers in one group (clustering) share the queues and every message. */
    static Map<String, Object> pushClustering(Ctx c) throws Exception {
        String topic = c.name("clu");
        String group = c.name("cluG");
        c.createTopic(topic, 4);
        Map<String, List<String>> got = new ConcurrentHashMap<>();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (int k = 0; k < 2; k++) {
            String who = "c" + k;
            got.put(who, new CopyOnWriteArrayList<>());
            DefaultMQPushConsumer pc = c.push(group);
            pc.subscribe(topic, "*");
            pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) got.get(who).add(new String(m.getBody(), StandardCharsets.UTF_8));
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            pc.start();
            consumers.add(pc);
        }
        long t0 = System.currentTimeMillis();
        boolean balanced = awaitBalanced(consumers, topic, 4);
        double balancedAfter = (System.currentTimeMillis() - t0) / 1000.0;
        DefaultMQProducer p = c.producer(c.name("cluP"));
        int n = 40;
        for (int i = 0; i < n; i++) p.send(new Message(topic, ("m" + i).getBytes(StandardCharsets.UTF_8)));
        Ctx.await(20000, () -> new TreeSet<String>() {{
            addAll(got.get("c0"));
            addAll(got.get("c1"));
        }}.size() >= n);
        Thread.sleep(500);
        Set<String> all = new TreeSet<>();
        int deliveries = 0;
        Map<String, Object> per = new LinkedHashMap<>();
        for (String who : got.keySet()) {
            all.addAll(got.get(who));
            deliveries += got.get(who).size();
            per.put(who, got.get(who).size());
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", n);
        out.put("unique", all.size());
        out.put("deliveries", deliveries);
        out.put("perConsumer", per);
        out.put("balanced", balanced);
        out.put("balancedAfterS", balancedAfter);
        return out;
    }

    /** Two BROADCASTING consumers of one group each get every message. */
    static Map<String, Object> pushBroadcast(Ctx c) throws Exception {
        String topic = c.name("bc");
        String group = c.name("bcG");
        c.createTopic(topic, 4);
        Map<String, Set<String>> got = new ConcurrentHashMap<>();
        for (int k = 0; k < 2; k++) {
            String who = "c" + k;
            got.put(who, ConcurrentHashMap.newKeySet());
            DefaultMQPushConsumer pc = c.push(group);
            pc.setMessageModel(MessageModel.BROADCASTING);
            pc.subscribe(topic, "*");
            pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) got.get(who).add(new String(m.getBody(), StandardCharsets.UTF_8));
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            pc.start();
        }
        DefaultMQProducer p = c.producer(c.name("bcP"));
        int n = 20;
        for (int i = 0; i < n; i++) p.send(new Message(topic, ("m" + i).getBytes(StandardCharsets.UTF_8)));
        Ctx.await(20000, () -> got.get("c0").size() >= n && got.get("c1").size() >= n);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", n);
        out.put("c0", got.get("c0").size());
        out.put("c1", got.get("c1").size());
        return out;
    }

    /** sendOrderly by key, two orderly consumers (broker locks): each key's messages in order. */
    static Map<String, Object> pushOrderly(Ctx c) throws Exception {
        String topic = c.name("ord");
        String group = c.name("ordG");
        c.createTopic(topic, 4);
        List<String[]> deliveries = new CopyOnWriteArrayList<>();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (int k = 0; k < 2; k++) {
            String who = "c" + k;
            DefaultMQPushConsumer pc = c.push(group);
            pc.subscribe(topic, "*");
            pc.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    deliveries.add(new String[] {m.getUserProperty("key"), m.getUserProperty("seq"), who,
                        Integer.toString(m.getQueueId())});
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
            pc.start();
            consumers.add(pc);
        }
        long t0 = System.currentTimeMillis();
        boolean balanced = awaitBalanced(consumers, topic, 4);
        double balancedAfter = (System.currentTimeMillis() - t0) / 1000.0;
        DefaultMQProducer p = c.producer(c.name("ordP"));
        int keys = 8;
        int per = 10;
        Map<String, Integer> keyQueue = new TreeMap<>();
        for (int s = 0; s < per; s++) {
            for (int k = 0; k < keys; k++) {
                Message m = new Message(topic, ("k" + k + "-" + s).getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("key", "k" + k);
                m.putUserProperty("seq", Integer.toString(s));
                SendResult r = p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), k);
                keyQueue.put("k" + k, r.getMessageQueue().getQueueId());
            }
        }
        int n = keys * per;
        Ctx.await(30000, () -> deliveries.size() >= n);
        Thread.sleep(500);
        Map<String, Integer> last = new TreeMap<>();
        List<String> violations = new ArrayList<>();
        Set<String> unique = new TreeSet<>();
        for (String[] d : deliveries) {
            int seq = Integer.parseInt(d[1]);
            Integer prev = last.get(d[0]);
            if (prev != null && seq != prev + 1) violations.add(d[0] + ": " + seq + " after " + prev + " (" + d[2] + ")");
            last.put(d[0], seq);
            unique.add(d[0] + "/" + d[1]);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", n);
        out.put("deliveries", deliveries.size());
        out.put("unique", unique.size());
        out.put("violations", violations);
        out.put("balanced", balanced);
        out.put("balancedAfterS", balancedAfter);
        out.put("keyQueues", keyQueue);
        return out;
    }

    /** Subscription "TagA || TagB": TagC never delivered. */
    static Map<String, Object> tagFilter(Ctx c) throws Exception {
        String topic = c.name("tag");
        c.createTopic(topic, 4);
        Map<String, Integer> got = new ConcurrentHashMap<>();
        DefaultMQPushConsumer pc = c.push(c.name("tagG"));
        pc.subscribe(topic, "TagA || TagB");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) got.merge(String.valueOf(m.getTags()), 1, Integer::sum);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer p = c.producer(c.name("tagP"));
        for (int i = 0; i < 5; i++) {
            for (String tag : Arrays.asList("TagA", "TagB", "TagC")) {
                p.send(new Message(topic, tag, (tag + i).getBytes(StandardCharsets.UTF_8)));
            }
        }
        Ctx.await(20000, () -> got.getOrDefault("TagA", 0) + got.getOrDefault("TagB", 0) >= 10);
        Thread.sleep(1500);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("got", new TreeMap<>(got));
        return out;
    }

    /**
     * RECONSUME_LATER with maxReconsumeTimes 1: the message comes back from %RETRY%
     * (level 3: 10 s), fails again and goes to %DLQ%&lt;group&gt;.
     */
    static Map<String, Object> reconsumeLater(Ctx c) throws Exception {
        String topic = c.name("retry");
        String group = c.name("retryG");
        c.createTopic(topic, 4);
        // the retry topic made beforehand, so the consumer has its route at start and
        // pulls its queue from the first rebalance: the gap measures the broker's delay,
        // not when the client happens to learn the route (a 20 s rebalance or 30 s poll)
        c.createTopic("%RETRY%" + group, 1);
        List<Map<String, Object>> deliveries = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer pc = c.push(group);
        pc.setMaxReconsumeTimes(1);
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                Map<String, Object> f = Ctx.facts(m);
                f.put("at", now);
                deliveries.add(f);
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        pc.start();
        boolean retryOwned = Ctx.await(25000, () -> owned(pc, "%RETRY%" + group).size() == 1);
        DefaultMQProducer p = c.producer(c.name("retryP"));
        Message m = new Message(topic, "TagR", "kR", "retry me".getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("color", "red");
        SendResult sr = p.send(m);
        Ctx.await(45000, () -> deliveries.size() >= 2);
        String dlq = "%DLQ%" + group;
        MessageQueue dlqQueue = new MessageQueue(dlq, c.brokerName, 0);
        long[] dlqMax = {-1};
        AtomicReference<String> dlqError = new AtomicReference<>();
        Ctx.await(15000, () -> {
            try {
                dlqMax[0] = pc.getDefaultMQPushConsumerImpl().getmQClientFactory().getMQClientAPIImpl()
                    .getMaxOffset(c.brokerAddr, dlqQueue, 3000);
                dlqError.set(null);
            } catch (Exception e) {
                dlqError.set(e.toString());
            }
            return dlqMax[0] >= 1;
        });
        Thread.sleep(1000); // a third delivery would be a bug
        List<Double> gaps = new ArrayList<>();
        for (int i = 1; i < deliveries.size(); i++) {
            gaps.add(((Long) deliveries.get(i).get("at") - (Long) deliveries.get(i - 1).get("at")) / 1000.0);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("msgId", sr.getMsgId());
        out.put("retryQueueOwned", retryOwned);
        out.put("deliveries", deliveries);
        out.put("gapsS", gaps);
        if (deliveries.size() >= 2) {
            // when the retry copy was stored on %RETRY% (the broker's part of the gap)
            out.put("retryStoredAfterS",
                ((Long) deliveries.get(1).get("storeTimestamp") - (Long) deliveries.get(0).get("at")) / 1000.0);
        }
        out.put("dlqMaxOffset", dlqMax[0]);
        out.put("dlqError", dlqError.get());
        return out;
    }

    /** Delay levels 1 (1 s) and 2 (5 s): delivered after their delay, with Java's properties. */
    static Map<String, Object> delayLevels(Ctx c) throws Exception {
        String topic = c.name("delay");
        c.createTopic(topic, 4);
        Map<String, Map<String, Object>> got = new ConcurrentHashMap<>();
        DefaultMQPushConsumer pc = c.push(c.name("delayG"));
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                Map<String, Object> f = Ctx.facts(m);
                f.put("delayS", (now - m.getBornTimestamp()) / 1000.0);
                got.put(m.getUserProperty("level"), f);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer p = c.producer(c.name("delayP"));
        // its queues first (a rebalance missed under load is redone at the client's 20 s
        // timer, which a delay measured from the send would include), then its first pulls out
        awaitBalanced(Collections.singletonList(pc), topic, 4);
        Thread.sleep(1000);
        for (int level : new int[] {1, 2}) {
            Message m = new Message(topic, "TagD", ("level " + level).getBytes(StandardCharsets.UTF_8));
            m.setDelayTimeLevel(level);
            m.putUserProperty("level", Integer.toString(level));
            p.send(m);
        }
        Ctx.await(20000, () -> got.size() >= 2);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("got", new TreeMap<>(got));
        return out;
    }

    /** DefaultLitePullConsumer.subscribe: how long from start() to the first message. */
    static Map<String, Object> litePullSubscribe(Ctx c) throws Exception {
        String topic = c.name("lps");
        c.createTopic(topic, 4);
        DefaultMQProducer p = c.producer(c.name("lpsP"));
        DefaultLitePullConsumer lc = c.litePull(c.name("lpsG"));
        lc.subscribe(topic, "*");
        lc.setPollTimeoutMillis(200);
        lc.start();
        long t0 = System.currentTimeMillis();
        p.send(new Message(topic, "first".getBytes(StandardCharsets.UTF_8)));
        double assigned = -1;
        double first = -1;
        while (System.currentTimeMillis() - t0 < 40000) {
            if (assigned < 0 && !lc.assignment().isEmpty()) assigned = (System.currentTimeMillis() - t0) / 1000.0;
            List<MessageExt> got = lc.poll(200);
            if (!got.isEmpty()) {
                first = (System.currentTimeMillis() - t0) / 1000.0;
                break;
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("assignedAfterS", assigned);
        out.put("firstMessageAfterS", first);
        return out;
    }

    /** DefaultLitePullConsumer.assign + seek + commitSync; the committed offsets read back from the broker. */
    @SuppressWarnings("deprecation")
    static Map<String, Object> litePullAssign(Ctx c) throws Exception {
        String topic = c.name("lpa");
        String group = c.name("lpaG");
        c.createTopic(topic, 2);
        DefaultMQProducer p = c.producer(c.name("lpaP"));
        List<MessageQueue> mqs = c.queues(topic, 2);
        for (MessageQueue mq : mqs) {
            for (int i = 0; i < 5; i++) {
                p.send(new Message(topic, ("q" + mq.getQueueId() + "-" + i).getBytes(StandardCharsets.UTF_8)), mq);
            }
        }
        DefaultLitePullConsumer lc = c.litePull(group);
        lc.setAutoCommit(false);
        lc.setPollTimeoutMillis(200);
        lc.start();
        lc.assign(mqs);
        lc.seek(mqs.get(0), 2);
        lc.seek(mqs.get(1), 0);
        List<String> got = new ArrayList<>();
        long t0 = System.currentTimeMillis();
        while (got.size() < 8 && System.currentTimeMillis() - t0 < 20000) {
            for (MessageExt m : lc.poll(200)) got.add(m.getQueueId() + "@" + m.getQueueOffset());
        }
        lc.commitSync();
        Map<String, Object> committedLocal = new LinkedHashMap<>();
        for (MessageQueue mq : mqs) committedLocal.put(Integer.toString(mq.getQueueId()), lc.committed(mq));
        // The broker's offsets are read while lc still runs: its client persists them every
        // 5 s (and at shutdown). Java 4.9.8's broker can lose one of a group's two first
        // offset commits when they race (ConsumerOffsetManager.commitOffset makes the
        // topic@group table in each thread); the next persist, within the wait below,
        // stores it, as it would for any running consumer.
        DefaultMQPullConsumer check = c.pullConsumer(group);
        Map<String, Object> committedBroker = new LinkedHashMap<>();
        Ctx.await(10000, () -> {
            try {
                for (MessageQueue mq : mqs) {
                    committedBroker.put(Integer.toString(mq.getQueueId()), check.fetchConsumeOffset(mq, true));
                }
            } catch (Exception e) {
                committedBroker.put("error", e.toString());
            }
            return Long.valueOf(5).equals(committedBroker.get("0")) && Long.valueOf(5).equals(committedBroker.get("1"));
        });
        lc.shutdown();
        Collections.sort(got);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("got", got);
        out.put("committedLocal", committedLocal);
        out.put("committedBroker", committedBroker);
        return out;
    }

    /** The deprecated DefaultMQPullConsumer: FOUND, NO_NEW_MSG, tag filter, OFFSET_ILLEGAL, offsets. */
    @SuppressWarnings("deprecation")
    static Map<String, Object> pullConsumer(Ctx c) throws Exception {
        String topic = c.name("pull");
        String group = c.name("pullG");
        c.createTopic(topic, 2);
        DefaultMQProducer p = c.producer(c.name("pullP"));
        MessageQueue q0 = new MessageQueue(topic, c.brokerName, 0);
        MessageQueue q1 = new MessageQueue(topic, c.brokerName, 1);
        for (int i = 0; i < 6; i++) {
            p.send(new Message(topic, i % 2 == 0 ? "TagA" : "TagB", ("p" + i).getBytes(StandardCharsets.UTF_8)), q0);
        }
        DefaultMQPullConsumer pc = c.pullConsumer(group);
        Ctx.awaitQueued(pc, q0, 6);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("queues", pc.fetchSubscribeMessageQueues(topic).size());
        out.put("all", pullFacts(pc.pull(q0, "*", 0, 32)));
        out.put("fromEnd", pullFacts(pc.pull(q0, "*", 6, 32)));
        out.put("tagA", pullFacts(pc.pull(q0, "TagA", 0, 32)));
        out.put("beyondEnd", pullFacts(pc.pull(q0, "*", 100, 32)));
        out.put("emptyQueue", pullFacts(pc.pull(q1, "*", 0, 32)));
        out.put("maxOffset", pc.maxOffset(q0));
        out.put("minOffset", pc.minOffset(q0));
        pc.updateConsumeOffset(q0, 4);
        // (shutdown persists only the queues a rebalance assigned: none here)
        pc.getDefaultMQPullConsumerImpl().getOffsetStore().persist(q0);
        DefaultMQPullConsumer again = c.pullConsumer(group);
        long[] stored = {-2};
        Ctx.await(10000, () -> {
            try {
                stored[0] = again.fetchConsumeOffset(q0, true);
            } catch (Exception e) {
                stored[0] = -3;
            }
            return stored[0] == 4;
        });
        out.put("storedOffset", stored[0]);
        return out;
    }

    private static Map<String, Object> pullFacts(PullResult r) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("status", r.getPullStatus().name());
        f.put("nextBeginOffset", r.getNextBeginOffset());
        f.put("minOffset", r.getMinOffset());
        f.put("maxOffset", r.getMaxOffset());
        List<String> bodies = new ArrayList<>();
        if (r.getMsgFoundList() != null) {
            for (MessageExt m : r.getMsgFoundList()) bodies.add(m.getTags() + ":" + new String(m.getBody(), StandardCharsets.UTF_8));
        }
        f.put("messages", bodies);
        return f;
    }

    /**
     * The largest body the broker takes (maxMessageSize bytes: 4.9.8 limits the body)
     * and one byte more; compression off, the client's own limit raised so the broker
     * decides; the large one read back whole.
     */
    @SuppressWarnings("deprecation")
    static Map<String, Object> maxSize(Ctx c) throws Exception {
        int limit = 4 * 1024 * 1024;
        String topic = c.name("big");
        c.createTopic(topic, 1);
        DefaultMQProducer p = c.producer(c.name("bigP"));
        p.setMaxMessageSize(2 * limit);
        p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        MessageQueue mq = new MessageQueue(topic, c.brokerName, 0);
        Random rnd = new Random(28);
        Map<String, Object> out = new LinkedHashMap<>();
        byte[] fit = new byte[limit];
        rnd.nextBytes(fit);
        try {
            SendResult r = p.send(new Message(topic, fit), mq);
            out.put("fit", r.getSendStatus().name());
            out.put("fitOffset", r.getQueueOffset());
        } catch (MQBrokerException e) {
            out.put("fit", "refused " + e.getResponseCode() + ": " + e.getErrorMessage());
        }
        byte[] over = new byte[limit + 1];
        rnd.nextBytes(over);
        try {
            SendResult r = p.send(new Message(topic, over), mq);
            out.put("over", r.getSendStatus().name());
        } catch (MQBrokerException e) {
            out.put("over", "refused");
            out.put("overCode", e.getResponseCode());
        }
        DefaultMQPullConsumer pc = c.pullConsumer(c.name("bigG"));
        Ctx.awaitQueued(pc, mq, 1);
        PullResult pr = pc.pull(mq, "*", 0, 1);
        out.put("readStatus", pr.getPullStatus().name());
        if (pr.getMsgFoundList() != null && !pr.getMsgFoundList().isEmpty()) {
            byte[] body = pr.getMsgFoundList().get(0).getBody();
            out.put("readLength", body.length);
            out.put("readIntact", MessageDigest.isEqual(
                MessageDigest.getInstance("SHA-256").digest(body), MessageDigest.getInstance("SHA-256").digest(fit)));
        }
        out.put("maxOffset", pc.maxOffset(mq));
        return out;
    }

    /** A producer with vipChannelEnabled sends through the broker's VIP port (listen port - 2). */
    static Map<String, Object> vipChannel(Ctx c) throws Exception {
        String topic = c.name("vip");
        c.createTopic(topic, 4);
        DefaultMQProducer p = new DefaultMQProducer(c.name("vipP"));
        p.setNamesrvAddr(c.namesrv);
        p.setInstanceName(c.instance());
        p.setVipChannelEnabled(true);
        p.setSendMsgTimeout(3000);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            SendResult r = p.send(new Message(topic, "vip".getBytes(StandardCharsets.UTF_8)));
            out.put("status", r.getSendStatus().name());
        } catch (Exception e) {
            out.put("status", "error");
            out.put("error", e.toString());
        } finally {
            p.shutdown();
        }
        return out;
    }
}
